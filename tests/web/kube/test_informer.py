"""The informer against the HTTPS stand-in cluster: paginated list, watch, bookmarks, 410 Gone, reconnects;
which read each list is (watch cache, not older than, consistent, streamed); a relist in place."""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from noe_core.testing import node
from noe_web.controller.pod_fields import POD_LIST
from noe_web.controller.podview import SharedParts, slim_pod
from noe_web.kube.client import KubeClient
from noe_web.kube.collector import COLLECTOR
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.informer import BACKOFF_START, Informer, Key
from tests.support.certs import CA, make_ca
from tests.support.fake_cluster import FakeCluster, start_fake_cluster
from tests.support.fake_kube_api import CACHE, CONSISTENT, CONTINUE, NOT_OLDER, STREAM, WATCH
from tests.support.realistic_cluster import realistic_pods

TOKEN = "informer-token"
Change = tuple[Key, dict[str, Any] | None, dict[str, Any] | None]


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("informer kube CA", tmp_path_factory.mktemp("informer-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.2
        yield c


def a_pod(name: str, namespace: str = "apps", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "app:1"}]},
        "status": {"phase": "Pending"},
    }


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What this informer keeps: name, namespace and labels (not the status, not the resourceVersion)."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta.get(k) for k in ("name", "namespace", "labels")}}


class Running:
    """An informer on /api/v1/pods, and everything it reported."""

    def __init__(
        self, cluster: FakeCluster, tmp_path: Path, *, page_size: int = 500, slim: Any = slim, **options: Any
    ) -> None:
        self.kube = KubeClient(load_kubeconfig(cluster.api.write_kubeconfig(tmp_path / "kc", token=TOKEN)))
        self.changes: list[Change] = []
        self.restarts: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self.informer = Informer(
            self.kube,
            "/api/v1/pods",
            slim=slim,
            on_change=self._changed,
            on_restart=lambda reason: self.restarts.append((reason, time.monotonic())),
            page_size=page_size,
            watch_seconds=60,
            **options,
        )

    def _changed(self, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        with self._lock:
            self.changes.append((key, old, new))

    def since(self, count: int) -> list[Change]:
        """The changes reported after the first ``count``."""
        with self._lock:
            return self.changes[count:]

    def reasons(self) -> list[str]:
        return [reason for reason, _ in self.restarts]


@pytest.fixture
def run(cluster: FakeCluster, tmp_path: Path) -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(**kw: Any) -> Running:
        running = Running(cluster, tmp_path, **kw)
        running.informer.start()
        assert running.informer.synced.wait(15), "never synced"
        started.append(running)
        return running

    yield start
    for running in started:
        running.informer.stop()
        running.kube.close()


def watching(cluster: FakeCluster, running: Running) -> None:
    """Wait until the informer's watch is open and answering: a bookmark carried a new version to it."""
    cluster.add("nodes", node(f"n-{cluster.state.rv}", "arm64"))  # another resource moves the cluster's version
    target = str(cluster.state.rv)
    assert cluster.wait(lambda: running.informer.resource_version == target, 5), "no bookmark came"


def lists(cluster: FakeCluster) -> list[dict[str, str]]:
    return [
        _query(r.path)
        for r in cluster.api.requests_snapshot()
        if r.path.startswith("/api/v1/pods?") and "watch=1" not in r.path
    ]


def watches(cluster: FakeCluster) -> list[dict[str, str]]:
    return [
        _query(r.path)
        for r in cluster.api.requests_snapshot()
        if r.path.startswith("/api/v1/pods?") and "watch=1" in r.path
    ]


def _query(path: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(path).query).items()}


