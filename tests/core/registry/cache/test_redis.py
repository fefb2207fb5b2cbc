"""The replicas' level on a real redis-server: what it keeps and for how long, its lock, and its absences.

Redis refusing, frozen, gone or back: every call still returns within ``--cache-timeout``, one
warning says so (never with the password), and sharing resumes by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from noe_core.image.image_platforms import ImagePlatforms
from noe_core.registry.cache.layers import LayeredCache
from noe_core.registry.cache.redis import (
    LOCK_RESERVE,
    PREFIX,
    RedisCache,
    RedisLimits,
    SharedKeyError,
    load_shared_key,
)
from noe_core.registry.cache.rows import platforms_row
from noe_core.registry.cache.sqlite import open_store
from noe_core.registry.cache.url import parse_cache_url
from noe_core.registry.observer import CountingObserver
from noe_core.registry.settings import RegistrySettings
from noe_core.util.deadline import Deadline
from tests.support.redis_server import RedisServer, silent_listener

pytestmark = pytest.mark.redis

CONTEXT = "r.example/team/app"
KEY = b"k" * 32
TIMEOUT = 0.25
FOUND = ImagePlatforms(ImagePlatforms.of("linux/amd64", "linux/arm64").platforms, "sha256:d", "index", ())


class Seen:
    """A RedisObserver that remembers."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, bool]] = []
        self.states: list[bool] = []

    def redis_call(self, operation: str, seconds: float, *, error: bool) -> None:
        self.calls.append((operation, seconds, error))

    def redis_up(self, server: str, up: bool) -> None:
        assert server.startswith("127.0.0.1:")
        self.states.append(up)


def level(url: str, *, images: int = 100, tags: int = 100, observer: Seen | None = None) -> RedisCache:
    return RedisCache(
        parse_cache_url(url), key=KEY, limits=RedisLimits(images, tags, 60.0), timeout=TIMEOUT, observer=observer
    )


@pytest.fixture
def shared(redis_server: RedisServer) -> Iterator[RedisCache]:
    cache = level(redis_server.url)
    try:
        yield cache
    finally:
        cache.close()


def test_what_one_replica_writes_another_reads(shared: RedisCache, redis_server: RedisServer) -> None:
    shared.put_content(CONTEXT, "sha256:d", "index", platforms_row(FOUND))
    shared.put_tag(CONTEXT, "v1", "sha256:d")
    shared.grant(CONTEXT, "fp-alice", 30)
    shared.put_failure(CONTEXT, "v2", "fp-alice", message="not found", status=404, ttl=30)
    other = level(redis_server.url)
    assert other.content(CONTEXT, "sha256:d") == ("index", platforms_row(FOUND))
    tag = other.tag(CONTEXT, "v1")
    assert tag is not None and tag.digest == "sha256:d" and abs(tag.fetched - time.time()) < 5
    granted = other.granted(CONTEXT, ["anonymous", "fp-alice"])
    assert granted is not None and granted[0] == "fp-alice"
    assert other.granted(CONTEXT, ["anonymous", "fp-bob"]) is None
    failure = other.failure(CONTEXT, "v2", "fp-alice")
    assert failure is not None and (failure.message, failure.status) == ("not found", 404)
    assert other.failure(CONTEXT, "v2", "fp-bob") is None
    with redis_server.client() as client:
        keys = list(client.scan_iter())
        assert keys and all(k.startswith(PREFIX.encode()) for k in keys)
        assert all(client.pttl(k) > 0 for k in keys)  # every entry expires
        assert 0 < client.pttl(f"{PREFIX}g:{CONTEXT}|fp-alice") <= 30_000
    other.close()


def test_bounded_by_images_least_recently_used_first(redis_server: RedisServer) -> None:
    cache = level(redis_server.url, images=3, tags=2)
    for i in range(3):
        cache.put_content(CONTEXT, f"sha256:{i}", "m", "[]")
        time.sleep(0.01)
    assert cache.content(CONTEXT, "sha256:0") is not None  # used: now the most recent
    cache.put_content(CONTEXT, "sha256:3", "m", "[]")
    kept = {i for i in range(4) if cache.content(CONTEXT, f"sha256:{i}") is not None}
    assert kept == {0, 2, 3}
    for tag in ("a", "b", "c"):
        cache.put_tag(CONTEXT, tag, "sha256:0")
        time.sleep(0.01)
    assert [t for t in "abc" if cache.tag(CONTEXT, t) is not None] == ["b", "c"]
    assert len(cache.images()) == 3
    cache.close()


