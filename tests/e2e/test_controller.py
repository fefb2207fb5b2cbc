"""``noe controller`` against the HTTPS stand-in cluster (tests/support/fake_cluster.py) and the real registry.

Each test starts its own controller (the command's own ``start``, from parsed
flags, through a kubeconfig) with short leases, and asserts what a cluster
user would see: which pods were evicted, which Events were written, that no
pod was ever deleted directly.
"""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests
import yaml

from noe_core.placement.gate import SCHEDULING_GATE
from noe_core.policies.settings import PolicySettings
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.testing import admission_review, node, pod, schedulable
from noe_web.controller.command import Running
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService
from tests.support.certs import CA, make_ca
from tests.support.cli import run_cli
from tests.support.controller import Controllers, settle, spawn_controller
from tests.support.fake_cluster import ClusterHandler, FakeCluster, owned_by, ready, start_fake_cluster
from tests.support.images import PushedImage, push_docker_single, push_oci_single
from tests.support.noe_serve import apply, post_review, start_noe
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer
from tests.support.relay import start_relay

pytestmark = [pytest.mark.registry]

TOKEN = "controller-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("controller kube CA", tmp_path_factory.mktemp("controller-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.3
        c.add("nodes", node("n-arm64", "arm64"))
        c.add("nodes", node("n-amd64", "amd64"))
        yield c


@pytest.fixture
def run_controller(cluster: FakeCluster, tmp_path: Path) -> Iterator[Callable[..., Running]]:
    controllers = Controllers(cluster, tmp_path, TOKEN)
    yield controllers
    controllers.stop()


def a_pod(
    name: str,
    images: list[str],
    *,
    namespace: str = "apps",
    node: str | None = "n-arm64",
    owner: tuple[str, str] | None = ("ReplicaSet", "web-5d8f"),
    is_ready: bool = False,
    labels: dict[str, str] | None = None,
    statuses: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": name}}
    if owner is not None:
        meta["ownerReferences"] = owned_by(*owner)
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}
    if node:
        spec["nodeName"] = node
    status = ready(is_ready)
    if statuses is not None:
        status["containerStatuses"] = statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def no_direct_delete(cluster: FakeCluster) -> None:
    assert not [w for w in cluster.writes() if w[0] == "DELETE"]


# ----------------------------------------------------------------------------- misplaced pods


