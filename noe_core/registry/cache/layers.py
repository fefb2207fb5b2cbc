"""The resolver's caches: bounded memory, then the node's store, then the store every replica shares.

Three kinds of answer are kept:

* digest → :class:`~noe_core.image.image_platforms.ImagePlatforms`: content-addressed,
  immutable, no TTL. The value kept is the one handed out, so the policy's
  reading of it (rule 4's entries) is computed once per image, not per admission;
* tag → digest, with its freshness (``--cache-ttl``);
* a failed lookup, for ``--negative-cache-ttl`` (per image and credentials).

Behind memory come the shared levels, nearest first (:class:`SharedLevel`): the node's
SQLite :class:`~noe_core.registry.cache.sqlite.CacheStore` (``noe serve``: shared by the
workers, kept across restarts) and the :class:`~noe_core.registry.cache.redis.RedisCache`
of ``--cache-url`` (shared by every replica and rollout). A miss in memory asks each in
turn before the registry; an answer found in a farther level is copied into the nearer
ones, and what is fetched is written to all. Memory stays in front, so warm images touch
neither disk nor network. The levels' single-flight locks (workers, then replicas) are
taken, in that order, through :meth:`LayeredCache.across_workers`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from noe_core.errors import AuthError, NoeError, RegistryError
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.registry.cache.rows import from_row, platforms_row
from noe_core.registry.cache.sqlite import StoredFailure, StoredTag
from noe_core.registry.observer import RegistryObserver
from noe_core.registry.settings import RegistrySettings
from noe_core.util.deadline import Clock, Deadline
from noe_core.util.lru import Entry, LRUCache

# The logger keeps its name from before the move to this module: log filters select on it.
log = logging.getLogger("noe_core.registry.layered_cache")

FailureKey = tuple[str, str, tuple[str, ...]]
"""(repository context, tag or digest, credential identities) of one lookup."""


class SharedLevel(Protocol):
    """A cache level shared beyond this process; its methods never raise (a failure is a miss)."""

    name: str
    """``disk`` or ``redis``: the ``kind`` of its hits and misses."""
    key: bytes
    """The key of the credential fingerprints it holds."""

    def content(self, context: str, digest: str) -> tuple[str, str] | None: ...

    def put_content(self, context: str, digest: str, media_type: str, platforms: str) -> None: ...

    def tag(self, context: str, tag: str) -> StoredTag | None: ...

    def put_tag(self, context: str, tag: str, digest: str, fetched: float | None = None) -> None: ...

    def granted(self, context: str, fingerprints: Sequence[str]) -> tuple[str, float] | None: ...

    def grant(self, context: str, fingerprint: str, ttl: float) -> None: ...

    def failure(self, context: str, identifier: str, credentials: str) -> StoredFailure | None: ...

    def put_failure(
        self, context: str, identifier: str, credentials: str, *, message: str, status: int | None, ttl: float
    ) -> None: ...

    def lock(
        self, key: str, deadline: Deadline, on_wait: Callable[[], None] | None = None
    ) -> contextlib.AbstractContextManager[None]: ...

    def close(self) -> None: ...


class LayeredCache:
    """Memory, then the shared levels (node, then replicas), for image contents, tags and failures; thread-safe."""

    def __init__(
        self,
        settings: RegistrySettings,
        *,
        observer: RegistryObserver,
        clock: Clock = time.monotonic,
        store: SharedLevel | None = None,
        shared: SharedLevel | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.shared = shared
        self.levels: tuple[SharedLevel, ...] = tuple(level for level in (store, shared) if level is not None)
        self._observer = observer
        self._clock = clock
        self._content: LRUCache[tuple[str, str], ImagePlatforms] = LRUCache(settings.max_cached_images, clock=clock)
        self._tags: LRUCache[tuple[str, str], str] = LRUCache(settings.max_cached_tags, clock=clock)
        self._negative: LRUCache[FailureKey, NoeError] = LRUCache(settings.max_cached_tags, clock=clock)

    def close(self) -> None:
        for level in self.levels:
            level.close()

    # -- digest → platforms ----------------------------------------------------------------

    def memory_content(self, context: str, digest: str) -> ImagePlatforms | None:
        """The answer for ``digest`` if memory has it (no disk, no counting): the warm path."""
        return self._content.get((context, digest))

    def content(self, context: str, digest: str) -> ImagePlatforms | None:
        """Memory, then each level (copied into the nearer ones); ``None`` when none has it."""
        found = self._content.get((context, digest))
        if found is not None:
            self._observer.cache_hit("memory")
            return found
        self._observer.cache_miss("memory")
        for depth, level in enumerate(self.levels):
            row = level.content(context, digest)
            if row is None:
                self._observer.cache_miss(level.name)
                continue
            try:
                found = from_row(digest, *row)
            except (ValueError, TypeError):
                log.warning("registry cache (%s): unreadable entry for %s@%s ignored", level.name, context, digest)
                continue
            self._observer.cache_hit(level.name)
            for nearer in self.levels[:depth]:
                nearer.put_content(context, digest, *row)
            self._content.set((context, digest), found)
            return found
        return None

    def put_content(self, context: str, digest: str, found: ImagePlatforms) -> None:
        self._content.set((context, digest), found)
        if self.levels:
            row = platforms_row(found)
            for level in self.levels:
                level.put_content(context, digest, found.media_type, row)

    # -- tag → digest ------------------------------------------------------------------------

    def fresh_tag(self, context: str, tag: str) -> str | None:
        """The tag's digest if memory holds it fresh (no disk): the warm path."""
        entry = self._tags.get_entry((context, tag))
        return entry.value if entry is not None and entry.fresh(self._clock()) else None

    def tag_entry(self, context: str, tag: str) -> Entry[str] | None:
        """The tag's digest and freshness: memory, then each level (its age applied to ``--cache-ttl``)."""
        entry = self._tags.get_entry((context, tag))
        if entry is not None:
            return entry
        for depth, level in enumerate(self.levels):
            stored = level.tag(context, tag)
            if stored is not None:
                for nearer in self.levels[:depth]:
                    nearer.put_tag(context, tag, stored.digest, stored.fetched)
                break
        else:
            return None
        left = max(0.0, self.settings.cache_ttl - (time.time() - stored.fetched))
        self._tags.set((context, tag), stored.digest, left)
        return self._tags.get_entry((context, tag))

    def put_tag(self, context: str, tag: str, digest: str, ttl: float, *, fetched: bool) -> None:
        """Remember ``tag`` → ``digest`` for ``ttl``; ``fetched``: the registry just confirmed it (to every level)."""
        self._tags.set((context, tag), digest, ttl)
        if fetched:
            for level in self.levels:
                level.put_tag(context, tag, digest)

    # -- failures ----------------------------------------------------------------------------

    def failure(self, key: FailureKey) -> NoeError | None:
        """The failure remembered in memory for this lookup."""
        return self._negative.get(key)

    def stored_failure(self, key: FailureKey, credentials: str, registry: str) -> RegistryError | None:
        """The failure a worker or replica remembered for this image and these credentials, if any."""
        context, identifier, _ = key
        for level in self.levels:
            stored = level.failure(context, identifier, credentials)
            if stored is not None:
                break
        else:
            return None
        self._observer.cache_hit("negative")
        kind = AuthError if stored.status in (401, 403) else RegistryError
        return kind(stored.message, registry=registry, status=stored.status)

    def put_failure(self, key: FailureKey, credentials: str, error: NoeError) -> None:
        """Remember ``error`` for ``--negative-cache-ttl``; in the shared levels too unless it is temporary."""
        ttl = self.settings.negative_cache_ttl
        if ttl <= 0:
            return
        self._negative.set(key, error, ttl)
        if isinstance(error, RegistryError) and error.temporary:
            return
        context, identifier, _ = key
        for level in self.levels:
            level.put_failure(
                context,
                identifier,
                credentials,
                message=str(error),
                status=getattr(error, "status", None),
                ttl=ttl,
            )

    # -- across workers ----------------------------------------------------------------------

    @contextlib.contextmanager
    def across_workers(
        self, key: str, deadline: Deadline, on_wait: Callable[[str], None] = lambda kind: None
    ) -> Iterator[None]:
        """Hold ``key``'s lock in each level while it is fetched: the node's workers, then the replicas.

        ``on_wait`` is told ``worker`` or ``replica`` when another one held it (no-op without levels).
        """
        with contextlib.ExitStack() as stack:
            for level in self.levels:
                kind = "replica" if level.name == "redis" else "worker"
                stack.enter_context(level.lock(key, deadline, on_wait=lambda kind=kind: on_wait(kind)))  # type: ignore[misc]
            yield
