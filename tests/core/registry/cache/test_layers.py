"""Memory in front of the shared store: what is fetched is shared, warm answers never touch the disk."""

from __future__ import annotations

from pathlib import Path

from noe_core.errors import AuthError, RegistryError
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.registry.cache.layers import LayeredCache
from noe_core.registry.cache.sqlite import open_store
from noe_core.registry.observer import CountingObserver
from noe_core.registry.settings import RegistrySettings
from noe_core.util.deadline import Deadline

FOUND = ImagePlatforms(ImagePlatforms.of("linux/amd64").platforms, "sha256:d", "media", ("sha256:d",))
KEY = ("r.example/team/app", "v1", ())


def _caches(directory: Path, **kw: float) -> tuple[LayeredCache, CountingObserver]:
    observer = CountingObserver()
    store = open_store(directory, max_images=10, max_tags=10)
    assert store is not None
    return LayeredCache(RegistrySettings(**kw), observer=observer, store=store), observer  # type: ignore[arg-type]


def test_another_worker_reads_from_disk_and_then_from_memory_the_same_value(tmp_path: Path) -> None:
    writer, _ = _caches(tmp_path)
    writer.put_content("r.example/team/app", "sha256:d", FOUND)
    writer.put_tag("r.example/team/app", "v1", "sha256:d", 3600, fetched=True)
    reader, observer = _caches(tmp_path)
    assert reader.memory_content("r.example/team/app", "sha256:d") is None
    first = reader.content("r.example/team/app", "sha256:d")
    assert first == FOUND
    assert reader.content("r.example/team/app", "sha256:d") is first  # now from memory, the same value
    assert observer.hits["disk"] == 1 and observer.hits["memory"] == 1 and "disk" not in observer.misses
    entry = reader.tag_entry("r.example/team/app", "v1")
    assert entry is not None and entry.value == "sha256:d"
    writer.close()
    reader.close()


def test_only_lasting_failures_are_written_for_the_other_workers(tmp_path: Path) -> None:
    caches, _ = _caches(tmp_path)
    caches.put_failure(KEY, "", AuthError("denied", registry="r.example", status=403))
    busy = RegistryError("busy", registry="r.example", status=503, temporary=True)
    caches.put_failure(("r.example/team/app", "v2", ()), "", busy)
    other, _ = _caches(tmp_path)
    remembered = other.stored_failure(KEY, "", "r.example")
    assert isinstance(remembered, AuthError) and remembered.status == 403
    assert other.stored_failure(("r.example/team/app", "v2", ()), "", "r.example") is None
    assert isinstance(caches.failure(("r.example/team/app", "v2", ())), RegistryError)  # in memory all the same
    without, _ = _caches(tmp_path / "none", negative_cache_ttl=0)
    without.put_failure(KEY, "", AuthError("denied", registry="r.example", status=403))
    assert without.failure(KEY) is None
    for cache in (caches, other, without):
        cache.close()


def test_without_a_store_the_lock_across_workers_is_no_lock() -> None:
    caches = LayeredCache(RegistrySettings(), observer=CountingObserver())
    with caches.across_workers("k", Deadline.after(1), on_wait=lambda kind: None):
        assert caches.content("c", "sha256:x") is None
