"""The shared registry cache file: damage, read-only directories, concurrent writers, bounds, restarts."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from noe_core.errors import DeadlineExceeded
from noe_core.registry.cache.sqlite import DB_FILE, KEY_FILE, CacheStore, open_store
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from tests.support.images import PushedImage
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer


def _filled(directory: Path) -> None:
    store = open_store(directory, max_images=10, max_tags=10)
    assert store is not None
    store.put_content("r/app", "sha256:" + "a" * 64, "m", "[]")
    store.close()


def _damage_truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3 or 10])


def _damage_random(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _damage_schema(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")


@pytest.mark.parametrize(
    "damage",
    [_damage_truncate, _damage_random, _damage_schema],
    ids=["truncated", "random-bytes", "wrong-schema-version"],
)
def test_a_damaged_file_is_moved_aside_and_the_cache_starts_empty(
    tmp_path: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    _filled(tmp_path)
    for side in tmp_path.glob(DB_FILE + "-*"):
        side.unlink()  # checkpointed on close; the -wal/-shm leftovers would mask the damage
    damage(tmp_path / DB_FILE)  # type: ignore[operator]
    with caplog.at_level(logging.WARNING):
        store = open_store(tmp_path, max_images=10, max_tags=10)
    assert store is not None
    try:
        assert store.stats().images == 0
        store.put_content("r/app", "sha256:" + "b" * 64, "m", "[]")
        assert store.content("r/app", "sha256:" + "b" * 64) == ("m", "[]")
    finally:
        store.close()
    assert any("moved aside" in r.getMessage() for r in caplog.records)
    assert list(tmp_path.glob(DB_FILE + ".corrupt-*"))


def test_an_unwritable_cache_path_leaves_the_memory_cache(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """As a read-only mount looks even to root (CI runs as root, which ignores directory modes)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING):
        assert open_store(blocker / "cache", max_images=10, max_tags=10) is None
    assert any("memory only" in r.getMessage() for r in caplog.records)


_WRITER = """
import sys
from pathlib import Path
from noe_core.registry.cache.sqlite import open_store
store = open_store(Path(sys.argv[1]), max_images=int(sys.argv[3]), max_tags=10)
name = sys.argv[2]
for i in range(int(sys.argv[4])):
    platforms = '[["linux","amd64","","",[],"%s-%d"]]' % (name, i)
    store.put_content("r/" + name, "sha256:%064d" % i, "media/" + name, platforms)
store.close()
"""


def _write_concurrently(directory: Path, bound: int, count: int) -> None:
    open_store(directory, max_images=bound, max_tags=10).close()  # type: ignore[union-attr]
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(directory), name, str(bound), str(count)], cwd=ROOT)
        for name in ("one", "two")
    ]
    assert [w.wait(300) for w in writers] == [0, 0]


def test_two_processes_writing_10000_entries_each_lose_and_tear_nothing(tmp_path: Path) -> None:
    _write_concurrently(tmp_path, bound=20_000, count=10_000)
    store = open_store(tmp_path, max_images=20_000, max_tags=10)
    assert store is not None
    images = store.images()
    store.close()
    assert len(images) == 20_000
    for image in images:
        name = image.context.removeprefix("r/")
        number = int(image.digest.removeprefix("sha256:"))
        assert image.media_type == f"media/{name}"
        assert json.loads(image.platforms)[0][5] == f"{name}-{number}"


def test_the_bound_holds_under_concurrent_writers(tmp_path: Path) -> None:
    _write_concurrently(tmp_path, bound=3_000, count=10_000)
    store = open_store(tmp_path, max_images=3_000, max_tags=10)
    assert store is not None
    images = store.images()
    store.close()
    assert len(images) == 3_000
    # Least recently used went first: what is left is from the end of each writer's run.
    assert min(int(i.digest.removeprefix("sha256:")) for i in images) > 5_000


def test_the_key_file_is_private_and_stable(tmp_path: Path) -> None:
    first = open_store(tmp_path, max_images=10, max_tags=10)
    second = open_store(tmp_path, max_images=10, max_tags=10)
    assert first is not None and second is not None
    assert first.key == second.key and len(first.key) == 32
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o077 == 0
    first.close()
    second.close()