def test_one_holder_at_a_time_and_a_waiter_goes_on_when_it_releases(redis_server: RedisServer) -> None:
    a, b = level(redis_server.url), level(redis_server.url)
    waits: list[str] = []
    order: list[str] = []
    held = threading.Event()

    def holder() -> None:
        with a.lock(f"{CONTEXT}@v1", Deadline.after(5)):
            held.set()
            time.sleep(0.3)
            order.append("a done")

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    with b.lock(f"{CONTEXT}@v1", Deadline.after(5), on_wait=lambda: waits.append("b")):
        order.append("b in")
    thread.join()
    assert order == ["a done", "b in"] and waits == ["b"]
    with redis_server.client() as client:
        assert not list(client.scan_iter(f"{PREFIX}l:*"))  # released
    a.close()
    b.close()


def test_a_crashed_holder_never_keeps_a_waiter_past_its_deadline(redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        client.set(f"{PREFIX}l:{CONTEXT}@v1", "token-of-a-dead-replica", px=60_000)
    cache = level(redis_server.url)
    deadline = Deadline.after(2.0)
    start = time.monotonic()
    with cache.lock(f"{CONTEXT}@v1", deadline):
        waited = time.monotonic() - start
        assert deadline.remaining() >= min(LOCK_RESERVE, 0.5) - 0.05  # time left for its own lookup
    assert 1.0 < waited < 2.0
    cache.close()


def test_a_lock_expires_with_its_holders_deadline_and_only_its_holder_releases_it(redis_server: RedisServer) -> None:
    a, b = level(redis_server.url), level(redis_server.url)
    with a.lock("k", Deadline.after(0.3)):
        time.sleep(0.5)  # a's lock expired meanwhile
        with b.lock("k", Deadline.after(5), on_wait=lambda: pytest.fail("b waited for an expired lock")):
            pass
        with b.lock("k", Deadline.after(5)):
            inner = redis_server.client().get(f"{PREFIX}l:k")
    # a leaving released nothing of b's (b released its own); nothing of a's token was reused
    assert inner is not None and redis_server.client().get(f"{PREFIX}l:k") is None
    a.close()
    b.close()


def test_unreachable_at_start_is_one_warning_then_sharing_resumes_when_it_comes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    url = server.url
    server.kill()
    seen = Seen()
    with caplog.at_level(logging.INFO, logger="noe_core.registry.redis_cache"):
        cache = level(url, observer=seen)
        assert not cache.up
        start = time.monotonic()
        for _ in range(50):  # off: no call reaches the network, no call waits
            assert cache.content(CONTEXT, "sha256:d") is None
            cache.put_content(CONTEXT, "sha256:d", "m", "[]")
        assert time.monotonic() - start < 0.1
        server.start()
        for _ in range(100):
            if cache.up:
                break
            time.sleep(0.05)
        assert cache.up
        cache.put_content(CONTEXT, "sha256:d", "m", "[]")
        assert cache.content(CONTEXT, "sha256:d") == ("m", "[]")
    try:
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "reconnecting in the background" in warnings[0].getMessage()
        assert any("sharing resumes" in r.getMessage() for r in caplog.records)
        assert seen.states[0] is False and seen.states[-1] is True
        assert server.password not in caplog.text
    finally:
        cache.close()
        server.stop()


def test_a_wrong_password_is_one_warning_that_shows_neither_password(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-" + redis_server.password
    with caplog.at_level(logging.DEBUG):
        cache = level(f"redis://:{wrong}@127.0.0.1:{redis_server.port}/0")
        assert not cache.up and cache.content(CONTEXT, "sha256:d") is None
        cache.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert wrong not in caplog.text and redis_server.password not in caplog.text
    assert "redis://:***@127.0.0.1" in warnings[0].getMessage()


def test_frozen_mid_run_costs_one_timeout_then_nothing(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Seen()
    cache = level(redis_server.url, observer=seen)
    cache.put_content(CONTEXT, "sha256:d", "m", "[]")
    redis_server.freeze()
    try:
        with caplog.at_level(logging.WARNING, logger="noe_core.registry.redis_cache"):
            start = time.monotonic()
            assert cache.content(CONTEXT, "sha256:d") is None
            assert time.monotonic() - start < TIMEOUT + 0.2
            start = time.monotonic()
            for _ in range(20):
                assert cache.content(CONTEXT, "sha256:d") is None
                with cache.lock("k", Deadline.after(1)):
                    pass
            assert time.monotonic() - start < 0.1
        assert len(caplog.records) == 1 and "TimeoutError" in caplog.records[0].getMessage()
        assert any(error for _, _, error in seen.calls) and seen.states[-1] is False
    finally:
        redis_server.thaw()
    for _ in range(100):
        if cache.up:
            break
        time.sleep(0.05)
    assert cache.content(CONTEXT, "sha256:d") == ("m", "[]")
    cache.close()


def test_never_answering_at_start_costs_one_timeout(caplog: pytest.LogCaptureFixture) -> None:
    with silent_listener() as port, caplog.at_level(logging.WARNING):
        start = time.monotonic()
        cache = level(f"redis://:pw@127.0.0.1:{port}/0")
        assert time.monotonic() - start < 2 * TIMEOUT + 0.2  # connect, then no answer to AUTH
        assert not cache.up
        cache.close()
    assert len(caplog.records) == 1


def test_a_refused_command_is_a_miss_and_leaves_the_level_on(shared: RedisCache, redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        client.set(f"{PREFIX}c:{CONTEXT}@sha256:x", "a string where a hash belongs")
    assert shared.content(CONTEXT, "sha256:x") is None
    assert shared.up


def test_noe_cache_lists_and_purges_by_repository(shared: RedisCache, redis_server: RedisServer) -> None:
    shared.put_content(CONTEXT, "sha256:d", "index", platforms_row(FOUND))
    shared.put_tag(CONTEXT, "v1", "sha256:d")
    shared.grant(CONTEXT, "fp", 30)
    shared.put_content("r.example/other", "sha256:e", "index", "[]")
    (image,) = [i for i in shared.images() if i.context == CONTEXT]
    assert (image.digest, image.tags, image.media_type) == ("sha256:d", ("v1",), "index")
    stats = shared.stats()
    assert (stats.images, stats.tags, stats.grants) == (2, 1, 1)
    assert redis_server.password not in stats.path and stats.path.startswith("redis://:***@")
    assert shared.purge([CONTEXT]) == 3
    assert [i.context for i in shared.images()] == ["r.example/other"]
    assert shared.purge() >= 1 and shared.images() == []


def test_behind_the_node_store_a_redis_hit_is_copied_nearer(tmp_path: Path, redis_server: RedisServer) -> None:
    """Replica A wrote it; replica B's disk misses, Redis answers, and B's disk has it from then on."""
    writer = LayeredCache(RegistrySettings(), observer=CountingObserver(), shared=level(redis_server.url))
    writer.put_content(CONTEXT, "sha256:d", FOUND)
    writer.put_tag(CONTEXT, "v1", "sha256:d", 60, fetched=True)
    store = open_store(tmp_path, max_images=10, max_tags=10)
    assert store is not None
    observer = CountingObserver()
    reader = LayeredCache(RegistrySettings(), observer=observer, store=store, shared=level(redis_server.url))
    entry = reader.tag_entry(CONTEXT, "v1")
    assert entry is not None and entry.value == "sha256:d"
    assert reader.content(CONTEXT, "sha256:d") == FOUND
    assert observer.misses["disk"] == 1 and observer.hits["redis"] == 1
    assert store.content(CONTEXT, "sha256:d") is not None and store.tag(CONTEXT, "v1") is not None
    writer.close()
    reader.close()


def test_the_shared_key_is_at_least_32_bytes_from_a_file(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("x" * 31 + "\n")
    with pytest.raises(SharedKeyError, match="at least 32"):
        load_shared_key(short)
    with pytest.raises(SharedKeyError, match="cannot read"):
        load_shared_key(tmp_path / "absent")
    good = tmp_path / "good"
    good.write_text("y" * 40 + "\n")
    assert load_shared_key(good) == b"y" * 40