def test_the_first_list_comes_in_pages_then_one_watch_from_its_version(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    for index in range(1100):
        cluster.add("pods", a_pod(f"p-{index:04d}", app="web"))
    running = run()
    pages = lists(cluster)
    assert [p["limit"] for p in pages] == ["500"] * 3
    assert ["continue" in p for p in pages] == [False, True, True]
    assert len(running.informer) == 1100 and running.informer.lists == 1
    assert len(running.changes) == 1100 and all(old is None for _, old, _ in running.changes)
    assert running.informer.get(("apps", "p-0042")) == slim(a_pod("p-0042", app="web"))
    assert cluster.wait(lambda: watches(cluster), 5)
    first = watches(cluster)[0]
    assert first["resourceVersion"] == str(cluster.state.rv) and first["allowWatchBookmarks"] == "true"


def test_watch_events_reach_the_cache_and_only_kept_fields_count_as_changes(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.add("pods", a_pod("old"))
    running = run()
    count = len(running.changes)
    cluster.add("pods", a_pod("new"))
    cluster.update("pods", "apps", "old", lambda p: p["metadata"]["labels"].update(team="a"))
    cluster.update("pods", "apps", "old", lambda p: p["status"].update(phase="Running"))  # not kept: no change
    kube = running.kube
    kube.call("DELETE", "/api/v1/namespaces/apps/pods/new")
    assert cluster.wait(lambda: len(running.since(count)) >= 3, 5)
    time.sleep(0.5)
    assert running.since(count) == [
        (("apps", "new"), None, slim(a_pod("new"))),
        (("apps", "old"), slim(a_pod("old")), slim(a_pod("old", team="a"))),
        (("apps", "new"), slim(a_pod("new")), None),
    ]
    assert running.informer.key_list() == [("apps", "old")]
    assert running.informer.lists == 1 and running.reasons() == []


def test_bookmarks_move_the_version_forward_and_a_dropped_watch_resumes_from_it_without_a_list(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    running = run()
    watching(cluster, running)
    target = running.informer.resource_version
    assert running.changes == []
    count = len(running.changes)
    with cluster.watches_held():  # the stand-in drops the watch and holds the next one
        assert cluster.wait(lambda: "ended" in running.reasons(), 5)
        cluster.add("pods", a_pod("during"))
    assert cluster.wait(lambda: running.since(count), 5)
    assert running.since(count) == [(("apps", "during"), None, slim(a_pod("during")))]  # replayed, not missed
    assert running.informer.lists == 1 and len(lists(cluster)) == 1
    assert any(w["resourceVersion"] == target for w in watches(cluster)[1:])


def test_410_gone_lists_again_and_reports_what_vanished_meanwhile(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.add("pods", a_pod("stays"))
    cluster.add("pods", a_pod("goes"))
    running = run()
    watching(cluster, running)
    count = len(running.changes)
    with cluster.watches_held():
        assert cluster.wait(lambda: "ended" in running.reasons(), 5)
        running.kube.call("DELETE", "/api/v1/namespaces/apps/pods/goes")
        cluster.add("pods", a_pod("arrives"))
        cluster.compact()  # the history the informer would resume from is gone
    assert cluster.wait(lambda: running.informer.lists == 2, 10)
    assert "gone" in running.reasons()
    assert cluster.wait(lambda: len(running.since(count)) >= 2, 5)
    assert sorted(running.since(count), key=lambda c: c[0]) == [
        (("apps", "arrives"), None, slim(a_pod("arrives"))),
        (("apps", "goes"), slim(a_pod("goes")), None),
    ]
    assert sorted(running.informer.key_list()) == [("apps", "arrives"), ("apps", "stays")]
    # and it watches again from the new list's version
    cluster.add("pods", a_pod("after"))
    assert cluster.wait(lambda: running.informer.get(("apps", "after")), 5)


def test_an_api_that_fails_is_retried_with_a_growing_backoff_then_the_watch_resumes(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    running = run()
    watching(cluster, running)
    count = len(running.changes)
    cluster.state.fail_with = 503  # every request from now on fails (an open watch goes on streaming)
    with cluster.watches_held():  # the stand-in drops the open watch: the informer comes back into the failures
        assert cluster.wait(lambda: "ended" in running.reasons(), 5)
    assert cluster.wait(lambda: running.reasons().count("error") >= 4, 10)
    cluster.add("pods", a_pod("during-outage"))
    cluster.state.fail_with = 0
    assert cluster.wait(lambda: running.informer.get(("apps", "during-outage")), 10)
    errors = [at for reason, at in running.restarts if reason == "error"]
    gaps = [b - a for a, b in itertools.pairwise(errors)]
    # each wait doubles (±20% jitter); a gap is that wait plus one failed request, so only its floor is exact
    for attempt, gap in enumerate(gaps[:3]):
        assert gap >= BACKOFF_START * 2**attempt * 0.8, (attempt, gaps)
    assert gaps[0] < gaps[2]  # not one long wait each time: they grew
    assert running.informer.lists == 1  # the history was still there: resumed, not listed again
    assert running.since(count) == [(("apps", "during-outage"), None, slim(a_pod("during-outage")))]


def test_stop_ends_the_informer_thread(cluster: FakeCluster, tmp_path: Path) -> None:
    running = Running(cluster, tmp_path)
    running.informer.start()
    assert running.informer.synced.wait(15)
    thread = running.informer._thread
    assert thread is not None
    running.informer.stop()
    thread.join(5)  # the next bookmark wakes it
    assert not thread.is_alive()
    running.kube.close()


def test_a_list_that_fails_leaves_the_garbage_collector_running(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.state.fail_with = 503  # every list fails at its first request: paused, then resumed each time
    running = Running(cluster, tmp_path)
    running.informer.start()
    assert cluster.wait(lambda: running.reasons().count("error") >= 2, 10)
    thread = running.informer._thread
    assert thread is not None
    running.informer.stop()
    thread.join(10)
    assert not thread.is_alive()
    running.kube.close()
    assert not running.informer._pausing  # its pause was given back each time (the collector is process-wide)
    assert COLLECTOR.lists == 0 or any(t.name.startswith("noe-informer") for t in threading.enumerate())


class Spy:
    """The pod schema, saying whether it read each page or event it was given."""

    def __init__(self, taken: list[bool]) -> None:
        self.taken = taken

    def decode(self, data: bytes) -> Any:
        assert POD_LIST is not None
        decoded = POD_LIST.decode(data)
        self.taken.append(decoded is not None)
        return decoded

    def decode_event(self, line: bytes) -> Any:
        assert POD_LIST is not None
        decoded = POD_LIST.decode_event(line)
        self.taken.append(decoded is not None)
        return decoded


def test_pods_decoded_by_their_schema_are_cached_as_pods_decoded_whole(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    for pod in realistic_pods(1200, 30):  # three pages of 500
        cluster.add("pods", pod)
    view = functools.partial(slim_pod, shared=SharedParts())
    taken: list[bool] = []

    typed, whole = run(slim=view, schema=Spy(taken), page_size=500), run(slim=view, page_size=500)
    assert taken[:3] == [True, True, True]  # every page read by the schema (then the watch's bookmarks, whole)
    assert len(typed.informer) == len(whole.informer) == 1200
    assert typed.informer.values() == whole.informer.values()
    assert not typed.informer._pausing and not whole.informer._pausing


def test_streamed_pods_and_watch_events_decoded_by_their_schema_are_cached_as_decoded_whole(
    cluster: FakeCluster, run: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="noe.kube.informer")
    cluster.state.watch_list = True
    for pod in realistic_pods(300, 10):
        cluster.add("pods", pod)
    taken: list[bool] = []
    view = functools.partial(slim_pod, shared=SharedParts())
    typed, whole = run(slim=view, schema=Spy(taken), streaming=True), run(slim=view, streaming=True)
    assert typed.informer.last_read == STREAM and len(typed.informer) == 300
    assert taken.count(True) == 300  # every initial event through the schema; the closing bookmark whole
    assert typed.informer.values() == whole.informer.values()

    def listed() -> list[tuple[str, int, bool]]:
        found = [r.fields for r in caplog.records if getattr(r, "fields", {}).get("event") == "listed"]
        return [(f["read"], f["objects"], f["paginated"]) for f in found]

    assert cluster.wait(lambda: len(listed()) == 2, 5)  # written just after the cache is synced
    assert listed() == [(STREAM, 300, False)] * 2  # a streamed list is logged as a paged one is
    later = {**list(realistic_pods(301, 10))[300], "extra": {"deep": [1, {"x": 2}]}}
    counts = len(typed.changes), len(whole.changes)
    cluster.add("pods", later)
    assert cluster.wait(lambda: typed.since(counts[0]) and whole.since(counts[1]), 5)
    assert typed.since(counts[0]) == whole.since(counts[1])  # the watch's event too
    assert taken.count(True) == 301


# --- which read each list is ----------------------------------------------------------------------


def reads(cluster: FakeCluster) -> list[tuple[str, int]]:
    """Each list and watch of pods: (kind of read, status)."""
    return [(r.kind, r.status) for r in cluster.api.reads("pods")]


def expire(cluster: FakeCluster, running: Running, change: Callable[[], None] = lambda: None) -> None:
    """Break the informer's watch, ``change`` the cluster meanwhile, and compact its history: it must list again."""
    lists_before = running.informer.lists
    with cluster.watches_held():
        assert cluster.wait(lambda: "ended" in running.reasons(), 5)
        change()
        cluster.compact()
    assert cluster.wait(lambda: running.informer.lists == lists_before + 1, 10), "no relist"


def test_the_first_list_is_read_from_the_watch_cache_and_the_relist_after_410_not_older_than_the_last_version(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.add("pods", a_pod("a"))
    running = run()
    watching(cluster, running)
    last_seen = running.informer.resource_version
    expire(cluster, running, lambda: cluster.add("pods", a_pod("b")))
    pod_reads = cluster.api.reads("pods")
    listed = [r for r in pod_reads if r.kind != WATCH]
    assert [(r.kind, r.status) for r in listed] == [(CACHE, 200), (NOT_OLDER, 200)]
    assert listed[0].query["resourceVersion"] == "0"
    assert listed[1].query["resourceVersion"] == last_seen  # never back in time
    assert listed[1].query["resourceVersionMatch"] == "NotOlderThan"
    assert sorted(running.informer.key_list()) == [("apps", "a"), ("apps", "b")]
    assert running.informer.last_read == NOT_OLDER


def test_a_watch_cache_that_ignores_limit_answers_at_once_and_the_relist_asks_for_no_pages(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.state.cache_ignores_limit = True  # an API server before 1.33
    for index in range(1100):
        cluster.add("pods", a_pod(f"p-{index:04d}"))
    running = run()
    assert len(running.informer) == 1100 and len(lists(cluster)) == 1  # one answer, read item by item
    assert not running.informer.paginated
    watching(cluster, running)
    expire(cluster, running, lambda: cluster.delete("pods", "apps", "p-0007"))
    relist = [r for r in cluster.api.reads("pods") if r.kind == NOT_OLDER]
    assert len(relist) == 1 and "limit" not in relist[0].query  # with a limit, an old server would ask etcd
    assert len(running.informer) == 1099 and running.informer.get(("apps", "p-0007")) is None


def test_a_paged_watch_cache_list_reads_every_page_from_one_snapshot(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    for index in range(25):
        cluster.add("pods", a_pod(f"p-{index:02d}"))
    pages: list[str] = []
    original = cluster.api.server.RequestHandlerClass._list  # type: ignore[attr-defined]

    def list_and_change(handler: Any, kind: str, query: dict[str, str], namespace: str = "") -> None:
        original(handler, kind, query, namespace)
        if kind == "pods" and len(pages) < 2:
            pages.append(query.get("continue", ""))
            cluster.add("pods", a_pod(f"z-during-{len(pages)}"))  # written while the list is being read

    cluster.api.server.RequestHandlerClass._list = list_and_change  # type: ignore[attr-defined]
    try:
        running = run(page_size=10)
    finally:
        cluster.api.server.RequestHandlerClass._list = original  # type: ignore[attr-defined]
    assert [r.kind for r in cluster.api.reads("pods")][:3] == [CACHE, CONTINUE, CONTINUE]
    assert len([k for k in running.informer.key_list() if k[1].startswith("p-")]) == 25
    # the pods written during the list are not in it (its snapshot is older) but reach the cache by the watch
    assert cluster.wait(lambda: running.informer.get(("apps", "z-during-2")), 5)


def test_a_relist_the_server_cannot_serve_at_that_version_falls_back_to_a_consistent_read(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.state.too_old_lists = True
    cluster.add("pods", a_pod("a"))
    running = run()
    watching(cluster, running)
    expire(cluster, running, lambda: cluster.add("pods", a_pod("b")))
    assert [k for k in reads(cluster) if k[0] != WATCH] == [(CACHE, 200), (NOT_OLDER, 410), (CONSISTENT, 200)]
    assert running.informer.last_read == CONSISTENT
    assert sorted(running.informer.key_list()) == [("apps", "a"), ("apps", "b")]


def test_a_consistent_informer_never_reads_the_watch_cache(cluster: FakeCluster, run: Callable[..., Running]) -> None:
    cluster.add("pods", a_pod("a"))
    running = run(consistent=True)
    watching(cluster, running)
    expire(cluster, running, lambda: cluster.add("pods", a_pod("b")))
    assert [k for k in reads(cluster) if k[0] != WATCH] == [(CONSISTENT, 200), (CONSISTENT, 200)]
    assert all("resourceVersion" not in r.query for r in cluster.api.reads("pods") if r.kind == CONSISTENT)


def test_a_streaming_list_where_the_server_offers_it_then_the_same_watch_goes_on(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.state.watch_list = True
    for index in range(30):
        cluster.add("pods", a_pod(f"p-{index:02d}"))
    running = run(streaming=True)
    assert len(running.informer) == 30 and running.informer.last_read == STREAM
    assert lists(cluster) == []  # no list request at all
    first = cluster.api.reads("pods")[0]
    assert (first.kind, first.status) == (STREAM, 200)
    assert first.query["sendInitialEvents"] == "true" and first.query["resourceVersionMatch"] == "NotOlderThan"
    assert first.query.get("resourceVersion", "") == ""  # the newest state (consistent), from the watch cache
    count = len(running.changes)
    cluster.add("pods", a_pod("later"))
    assert cluster.wait(lambda: running.since(count), 5) == [(("apps", "later"), None, slim(a_pod("later")))]
    assert len(cluster.api.reads("pods")) == 1  # the same stream carried the change
    watching(cluster, running)
    last_seen = running.informer.resource_version
    expire(cluster, running, lambda: cluster.delete("pods", "apps", "p-03"))
    again = [r for r in cluster.api.reads("pods") if r.kind == STREAM][-1]
    assert again.query["resourceVersion"] == last_seen and again.query["resourceVersionMatch"] == "NotOlderThan"
    assert running.informer.get(("apps", "p-03")) is None and len(running.informer) == 30
    assert (("apps", "p-03"), slim(a_pod("p-03")), None) in running.since(count)


def test_a_streaming_list_refused_by_the_server_falls_back_to_lists_from_the_watch_cache(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    cluster.add("pods", a_pod("a"))
    running = run(streaming=True)  # the stand-in's WatchList gate is off
    assert running.informer.stream_refused and running.informer.last_read == CACHE
    assert reads(cluster)[:2] == [(STREAM, 422), (CACHE, 200)]
    assert cluster.wait(lambda: (WATCH, 200) in reads(cluster), 5)
    assert running.reasons() == []  # a refused stream is no watch restart


def test_a_relist_applies_in_place_and_holds_no_second_copy_of_the_cache(
    cluster: FakeCluster, run: Callable[..., Running]
) -> None:
    """Peak memory during a relist stays well below a second copy of the cache (tracemalloc, not timed)."""
    pods = 1500
    for index in range(pods):
        pod = a_pod(f"p-{index:04d}", app="web", team=f"t{index % 9}")
        pod["spec"]["containers"][0]["env"] = [{"name": f"V{k}", "value": f"{index}-{k}" * 8} for k in range(12)]
        cluster.add("pods", pod)

    def keep_spec(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": slim(obj)["metadata"], "spec": obj.get("spec")}  # a cache that holds something

    tracemalloc.start()
    try:
        empty = tracemalloc.get_traced_memory()[0]
        running = run(page_size=50, slim=keep_spec)
        watching(cluster, running)
        steady = tracemalloc.get_traced_memory()[0]
        cache = steady - empty
        tracemalloc.reset_peak()
        expire(cluster, running, lambda: cluster.update("pods", "apps", "p-0001", lambda p: p["spec"].update(x=1)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(running.informer) == pods and running.informer.get(("apps", "p-0001"))["spec"]["x"] == 1  # type: ignore[index]
    assert cache > 1_000_000, cache  # the cache is what the measure is about
    assert peak - steady < cache * 0.4, (peak - steady, cache)  # a second copy would be at least ``cache``