def test_owned_not_ready_pod_on_wrong_arch_is_evicted_exactly_once(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    for name in ("web-5d8f-a", "web-5d8f-c"):  # two replicas, examined by two workers at once
        cluster.add("pods", a_pod(name, [amd64_only]))
    running = run_controller()
    assert cluster.wait(lambda: cluster.state.evicted, 15)
    settle(cluster, running)
    assert len(cluster.state.evicted) == 1
    evicted = cluster.state.evicted[0][1]
    # a replacement lands on arm64 again: same owner, same image digest, same architecture → not evicted
    cluster.add("pods", a_pod("web-5d8f-b", [amd64_only]))
    settle(cluster, running)
    assert cluster.state.evicted == [("apps", evicted)]
    assert cluster.get("pods", "apps", "web-5d8f-b") is not None
    events = cluster.events("IncompatibleNode")
    assert [e["involvedObject"]["name"] for e in events] == [evicted]
    assert "evicted through the Eviction API" in events[0]["message"] and "arm64" in events[0]["message"]
    no_direct_delete(cluster)


def test_a_pod_listed_before_its_node_is_still_judged_on_that_node(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    pushed_images: dict[str, PushedImage],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first page of pods comes, then the nodes, then the last page: a pod examined as its page came would
    be judged on no node, its node's arrival would not bring it back (the pods are not all listed yet), and
    the full pass would skip it as examined. Workers wait for both caches, as client-go's controllers do."""
    list_or_watch = ClusterHandler._list_or_watch
    started = time.monotonic()

    def slow(self: ClusterHandler, kind: str, query: dict[str, str], namespace: str = "") -> None:
        if query.get("watch") not in ("1", "true") and time.monotonic() - started < 10:
            if kind == "nodes":
                time.sleep(1.0)
            elif kind == "pods" and query.get("continue"):
                time.sleep(2.5)
        list_or_watch(self, kind, query, namespace)

    monkeypatch.setattr(ClusterHandler, "_list_or_watch", slow)
    multi = pushed_images["docker-manifest-list"].reference
    cluster.add("pods", a_pod("api-5d8f-a", [pushed_images["oci-single-amd64"].reference]))  # on the first page
    for index in range(600):  # two pages
        cluster.add("pods", a_pod(f"fine-{index:04d}", [multi], is_ready=True))
    running = run_controller()
    assert cluster.wait(running.controller.nodes.synced.is_set, 15)
    assert not running.controller.pods.synced.is_set()  # the nodes came between the pages
    assert cluster.wait(lambda: cluster.state.evicted, 15), "the misplaced pod was never judged"
    assert cluster.state.evicted == [("apps", "api-5d8f-a")]
    settle(cluster, running)
    assert running.controller.examined == 601


def test_ready_bare_and_daemonset_pods_are_not_evicted(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    multi = pushed_images["docker-manifest-list"].reference
    cluster.add("pods", a_pod("running", [amd64_only], is_ready=True))
    cluster.add("pods", a_pod("bare", [amd64_only], owner=None))
    cluster.add("pods", a_pod("agent-x", [amd64_only], owner=("DaemonSet", "agent")))
    cluster.add("pods", a_pod("fine", [multi]))
    cluster.add("pods", a_pod("right-node", [amd64_only], node="n-amd64"))
    running = run_controller()
    assert cluster.wait(lambda: len(cluster.events("IncompatibleNode")) >= 2, 15)
    settle(cluster, running)
    assert cluster.state.evicted == []
    assert sorted(e["involvedObject"]["name"] for e in cluster.events("IncompatibleNode")) == ["agent-x", "bare"]
    messages = {e["involvedObject"]["name"]: e["message"] for e in cluster.events("IncompatibleNode")}
    assert "left alone: a bare pod" in messages["bare"]
    assert "left alone: a DaemonSet's pod" in messages["agent-x"]
    assert [w for w in cluster.writes() if "/events" not in w[1] and "/leases" not in w[1]] == []
    metrics = requests.get(f"http://127.0.0.1:{running.health.port}/metrics", timeout=5).text
    assert 'noe_controller_misplaced_pods_total{action="left_ready"} 1.0' in metrics
    assert 'noe_controller_misplaced_pods_total{action="event_only"} 2.0' in metrics


def test_a_budget_429_is_retried_and_nothing_is_deleted(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    budget = cluster.add_budget("apps", {"app": "db"}, disruptions_allowed=0)
    cluster.add(
        "pods",
        a_pod("db-0", [pushed_images["oci-single-amd64"].reference], labels={"app": "db"}, owner=("StatefulSet", "db")),
    )
    run_controller()
    evictions = lambda: [w for w in cluster.writes() if w[1].endswith("/eviction")]  # noqa: E731
    assert cluster.wait(lambda: len(evictions()) >= 2, 15), "the refused eviction was not retried"
    assert cluster.get("pods", "apps", "db-0") is not None and cluster.state.evicted == []
    refused = cluster.events("IncompatibleNode")
    assert len(refused) == 1 and "refused by a disruption budget" in refused[0]["message"]
    cluster.set_budget(budget, 1)
    assert cluster.wait(lambda: cluster.state.evicted, 15) == [("apps", "db-0")]
    no_direct_delete(cluster)


def test_a_terminating_pod_is_never_evicted(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    going = a_pod("web-5d8f-a", [amd64_only])
    going["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"  # being deleted already, still listed
    cluster.add("pods", going)
    cluster.add("pods", a_pod("api-7c9d-a", [amd64_only], owner=("ReplicaSet", "api-7c9d")))
    running = run_controller("--eviction-backoff", "1s")
    assert cluster.wait(lambda: cluster.state.evicted, 15) == [("apps", "api-7c9d-a")]  # the controller acts
    settle(cluster, running, 2.0)  # and goes on past the back-off
    assert cluster.state.evicted == [("apps", "api-7c9d-a")]
    assert not [r for r in cluster.api.requests_snapshot() if r.path.endswith("/web-5d8f-a/eviction")]
    assert not cluster.events("IncompatibleNode") or all(
        e["involvedObject"]["name"] != "web-5d8f-a" for e in cluster.events("IncompatibleNode")
    )


def test_a_leader_that_takes_over_keeps_the_eviction_backoff_and_never_evicts_a_terminating_pod(
    cluster: FakeCluster, run_controller: Controllers, pushed_images: dict[str, PushedImage]
) -> None:
    cluster.state.graceful_eviction = True  # an evicted pod stays listed, terminating, until its kubelet is done
    amd64_only = pushed_images["oci-single-amd64"].reference
    backoff = 6.0
    flags = ("--eviction-backoff", f"{backoff}s", "--noe-namespace", "noe")
    cluster.add("pods", a_pod("web-5d8f-a", [amd64_only]))
    first = run_controller(*flags)
    assert cluster.wait(lambda: cluster.state.evicted, 15) == [("apps", "web-5d8f-a")]
    evicted_at = time.monotonic()
    cluster.add("pods", a_pod("web-5d8f-b", [amd64_only]))  # the ReplicaSet's replacement, misplaced again
    second = run_controller(*flags)
    assert cluster.wait(second.controller.ready, 15)
    first.stop()  # releases the Lease: the second one takes over
    run_controller.started.remove(first)
    assert cluster.wait(second.elector.is_leader, 15)
    assert time.monotonic() - evicted_at < backoff - 2, "the take-over came too late to test the back-off"
    # the new leader evicts the replacement once the first leader's back-off is over, and never the terminating pod
    assert cluster.wait(lambda: len(cluster.state.evicted) == 2, backoff + 10)
    assert time.monotonic() - evicted_at >= backoff - 0.5, "evicted again within the back-off"
    assert cluster.state.evicted == [("apps", "web-5d8f-a"), ("apps", "web-5d8f-b")]
    settle(cluster, second, 1.0)
    posted = [r.path for r in cluster.api.requests_snapshot() if r.path.endswith("/eviction")]
    assert posted == [f"/api/v1/namespaces/apps/pods/web-5d8f-{x}/eviction" for x in "ab"]
    record = cluster.get("configmaps", "noe", "noe-evictions") or {}
    assert [json.loads(v)["pod"] for v in (record.get("data") or {}).values()] == ["apps/web-5d8f-b"]
    no_direct_delete(cluster)


# ----------------------------------------------------------------------------- exec format error


def _status(
    name: str, image: str, *, state: dict[str, Any], last: dict[str, Any] | None = None, restarts: int = 3
) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "imageID": f"{image}@sha256:{'ab' * 32}",
        "restartCount": restarts,
        "ready": False,
        "state": state,
        "lastState": last or {},
    }


def test_exec_format_error_in_a_status_message_and_in_a_previous_log(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    multi = pushed_images["docker-manifest-list"].reference  # offers arm64: not misplaced by its metadata
    in_status = a_pod(
        "status-pod",
        [multi],
        statuses=[
            _status(
                "c0",
                multi,
                state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                last={
                    "terminated": {"reason": "Error", "exitCode": 1, "message": "exec /usr/bin/app: exec format error"}
                },
            )
        ],
    )
    in_log = a_pod(
        "log-pod",
        [multi],
        owner=("ReplicaSet", "logs-1"),
        statuses=[
            _status(
                "c0",
                multi,
                state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting"}},
                last={"terminated": {"reason": "Error", "exitCode": 1}},
            )
        ],
    )
    healthy_crash = a_pod(
        "other-crash",
        [multi],
        owner=None,
        statuses=[
            _status(
                "c0", multi, state={"waiting": {"reason": "CrashLoopBackOff"}}, last={"terminated": {"exitCode": 2}}
            )
        ],
    )
    cluster.add("pods", in_status)
    cluster.add("pods", in_log)
    cluster.add("pods", healthy_crash)
    cluster.set_log("apps", "log-pod", "c0", "starting\n" * 50 + "exec /app/server: Exec format error\n")
    cluster.set_log("apps", "other-crash", "c0", "panic: config missing\n")
    running = run_controller()
    assert cluster.wait(lambda: len(cluster.events("ExecFormatError")) >= 2, 15)
    assert cluster.wait(lambda: len(cluster.state.evicted) >= 2, 15)
    settle(cluster, running)
    events = {e["involvedObject"]["name"]: e["message"] for e in cluster.events("ExecFormatError")}
    assert sorted(events) == ["log-pod", "status-pod"]
    for message in events.values():
        assert "container c0" in message and multi in message and "arm64" in message
    assert sorted(cluster.state.evicted) == [("apps", "log-pod"), ("apps", "status-pod")]
    logs = [r.path for r in cluster.api.requests_snapshot() if "/log?" in r.path]
    assert logs and all("previous=true" in p and "limitBytes=" in p and "tailLines=" in p for p in logs)
    metrics = requests.get(f"http://127.0.0.1:{running.health.port}/metrics", timeout=5).text
    assert 'noe_controller_exec_format_errors_total{source="status"} 1.0' in metrics
    assert 'noe_controller_exec_format_errors_total{source="previous_log"} 1.0' in metrics
    no_direct_delete(cluster)


# ----------------------------------------------------------------------------- watch


def test_after_410_gone_it_relists_and_acts_on_a_pod_created_afterwards(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    running = run_controller()
    settle(cluster, running, 0.5)
    lists_before = sum(
        1 for r in cluster.api.requests_snapshot() if r.path.startswith("/api/v1/pods?") and "watch=1" not in r.path
    )
    amd64_only = pushed_images["oci-single-amd64"].reference
    with cluster.watches_held():  # the controller misses this pod, and the history it was in is compacted
        cluster.add("pods", a_pod("missed-1", [amd64_only]))
        cluster.compact()
    assert cluster.wait(lambda: cluster.state.evicted, 15) == [("apps", "missed-1")]
    cluster.add("pods", a_pod("late-1", [amd64_only], owner=("ReplicaSet", "late")))
    assert cluster.wait(lambda: len(cluster.state.evicted) == 2, 15)
    assert cluster.state.evicted == [("apps", "missed-1"), ("apps", "late-1")]
    lists_after = sum(
        1 for r in cluster.api.requests_snapshot() if r.path.startswith("/api/v1/pods?") and "watch=1" not in r.path
    )
    assert lists_after > lists_before
    metrics = requests.get(f"http://127.0.0.1:{running.health.port}/metrics", timeout=5).text
    assert 'noe_controller_watch_restarts_total{reason="gone",resource="pods"} 1.0' in metrics


def test_list_is_paginated_and_an_unchanged_cluster_costs_nothing_but_the_watch(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    multi = pushed_images["docker-manifest-list"].reference
    for index in range(1200):
        cluster.add("pods", a_pod(f"p-{index:04d}", [multi], node="n-amd64", is_ready=True))
    running = run_controller()
    health = f"http://127.0.0.1:{running.health.port}"
    assert requests.get(health + "/livez", timeout=5).status_code == 200
    settle(cluster, running)
    assert requests.get(health + "/readyz", timeout=5).status_code == 200
    pages = [
        r.path
        for r in cluster.api.requests_snapshot()
        if r.path.startswith("/api/v1/pods?") and "watch=1" not in r.path
    ]
    assert len(pages) == 3 and all("limit=500" in p for p in pages) and sum("continue=" in p for p in pages) == 2
    assert running.controller.pods.__len__() == 1200
    mark = len(cluster.api.requests_snapshot())
    running.controller.started_leading()  # examine every pod again: a full reconcile of an unchanged cluster
    settle(cluster, running)
    extra = [r for r in cluster.api.requests_snapshot()[mark:] if "watch=1" not in r.path and "/leases" not in r.path]
    assert extra == []


@pytest.mark.parametrize("watch_list", [False, True], ids=["pages-from-the-watch-cache", "streaming-list"])
def test_a_fresh_leader_examines_each_pod_once_and_spares_etcd_its_first_list(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    pushed_images: dict[str, PushedImage],
    watch_list: bool,
) -> None:
    cluster.state.watch_list = watch_list  # the API server's WatchList gate
    multi = pushed_images["docker-manifest-list"].reference
    for index in range(1200):
        cluster.add("pods", a_pod(f"p-{index:04d}", [multi], node="n-amd64", is_ready=True))
    running = run_controller()
    settle(cluster, running)
    assert cluster.wait(lambda: running.controller.reconciles == 1, 15), "no full reconcile"
    # the new leader's full pass queues the listed pods, the informer only those that change after: each once
    assert running.controller.examined == 1200
    pod_reads = [(r.kind, r.status) for r in cluster.api.reads("pods")]
    if watch_list:
        assert pod_reads == [("stream", 200)]  # the state and the changes in one watch, from the watch cache
    else:
        assert pod_reads[:4] == [("stream", 422), ("cache", 200), ("continue", 200), ("continue", 200)]
        assert pod_reads[4:] == [("watch", 200)]
    assert ("consistent", 200) not in [(r.kind, r.status) for r in cluster.api.reads("nodes")]
    assert not [r for r in cluster.api.reads() if r.kind == "consistent" and r.resource in ("pods", "nodes")]


# ----------------------------------------------------------------------------- dry run


def test_dry_run_writes_events_and_nothing_else(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    cluster.add("pods", a_pod("dry-1", [amd64_only]))
    cluster.add("pods", a_pod("dry-bare", [amd64_only], owner=None))
    running = run_controller("--dry-run", "--no-leader-elect")
    assert cluster.wait(lambda: len(cluster.events("IncompatibleNode")) >= 2, 15)
    settle(cluster, running)
    assert cluster.state.evicted == []
    assert {method for method, path in cluster.writes() if not path.endswith("/events")} == set()
    messages = sorted(e["message"] for e in cluster.events("IncompatibleNode"))
    assert all(m.startswith("(dry run)") for m in messages)
    assert any("would evict" in m for m in messages)


# ----------------------------------------------------------------------------- gated pods

GRID = [
    node(f"n-{arch}-{zone}", arch, labels={"topology.kubernetes.io/zone": zone})
    for arch in ("amd64", "arm64", "ppc64le", "s390x")
    for zone in ("a", "b")
]
ZONE_A = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}
            ]
        }
    }
}


def allowed_nodes(obj: dict[str, Any]) -> set[str]:
    return {n["metadata"]["name"] for n in GRID if schedulable(obj, n)}


def gated_pod(name: str, images: list[str], **kw: Any) -> dict[str, Any]:
    obj = a_pod(name, images, node=None, **kw)
    obj["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
    obj["status"] = {"phase": "Pending"}
    return obj


def test_serve_gates_when_the_registry_hangs_and_the_controller_places_the_pod_as_the_webhook_would(  # noqa: PLR0917
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    pushed_images: dict[str, PushedImage],
    registry: RegistryServer,
    kube_ca: CA,
    tmp_path: Path,
) -> None:
    serving = kube_ca.issue(["127.0.0.1", "localhost"], name="gate-serving")
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(serving.cert_file.read_bytes())
    (certs / "tls.key").write_bytes(serving.key_file.read_bytes())
    kubeconfig = cluster.api.write_kubeconfig(tmp_path / "serve-kubeconfig", token=TOKEN)
    with start_relay(registry.host) as relay:
        images = [
            f"{relay.host}/{pushed_images[shape].repository}:v1"
            for shape in ("docker-manifest-list", "oci-index-attestations")
        ]
        noe = start_noe(
            tmp_path,
            [
                "--cert-dir",
                str(certs),
                "--kubeconfig",
                str(kubeconfig),
                "--on-lookup-failure",
                "gate",
                "--admission-deadline",
                "1.5",
                "--insecure-registries",
                "127.0.0.1:*",
                "--negative-cache-ttl",
                "0",
                "--workers",
                "1",
                "--state-dir",
                str(tmp_path / "state"),
            ],
            kube_ca.ca_file,
        )
        try:
            obj = pod(images, name="gated-web", namespace="apps", affinity=ZONE_A)
            review = admission_review(obj, uid=str(uuid.uuid4()))
            started = time.monotonic()
            with noe.session() as http:
                response = post_review(http, noe, review)
            assert time.monotonic() - started < 1.5 + 1.5, "the webhook did not answer within its deadline"
            gated = apply(review, response)
            assert gated["spec"]["schedulingGates"] == [{"name": SCHEDULING_GATE}]
            assert allowed_nodes(gated) == allowed_nodes(obj)  # no placement yet
            created = cluster.add("pods", {**gated, "status": {"phase": "Pending"}})
            running = run_controller("--lookup-timeout", "1", "--gate-timeout", "5m")
            time.sleep(2.5)  # a few attempts against the hanging registry: the gate stays
            still = cluster.get("pods", "apps", "gated-web")
            assert still is not None and still["spec"].get("schedulingGates") == [{"name": SCHEDULING_GATE}]
            relay.open()
            placed = cluster.wait(
                lambda: (p := cluster.get("pods", "apps", "gated-web")) and not p["spec"].get("schedulingGates") and p,
                30,
            )
            assert placed, "the controller did not finish the gated pod once the registry answered"
            # the webhook's synchronous answer for the same pod, now that the registry answers
            review2 = admission_review(obj, uid=str(uuid.uuid4()))
            with noe.session() as http:
                synchronous = apply(review2, post_review(http, noe, review2))
        finally:
            noe.stop()
    assert "schedulingGates" not in synchronous["spec"]
    assert allowed_nodes(placed) == allowed_nodes(synchronous)
    assert allowed_nodes(placed) < allowed_nodes(obj)
    assert all(n.endswith("-a") for n in allowed_nodes(placed))  # the user's own term still holds
    placed_events = cluster.events("ArchitecturePlaced")
    assert len(placed_events) == 1 and placed_events[0]["type"] == "Normal"
    patches = [r.body for r in cluster.api.requests_snapshot() if r.method == "PATCH"]
    assert len(patches) == 1 and patches[0][0] == {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": created["metadata"]["resourceVersion"],
    }
    assert patches[0][-1] == {"op": "remove", "path": "/spec/schedulingGates"}
    assert running.controller.examined >= 1


def test_the_webhook_and_the_controller_read_pull_secrets_and_ask_registries_alike(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    registry: RegistryServer,
    make_repo: Callable[..., str],
    tmp_path: Path,
) -> None:
    """One rule (noe_core.registry.lookup_service): for the same pod and cache state, the same requests."""
    warm = push_docker_single(registry, make_repo(), "v1").reference
    cold = push_oci_single(registry, make_repo(), "v1", arch="arm64").reference
    webhook_token = TOKEN + "-webhook"
    cluster.state.tokens.add(webhook_token)
    kubeconfig = cluster.api.write_kubeconfig(tmp_path / "webhook-kubeconfig", token=webhook_token)
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), negative_cache_ttl=0)
    session = make_session(settings)
    webhook = AdmissionService(
        policy=PolicySettings(),
        metrics=Metrics(),
        resolver=Resolver(session, settings=settings),
        kube=KubeClient(load_kubeconfig(kubeconfig), timeout=5.0, secret_cache_ttl=0),
    )

    def webhook_admits(obj: dict[str, Any]) -> None:
        response = webhook.review(admission_review(obj, uid=str(uuid.uuid4())))["response"]
        assert "patch" in response, response

    def controller_places(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        gated = copy.deepcopy(obj)
        gated["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
        cluster.add("pods", {**gated, "status": {"phase": "Pending"}})
        assert cluster.wait(lambda: not (cluster.get("pods", "apps", name) or gated)["spec"].get("schedulingGates"))

    requests: dict[str, dict[str, tuple[list[str], int]]] = {}
    try:
        # the same cache state on both sides: each looked `warm` up for a pod without Secrets
        first = a_pod("first", [warm], node=None)
        webhook_admits(first)
        run_controller()
        controller_places(first)
        for name, images, secret in (("all-warm", [warm], "s-warm"), ("one-cold", [warm, cold], "s-cold")):
            obj = a_pod(name, images, node=None)
            obj["spec"]["imagePullSecrets"] = [{"name": secret}]
            for side, token, act in (
                ("webhook", webhook_token, webhook_admits),
                ("controller", TOKEN, controller_places),
            ):
                since, mark = len(cluster.api.requests_snapshot()), registry.mark()
                act(obj)
                seen = cluster.api.requests_snapshot()[since:]
                reads = [r.path for r in seen if "/secrets/" in r.path and r.auth == f"token:{token}"]
                requests.setdefault(name, {})[side] = (reads, registry.count("GET", "/manifests/", since=mark))
                if name == "all-warm":
                    assert registry.requests_since(mark) == [], side  # not even a HEAD
    finally:
        webhook.close()
        session.close()
    # a warm public image: no Secret read, no registry request, on either side
    assert requests["all-warm"] == {"webhook": ([], 0), "controller": ([], 0)}
    # a cold image: each side reads the pod's Secret once (missing: a warning) and fetches only that image
    cold_side = (["/api/v1/namespaces/apps/secrets/s-cold"], 1)
    assert requests["one-cold"] == {"webhook": cold_side, "controller": cold_side}


def test_a_pod_that_changed_is_read_again_and_no_common_architecture_keeps_the_gate(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    arm, x86 = pushed_images["docker-single-arm64"].reference, pushed_images["oci-single-amd64"].reference
    cluster.add("pods", gated_pod("nocommon", [arm, x86]))
    cluster.change_before_next_patch(lambda p: p["metadata"]["labels"].update(team="payments"))
    cluster.add("pods", gated_pod("busy", [arm], labels={"app": "busy"}))
    running = run_controller()
    assert cluster.wait(lambda: not cluster.get("pods", "apps", "busy")["spec"].get("schedulingGates"), 15)
    assert cluster.wait(lambda: cluster.events("NoCommonArchitecture"), 15)
    settle(cluster, running)
    busy = cluster.get("pods", "apps", "busy")
    assert busy["metadata"]["labels"] == {"app": "busy", "team": "payments"}  # the other writer's change kept
    assert {n["metadata"]["labels"]["kubernetes.io/arch"] for n in GRID if schedulable(busy, n)} == {"arm64"}
    patches = [r.body for r in cluster.api.requests_snapshot() if r.method == "PATCH" and r.path.endswith("/busy")]
    assert len(patches) == 2 and patches[0][0]["op"] == "test" and patches[0][0] != patches[1][0]
    nocommon = cluster.get("pods", "apps", "nocommon")
    assert nocommon["spec"]["schedulingGates"] == [{"name": SCHEDULING_GATE}]
    message = cluster.events("NoCommonArchitecture")[0]["message"]
    assert "no CPU architecture is supported by every image" in message
    assert not [r for r in cluster.api.requests_snapshot() if r.method == "PATCH" and r.path.endswith("/nocommon")]


def test_lookups_failing_past_the_gate_timeout_release_the_pod_without_placement(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
) -> None:
    with start_relay(registry.host) as relay:
        image = f"{relay.host}/{pushed_images['docker-single-arm64'].repository}:v1"
        cluster.add("pods", gated_pod("stuck", [image]))
        running = run_controller("--lookup-timeout", "0.5", "--gate-timeout", "4s")
        metrics = f"http://127.0.0.1:{running.health.port}/metrics"
        assert cluster.wait(lambda: "noe_controller_gated_pods 1.0" in requests.get(metrics, timeout=5).text, 10)
        assert cluster.wait(lambda: not cluster.get("pods", "apps", "stuck")["spec"].get("schedulingGates"), 20)
    stuck = cluster.get("pods", "apps", "stuck")
    assert "affinity" not in stuck["spec"] and "nodeSelector" not in stuck["spec"]
    events = cluster.events("InspectionTimedOut")
    assert len(events) == 1 and events[0]["type"] == "Warning" and "timed out" in events[0]["message"]
    assert 'noe_controller_gate_outcomes_total{outcome="timed_out"} 1.0' in requests.get(metrics, timeout=5).text


def test_at_the_gate_timeout_a_fallback_architecture_places_the_pod_the_inspected_images_allow(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
) -> None:
    """Rule 13a in gate mode: the image that never answers is left out, the pod goes to the fallback
    architecture when every inspected image offers it (Normal FallbackArchitecture); one that does not offer it
    is released without placement, as without the rule."""
    multi = pushed_images["docker-manifest-list"].reference  # amd64, arm64, arm/v7, ppc64le, s390x
    amd64_only = pushed_images["oci-single-amd64"].reference
    with start_relay(registry.host) as relay:
        hung = f"{relay.host}/{pushed_images['docker-single-arm64'].repository}:v1"
        cluster.add("pods", gated_pod("falls-back", [multi, hung]))
        cluster.add("pods", gated_pod("cannot-fall-back", [amd64_only, hung]))
        running = run_controller(
            "--lookup-timeout", "0.5", "--gate-timeout", "4s", "--fallback-arch", "arm64", "--preferred-arch", ""
        )
        metrics = f"http://127.0.0.1:{running.health.port}/metrics"
        for name in ("falls-back", "cannot-fall-back"):
            assert cluster.wait(lambda n=name: not cluster.get("pods", "apps", n)["spec"].get("schedulingGates"), 20)
    placed = cluster.get("pods", "apps", "falls-back")
    assert allowed_nodes(placed) == {"n-arm64-a", "n-arm64-b"}
    assert placed["metadata"]["labels"]["arch.noe.adevinta.com/fallback"] == "true"
    events = cluster.events("FallbackArchitecture")
    assert [(e["type"], e["involvedObject"]["name"]) for e in events] == [("Normal", "falls-back")]
    assert "arm64" in events[0]["message"] and hung in events[0]["message"]
    released = cluster.get("pods", "apps", "cannot-fall-back")
    assert "affinity" not in released["spec"] and "fallback" not in str(released["metadata"].get("labels"))
    assert [e["involvedObject"]["name"] for e in cluster.events("InspectionTimedOut")] == ["cannot-fall-back"]
    text = requests.get(metrics, timeout=5).text
    assert 'noe_controller_gate_outcomes_total{outcome="fallback"} 1.0' in text
    assert 'noe_controller_gate_outcomes_total{outcome="timed_out"} 1.0' in text


# ----------------------------------------------------------------------------- leader election

LEASE, RETRY = 2.0, 0.2


def spawn(cluster: FakeCluster, tmp_path: Path, token: str) -> subprocess.Popen[bytes]:
    kubeconfig = cluster.api.write_kubeconfig(tmp_path / f"kubeconfig-{token}", token=token)
    return spawn_controller(kubeconfig, tmp_path / f"{token}.log", "--insecure-registries", "127.0.0.1:*")


def holder(cluster: FakeCluster) -> str:
    lease = cluster.get("leases", "noe", "noe-controller")
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")


def writes_by(cluster: FakeCluster, token: str) -> list[tuple[str, str]]:
    return [
        (r.method, r.path)
        for r in cluster.api.requests_snapshot()
        if r.auth == f"token:{token}" and r.method != "GET" and "/leases" not in r.path
    ]


def test_two_controllers_only_the_leader_writes_and_the_other_takes_over_after_a_crash(
    cluster: FakeCluster, pushed_images: dict[str, PushedImage], tmp_path: Path
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    tokens = {"first": TOKEN + "-a", "second": TOKEN + "-b"}
    cluster.state.tokens |= set(tokens.values())
    procs = {name: spawn(cluster, tmp_path, token) for name, token in tokens.items()}
    try:
        assert cluster.wait(lambda: holder(cluster), 30), "nobody took the lease"
        cluster.add("pods", a_pod("lead-1", [amd64_only]))
        assert cluster.wait(lambda: cluster.state.evicted, 20) == [("apps", "lead-1")]
        evicting = {r.auth for r in cluster.api.requests_snapshot() if r.path.endswith("/eviction")}
        assert len(evicting) == 1
        leader = next(n for n, t in tokens.items() if evicting == {f"token:{t}"})
        follower = next(n for n in tokens if n != leader)
        time.sleep(1.0)
        assert writes_by(cluster, tokens[follower]) == []  # the follower watches but writes nothing
        assert ("POST", "/api/v1/namespaces/apps/pods/lead-1/eviction") in writes_by(cluster, tokens[leader])
        first_holder = holder(cluster)
        procs[leader].kill()  # a crash: no release
        procs[leader].wait(10)
        killed = time.monotonic()
        assert cluster.wait(lambda: holder(cluster) not in ("", first_holder), 15, interval=0.02)
        took = time.monotonic() - killed
        assert took <= LEASE + RETRY * 1.2 + 1.0, f"take-over took {took:.2f}s"
        cluster.add("pods", a_pod("lead-2", [amd64_only], owner=("ReplicaSet", "other")))
        assert cluster.wait(lambda: len(cluster.state.evicted) == 2, 20)
        assert ("POST", "/api/v1/namespaces/apps/pods/lead-2/eviction") in writes_by(cluster, tokens[follower])
        procs[follower].send_signal(signal.SIGTERM)  # a clean stop releases the lease at once
        assert procs[follower].wait(15) == 0
        assert holder(cluster) == ""
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    no_direct_delete(cluster)


def test_a_leader_that_cannot_renew_stops_acting_within_the_renew_deadline(
    cluster: FakeCluster, run_controller: Callable[..., Running]
) -> None:
    running = run_controller()
    assert cluster.wait(running.elector.is_leader, 15)
    cluster.state.fail_with = 503  # the API server goes away
    lost = time.monotonic()
    assert cluster.wait(lambda: not running.elector.is_leader(), 5, interval=0.02)
    # it must stop before a follower could take over (--lease-duration 2s after the last renewal)
    assert time.monotonic() - lost < 2.0, "kept acting past the lease duration"
    cluster.state.fail_with = 0
    assert cluster.wait(running.elector.is_leader, 10), "did not lead again once the API answered"


# ----------------------------------------------------------------------------- PolicyReports

POLICY_REPORT_SCHEMA = json.loads(
    (ROOT / "tests" / "fixtures" / "crds" / "policyreport-v1alpha2.schema.json").read_text()
)
REPORTS = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/"


def report_pod(namespace: str, name: str, images: list[str], owner: tuple[str, str] | None) -> dict[str, Any]:
    """A running pod with requests: what a PolicyReport counts."""
    made = a_pod(name, images, namespace=namespace, owner=owner, is_ready=True)
    for container in made["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "250m", "memory": "128Mi"}}
    return made


def report_writes(cluster: FakeCluster) -> list[tuple[str, str]]:
    return [w for w in cluster.writes() if w[1].startswith(REPORTS)]


def meaning(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "timestamp"} for r in doc["results"]]


def test_policy_reports_match_noe_report_and_are_written_only_when_a_result_changes(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    pushed_images: dict[str, PushedImage],
    registry: RegistryServer,
    tmp_path: Path,
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    multi = pushed_images["docker-manifest-list"].reference
    arm64_only = pushed_images["docker-single-arm64"].reference
    missing = f"{registry.host}/nothing/here:1.0"
    cluster.add("pods", report_pod("apps", "db-0", [amd64_only], ("StatefulSet", "db")))
    cluster.add("pods", report_pod("apps", "db-1", [amd64_only], ("StatefulSet", "db")))
    cluster.add("pods", report_pod("apps", "tool", [multi], None))
    cluster.add("pods", report_pod("apps", "mixed-0", [amd64_only, missing], ("StatefulSet", "mixed")))
    cluster.add("pods", report_pod("batch", "arm-job", [arm64_only], None))
    cluster.add("pods", report_pod("broken", "gone", [missing], None))
    running = run_controller("--policy-reports", "--policy-report-interval", "1s")
    names = ("apps", "batch", "broken")
    assert cluster.wait(lambda: all(cluster.get("policyreports", ns, "noe-arm64") for ns in names), 20)
    reports = {ns: cluster.get("policyreports", ns, "noe-arm64") for ns in names}
    for doc in reports.values():
        assert doc is not None
        jsonschema.validate({k: v for k, v in doc.items()}, POLICY_REPORT_SCHEMA)
    apps = {r["resources"][0]["name"]: r for r in reports["apps"]["results"]}  # type: ignore[index]
    assert {n: r["result"] for n, r in apps.items()} == {"db": "fail", "mixed": "fail", "tool": "pass"}
    assert apps["db"]["properties"]["pods"] == "2" and apps["db"]["properties"]["cpu"] == "0.5"
    assert apps["mixed"]["message"].startswith(f"blocked on arm64 by {amd64_only}; cannot inspect {missing}")
    assert reports["batch"]["summary"]["pass"] == 1  # type: ignore[index]
    assert reports["broken"]["results"][0]["result"] == "error"  # type: ignore[index]

    # the very results `noe report -o policyreport` gives for the same cluster
    kubeconfig = cluster.api.write_kubeconfig(tmp_path / "report-kubeconfig", token=TOKEN)
    code, out, err = run_cli(
        *["report", "--kubeconfig", str(kubeconfig), "-o", "policyreport", "--insecure-registries", "127.0.0.1:*"]
    )
    assert code == 0, err
    from_cli = {doc["metadata"]["namespace"]: doc for doc in yaml.safe_load_all(out)}
    assert {ns: meaning(from_cli[ns]) for ns in names} == {ns: meaning(reports[ns]) for ns in names}  # type: ignore[arg-type]

    # unchanged results: passes keep running, nothing is written
    written = report_writes(cluster)
    assert sorted(written) == [("POST", f"{REPORTS}{ns}/policyreports") for ns in names]
    passes = running.reporter.passes
    assert cluster.wait(lambda: running.reporter.passes >= passes + 3, 10)
    assert report_writes(cluster) == written
    # a new workload: only its namespace is written again
    cluster.add("pods", report_pod("apps", "web", [multi], None))
    assert cluster.wait(lambda: len(cluster.get("policyreports", "apps", "noe-arm64")["results"]) == 4, 10)  # type: ignore[index]
    assert report_writes(cluster)[len(written) :] == [("PUT", f"{REPORTS}apps/policyreports/noe-arm64")]
    # the last workload of a namespace goes: its report is emptied
    with cluster.state.lock:
        cluster.state._write("pods", "DELETED", cluster.state.objects["pods"][("broken", "gone")])
    assert cluster.wait(lambda: cluster.get("policyreports", "broken", "noe-arm64")["results"] == [], 10)  # type: ignore[index]
    assert cluster.get("policyreports", "broken", "noe-arm64")["summary"]["error"] == 0  # type: ignore[index]


def test_policy_reports_after_a_restart_rewrite_nothing_and_wait_for_the_crd(
    cluster: FakeCluster,
    run_controller: Callable[..., Running],
    pushed_images: dict[str, PushedImage],
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster.add("pods", report_pod("apps", "tool", [pushed_images["docker-manifest-list"].reference], None))
    cluster.state.policy_report_crd = False
    first = run_controller("--policy-reports", "--policy-report-interval", "1s")
    assert cluster.wait(lambda: first.reporter.passes >= 3, 10)
    warnings = [r for r in caplog.records if "cannot write PolicyReports" in r.getMessage()]
    assert len(warnings) == 1  # once, not once a pass
    assert cluster.get("policyreports", "apps", "noe-arm64") is None
    cluster.state.policy_report_crd = True  # the CRD is installed: the next pass writes
    assert cluster.wait(lambda: cluster.get("policyreports", "apps", "noe-arm64"), 10)
    first.stop()
    writes = len(report_writes(cluster))
    second = run_controller("--policy-reports", "--policy-report-interval", "1s")
    assert cluster.wait(lambda: second.reporter.passes >= 2, 10)
    assert len(report_writes(cluster)) == writes  # read once, found true, left alone


def test_policy_reports_are_written_by_the_leader_only(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    cluster.add("pods", report_pod("apps", "tool", [pushed_images["docker-manifest-list"].reference], None))
    stop = threading.Event()

    def hold() -> None:  # someone else holds the controller's Lease and keeps renewing it
        while not stop.wait(0.3):
            cluster.update(
                "leases", "noe", "noe-controller", lambda lease: lease["spec"].update(renewTime=str(time.time()))
            )

    cluster.add(
        "leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "noe-controller", "namespace": "noe"},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 2, "renewTime": str(time.time())},
        },
    )
    holder_thread = threading.Thread(target=hold, daemon=True)
    holder_thread.start()
    try:
        running = run_controller("--policy-reports", "--policy-report-interval", "1s")
        assert cluster.wait(running.controller.ready, 15)
        time.sleep(3.0)
        assert not running.elector.is_leader()
        assert report_writes(cluster) == [] and running.reporter.passes == 0
        stop.set()  # the holder goes away: this one takes over and writes
        assert cluster.wait(lambda: cluster.get("policyreports", "apps", "noe-arm64"), 15)
    finally:
        stop.set()
        holder_thread.join(5)


def test_the_controller_and_its_api_client_import_without_flask_and_noe_core_without_either() -> None:
    code = (
        "import sys, noe_web.kube.client, noe_web.controller.command, noe_web.controller.reconciler; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'flask', 'gunicorn', 'werkzeug'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
    code = (
        "import sys, noe_core, noe_core.placement.gate, noe_core.placement.compatibility, noe_core.admission.review; "
        "print(sorted(m for m in sys.modules if m.startswith('noe_web')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