def test_a_lock_held_by_another_process_is_waited_for_within_the_deadline_and_freed_when_it_dies(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path, max_images=10, max_tags=10)
    assert store is not None
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path\n"
                "from noe_core.util.deadline import Deadline\n"
                "from noe_core.registry.cache.sqlite import open_store\n"
                "s = open_store(Path(sys.argv[1]), max_images=10, max_tags=10)\n"
                "with s.lock('r/app@v1', Deadline.after(5)):\n"
                "    print('held', flush=True); time.sleep(600)\n"
            ),
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        waits: list[int] = []
        start = time.monotonic()
        with (
            pytest.raises(DeadlineExceeded, match="another worker"),
            store.lock("r/app@v1", Deadline.after(0.3), on_wait=lambda: waits.append(1)),
        ):
            pass
        assert 0.25 < time.monotonic() - start < 1.5 and waits == [1]
        holder.kill()  # dies holding the lock: the kernel drops it
        holder.wait(10)
        with store.lock("r/app@v1", Deadline.after(2)):
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        store.close()


def test_threads_of_one_process_take_turns_on_a_stripe(tmp_path: Path) -> None:
    store = open_store(tmp_path, max_images=10, max_tags=10)
    assert store is not None
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with store.lock("r/app@v1", Deadline.after(10)):
            with guard:
                inside += 1
                most = max(most, inside)
            time.sleep(0.01)
            with guard:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    assert most == 1


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with make_session(RegistrySettings()) as s:
        yield s


@pytest.mark.registry
def test_a_restart_reads_nothing_again_and_stale_tags_cost_one_head_each(
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
    session: requests.Session,
    tmp_path: Path,
) -> None:
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), cache_ttl=3600)
    images = [pushed_images[name] for name in ("docker-manifest-list", "oci-single-amd64", "nested-index")]
    wall = [time.time()]
    with Resolver(
        session, settings=settings, store=CacheStore(tmp_path, max_images=100, max_tags=100, wall=lambda: wall[0])
    ) as before:
        for image in images:
            before.resolve(image.reference, deadline=Deadline.after(20))
    mark = registry.mark()
    with Resolver(session, settings=settings, store=open_store(tmp_path, max_images=100, max_tags=100)) as after:
        for image in images:
            assert after.resolve(image.reference, deadline=Deadline.after(20)).digest == image.digest
            assert after.resolve(image.by_digest, deadline=Deadline.after(20)).digest == image.digest
    assert registry.count(since=mark) == 0
    # The tags were fetched two hours ago (by the store's clock): past the TTL, one HEAD each.
    with sqlite3.connect(tmp_path / DB_FILE) as db:
        db.execute("UPDATE tags SET fetched = fetched - 7200")
    mark = registry.mark()
    with Resolver(session, settings=settings, store=open_store(tmp_path, max_images=100, max_tags=100)) as later:
        for image in images:
            assert later.resolve(image.reference, deadline=Deadline.after(20)).digest == image.digest
    heads = registry.requests_since(mark, method="HEAD")
    assert len(heads) == len(images) and all("/manifests/v1" in e.path for e in heads)
    assert registry.count(since=mark, method="GET") == 0


def test_evictions_are_reported_and_the_least_recently_used_go(tmp_path: Path) -> None:
    evicted: list[tuple[str, int]] = []
    wall = [1000.0]
    store = open_store(
        tmp_path, max_images=2, max_tags=10, wall=lambda: wall[0], on_evict=lambda table, n: evicted.append((table, n))
    )
    assert store is not None
    for i in range(3):
        wall[0] += 100
        store.put_content("r/app", f"sha256:{i}", "m", "[]")
    wall[0] += 100
    assert store.content("r/app", "sha256:1") is not None  # used again: now the newest
    wall[0] += 100
    store.put_content("r/app", "sha256:3", "m", "[]")
    assert evicted == [("content", 1), ("content", 1)]
    assert sorted(i.digest for i in store.images()) == ["sha256:1", "sha256:3"]
    store.close()
