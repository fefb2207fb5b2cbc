"""The registry cache every replica and every rollout shares: Redis (or Valkey), behind the local levels.

``--cache-url`` puts a :class:`RedisCache` behind memory and the node's SQLite file
(:mod:`noe_core.registry.cache.layers`): a miss in both is looked up here before the
registry, and what a replica fetches is written here for the others and for the next rollout.
It speaks the same methods as :class:`~noe_core.registry.cache.sqlite.CacheStore`, with the
same row codec (:mod:`noe_core.registry.cache.rows`). Keys, under ``noe:v1:``:

* ``c:{context}@{digest}`` — the image's media type and platforms (immutable; kept
  :data:`CONTENT_TTL` after its last use, at most ``--max-cached-images`` of them);
* ``t:{context}:{tag}`` — digest and when it was fetched (the reader applies ``--cache-ttl``;
  kept a day longer, so a stale tag costs a ``HEAD``, not a ``GET``; at most ``--max-cached-tags``);
* ``g:{context}|{fingerprint}`` — a KEP-2535 grant until its expiry (``--cache-ttl``);
* ``f:{context}|{image}|{fingerprints}`` — a failure, for ``--negative-cache-ttl``;
* ``l:{context}@{image}`` — the single-flight lock across replicas (a token, expiring with
  the holder's deadline, released only by its holder).

Nothing secret is written: fingerprints are HMAC-SHA256 under the shared ``--cache-key-file``
(the same key in every replica, so a credential verified by one counts for all; never a
per-pod key, never an unkeyed hash), and no header, token or password is ever a key or a value.

Redis never makes an admission slower or fail: every call has ``--cache-timeout``, and any
error (refused, wrong password, frozen, gone) turns this level off at once — the caller
carries on with its local levels and the registry — with one warning, while a background
thread reconnects; when Redis answers again, sharing resumes (one line). The password is
never in a log line: messages are built from the redacted URL and the error's type.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from noe_core.registry.cache.sqlite import CachedImage, CacheStats, StoredFailure, StoredTag
from noe_core.registry.cache.url import CacheURL, redact
from noe_core.util.deadline import Deadline

# The logger keeps its name from before the move to this module: log filters select on it.
log = logging.getLogger("noe_core.registry.redis_cache")

PREFIX = "noe:v1:"
"""Every key starts here; another layout gets another version, and the two never read each other."""
CONTENT_TTL = 7 * 86400.0
"""Seconds an image's platforms stay after their last use (they never change: this only bounds memory)."""
TAG_KEEP = 86400.0
"""Seconds a tag stays beyond ``--cache-ttl``: re-validating a stale tag is a HEAD, not a GET."""
MIN_KEY_BYTES = 32
LOCK_POLL = 0.01
"""Seconds between two tries for a lock another replica holds."""
LOCK_RESERVE = 1.0
"""Seconds of its deadline a waiter keeps for its own lookup, should the holder never finish."""
MAX_LOCK = 30.0
RECONNECT_FIRST, RECONNECT_MAX = 0.5, 10.0
"""Seconds between two reconnection tries while Redis is unreachable (doubling)."""
_SCAN_BATCH = 500

T = TypeVar("T")


class RedisObserver(Protocol):
    """What the web layer's metrics see of this level (must be cheap and never raise)."""

    def redis_call(self, operation: str, seconds: float, *, error: bool) -> None:
        """One call (one round trip) and whether it failed."""

    def redis_up(self, server: str, up: bool) -> None:
        """Whether Redis (``host:port``) answers: set at start and on every change."""


class _Quiet:
    def redis_call(self, operation: str, seconds: float, *, error: bool) -> None:
        pass

    def redis_up(self, server: str, up: bool) -> None:
        pass


class SharedKeyError(ValueError):
    """The fingerprint key file cannot be used; the message names the file and what to do."""


def load_shared_key(path: Path) -> bytes:
    """The fingerprint key shared by every replica (a mounted Secret): at least 32 bytes, read as is."""
    try:
        data = path.read_bytes().strip()
    except OSError as exc:
        raise SharedKeyError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) < MIN_KEY_BYTES:
        raise SharedKeyError(
            f"{path} holds {len(data)} bytes; the shared fingerprint key needs at least {MIN_KEY_BYTES} "
            "(e.g. `head -c 48 /dev/urandom | base64` into a Secret mounted in every replica)"
        )
    return data


@dataclass(frozen=True)
class RedisLimits:
    """How much this level keeps, and for how long tags are worth keeping."""

    max_images: int
    max_tags: int
    cache_ttl: float


class RedisCache:
    """The shared level; thread-safe (a connection pool), and off — never failing — while Redis is away."""

    name = "redis"

    def __init__(
        self,
        url: CacheURL,
        *,
        key: bytes,
        limits: RedisLimits,
        timeout: float,
        ca_file: Path | None = None,
        observer: RedisObserver | None = None,
        warn_at_start: bool = True,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.key = key
        self.limits = limits
        self.timeout = timeout
        self._observer: RedisObserver = observer if observer is not None else _Quiet()
        self._wall = wall
        self._up = threading.Event()
        self._closed = threading.Event()
        self._state_lock = threading.Lock()
        self._reconnecting = False
        self.last_error = ""
        options: dict[str, Any] = {}
        if url.tls:
            options.update(ssl=True, ssl_cert_reqs=ssl.CERT_REQUIRED, ssl_ca_certs=str(ca_file) if ca_file else None)
        self._client = redis.Redis(
            host=url.host,
            port=url.port,
            db=url.db,
            username=url.username or None,
            password=url.password or None,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),  # a retry would double the time a dead Redis costs an admission
            **options,
        )
        if self._ping():
            self._set_up(True, quiet=True)
        else:
            self._went_down(warn=warn_at_start)

    # -- state -----------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        return self._up.is_set()

    def _ping(self) -> bool:
        try:
            return bool(self._timed("ping", lambda c: c.ping()))
        except (redis.RedisError, OSError) as exc:
            self.last_error = self._describe(exc)
            return False

    def _describe(self, exc: BaseException) -> str:
        """An error as a log line may show it: its type and text, any password masked."""
        text = redact(str(exc)).strip()
        if self.url.password:
            text = text.replace(self.url.password, "***")
        name = type(exc).__name__
        return f"{name}: {text}" if text else name

    def _set_up(self, up: bool, *, quiet: bool = False) -> None:
        if up:
            self._up.set()
        else:
            self._up.clear()
        self._observer.redis_up(self.url.address, up)
        if up and not quiet:
            log.info("shared registry cache %s answers again: sharing resumes", self.url.redacted())

    def _went_down(self, *, warn: bool | None = None) -> None:
        """Off, and reconnecting; warns on the change (``warn``: at start, where there is no change)."""
        with self._state_lock:
            was_up = self._up.is_set()
            self._set_up(False)
            start = not self._reconnecting and not self._closed.is_set()
            self._reconnecting = self._reconnecting or start
        if was_up if warn is None else warn:
            log.warning(
                "shared registry cache %s unusable (%s): using the local cache and the registry, "
                "reconnecting in the background",
                self.url.redacted(),
                self.last_error,
            )
        if start:
            threading.Thread(target=self._reconnect, name="noe-redis-reconnect", daemon=True).start()

    def _reconnect(self) -> None:
        delay = RECONNECT_FIRST
        while not self._closed.wait(delay):
            if self._ping():
                with self._state_lock:
                    self._reconnecting = False
                    self._set_up(True)
                return
            delay = min(delay * 2, RECONNECT_MAX)

    def close(self) -> None:
        self._closed.set()
        self._up.clear()
        with contextlib.suppress(redis.RedisError, OSError):
            self._client.close()

    # -- calls -----------------------------------------------------------------------------

    def _timed(self, operation: str, fn: Callable[[redis.Redis], T]) -> T:
        start = time.perf_counter()
        try:
            result = fn(self._client)
        except BaseException:
            self._observer.redis_call(operation, time.perf_counter() - start, error=True)
            raise
        self._observer.redis_call(operation, time.perf_counter() - start, error=False)
        return result

    def _call(self, operation: str, fn: Callable[[redis.Redis], T], default: T) -> T:
        """``fn`` on the client, or ``default`` when Redis is off or fails (which turns it off)."""
        if not self._up.is_set():
            return default
        try:
            return self._timed(operation, fn)
        except (redis.ResponseError, redis.DataError, redis.exceptions.LockError) as exc:
            # The server answered (or the client refused a value): it is up, this one command failed.
            log.debug("shared registry cache: %s failed: %s", operation, self._describe(exc))
            return default
        except (redis.RedisError, OSError) as exc:
            self.last_error = self._describe(exc)
            self._went_down()
            return default

    # -- content ---------------------------------------------------------------------------

    def content(self, context: str, digest: str) -> tuple[str, str] | None:
        key = _content_key(context, digest)

        def read(c: redis.Redis) -> list[Any]:
            pipe = c.pipeline(transaction=False)
            pipe.hmget(key, "media_type", "platforms")
            pipe.expire(key, int(CONTENT_TTL))
            pipe.zadd(_INDEX_CONTENT, {key: self._wall()}, xx=True)  # last use, for the bound
            return pipe.execute()

        found = self._call("content", read, None)
        if not found or found[0][0] is None or found[0][1] is None:
            return None
        media_type, platforms = found[0]
        return _text(media_type), _text(platforms)

    def put_content(self, context: str, digest: str, media_type: str, platforms: str) -> None:
        key = _content_key(context, digest)
        now = self._wall()
        mapping: dict[Any, Any] = {
            "context": context,
            "digest": digest,
            "media_type": media_type,
            "platforms": platforms,
        }
        self._put(
            "put_content", key, mapping, ttl=CONTENT_TTL, index=_INDEX_CONTENT, bound=self.limits.max_images, now=now
        )

    def _put(
        self, operation: str, key: str, mapping: dict[Any, Any], *, ttl: float, index: str, bound: int, now: float
    ) -> None:
        """Write one bounded entry: its fields, its TTL, its place in the index; evict beyond ``bound``."""

        def write(c: redis.Redis) -> int:
            pipe = c.pipeline(transaction=False)
            pipe.hset(key, mapping={**mapping, "written": repr(now)})
            pipe.pexpire(key, max(1, int(ttl * 1000)))
            pipe.zadd(index, {key: now})
            pipe.pexpire(index, int(CONTENT_TTL * 1000))  # the index too: every key noe writes expires
            pipe.zcard(index)
            return int(pipe.execute()[-1])

        count = self._call(operation, write, 0)
        if count > bound:
            self._call("evict", lambda c: _evict(c, index, count - bound), None)

    # -- tags ------------------------------------------------------------------------------

    def tag(self, context: str, tag: str) -> StoredTag | None:
        found = self._call("tag", lambda c: c.hmget(_tag_key(context, tag), "digest", "fetched"), None)
        if not found or found[0] is None or found[1] is None:
            return None
        try:
            return StoredTag(_text(found[0]), float(_text(found[1])))
        except ValueError:
            return None

    def put_tag(self, context: str, tag: str, digest: str, fetched: float | None = None) -> None:
        now = self._wall()
        when = now if fetched is None else fetched
        mapping: dict[Any, Any] = {"context": context, "tag": tag, "digest": digest, "fetched": repr(when)}
        ttl = self.limits.cache_ttl + TAG_KEEP
        self._put(
            "put_tag", _tag_key(context, tag), mapping, ttl=ttl, index=_INDEX_TAGS, bound=self.limits.max_tags, now=now
        )

    # -- grants ----------------------------------------------------------------------------

    def granted(self, context: str, fingerprints: Sequence[str]) -> tuple[str, float] | None:
        if not fingerprints:
            return None
        values = self._call("granted", lambda c: c.mget([_grant_key(context, f) for f in fingerprints]), None)
        if not values:
            return None
        now = self._wall()
        best: tuple[str, float] | None = None
        for fingerprint, value in zip(fingerprints, values, strict=True):
            if value is None:
                continue
            try:
                expires = float(_text(value))
            except ValueError:
                continue
            if expires > now and (best is None or expires > best[1]):
                best = (fingerprint, expires)
        return best

    def grant(self, context: str, fingerprint: str, ttl: float) -> None:
        expires = self._wall() + ttl
        self._call(
            "grant", lambda c: c.set(_grant_key(context, fingerprint), repr(expires), px=max(1, int(ttl * 1000))), None
        )

    # -- failures --------------------------------------------------------------------------

    def failure(self, context: str, identifier: str, credentials: str) -> StoredFailure | None:
        value = self._call("failure", lambda c: c.get(_failure_key(context, identifier, credentials)), None)
        if value is None:
            return None
        try:
            message, status = json.loads(_text(value))
            return StoredFailure(str(message), None if status is None else int(status))
        except (ValueError, TypeError):
            return None

    def put_failure(
        self, context: str, identifier: str, credentials: str, *, message: str, status: int | None, ttl: float
    ) -> None:
        value = json.dumps([message, status])
        key = _failure_key(context, identifier, credentials)
        self._call("put_failure", lambda c: c.set(key, value, px=max(1, int(ttl * 1000))), None)

    # -- single flight across replicas -----------------------------------------------------

    @contextlib.contextmanager
    def lock(self, key: str, deadline: Deadline, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold ``key`` across replicas while it is fetched; never an obstacle to answering in time.

        The lock is a token that expires with the holder's deadline, so a holder that died
        blocks nobody for longer. A waiter keeps :data:`LOCK_RESERVE` (at most a quarter of its
        budget) for its own lookup: past that it goes ahead without the lock. With Redis off,
        or failing, this is a no-op.
        """
        if not self._up.is_set():
            yield
            return
        remaining = deadline.remaining()
        ttl = min(MAX_LOCK, max(0.1, remaining))
        held = self._client.lock(_PREFIX_LOCK + key, timeout=ttl, blocking=False, thread_local=False)
        reserve = min(LOCK_RESERVE, deadline.budget / 4)
        waited = False
        while True:
            acquired = self._call("lock", lambda c: held.acquire(blocking=False), None)
            if acquired is None or acquired:
                break
            if not waited:
                waited = True
                if on_wait is not None:
                    on_wait()
            if deadline.remaining() <= reserve:
                log.debug("shared registry cache: %s still locked by another replica; looking it up here", key)
                break
            time.sleep(LOCK_POLL)
        try:
            yield
        finally:
            if acquired:
                self._call("unlock", lambda c: held.release(), None)  # expired meanwhile: a LockError, ignored

    # -- operators (noe cache) -------------------------------------------------------------

    def _scan(self, pattern: str) -> list[str]:
        return [_text(k) for k in self._client.scan_iter(match=pattern, count=_SCAN_BATCH)]

    def stats(self) -> CacheStats:
        """Entry counts of the shared level (raises ``redis.RedisError`` when it cannot be read)."""
        client = self._client
        oldest = None
        tags = client.zrange(_INDEX_TAGS, 0, 0, withscores=True)
        if tags:
            oldest = self._wall() - float(tags[0][1])
        memory = client.info("memory").get("used_memory", 0)
        return CacheStats(
            self.url.redacted(),
            len(self._scan(_PREFIX_CONTENT + "*")),
            len(self._scan(_PREFIX_TAG + "*")),
            len(self._scan(_PREFIX_GRANT + "*")),
            len(self._scan(_PREFIX_FAILURE + "*")),
            int(memory),
            oldest,
        )

    def images(self) -> list[CachedImage]:
        """Every image the shared level holds, with its tags (raises ``redis.RedisError``)."""
        client = self._client
        tags: dict[tuple[str, str], list[str]] = {}
        for key in self._scan(_PREFIX_TAG + "*"):
            row = client.hmget(key, "context", "tag", "digest")
            if None not in row:
                context, tag, digest = (_text(v) for v in row)
                tags.setdefault((context, digest), []).append(tag)
        now = self._wall()
        found = []
        for key in sorted(self._scan(_PREFIX_CONTENT + "*")):
            row = client.hmget(key, "context", "digest", "media_type", "platforms", "written")
            if None in row:
                continue
            context, digest, media_type, platforms, written = (_text(v) for v in row)
            age = now - float(written)
            found.append(
                CachedImage(context, digest, media_type, platforms, tuple(sorted(tags.get((context, digest), ()))), age)
            )
        return found

    def purge(self, contexts: Sequence[str] = ()) -> int:
        """Forget every entry of ``contexts`` (everything of noe's when empty); returns the keys deleted."""
        client = self._client
        if contexts:
            patterns = [
                f"{prefix}{_glob(context)}{sep}*"
                for context in contexts
                for prefix, sep in (
                    (_PREFIX_CONTENT, "@"),
                    (_PREFIX_TAG, ":"),
                    (_PREFIX_GRANT, "|"),
                    (_PREFIX_FAILURE, "|"),
                )
            ]
        else:
            patterns = [PREFIX + "*"]
        deleted = 0
        for pattern in patterns:
            keys = self._scan(pattern)
            for start in range(0, len(keys), _SCAN_BATCH):
                batch = keys[start : start + _SCAN_BATCH]
                deleted += int(client.delete(*batch))
                client.zrem(_INDEX_CONTENT, *batch)
                client.zrem(_INDEX_TAGS, *batch)
        return deleted


_PREFIX_CONTENT = PREFIX + "c:"
_PREFIX_TAG = PREFIX + "t:"
_PREFIX_GRANT = PREFIX + "g:"
_PREFIX_FAILURE = PREFIX + "f:"
_PREFIX_LOCK = PREFIX + "l:"
_INDEX_CONTENT = PREFIX + "index:content"
_INDEX_TAGS = PREFIX + "index:tags"


def _content_key(context: str, digest: str) -> str:
    return f"{_PREFIX_CONTENT}{context}@{digest}"


def _tag_key(context: str, tag: str) -> str:
    return f"{_PREFIX_TAG}{context}:{tag}"


def _grant_key(context: str, fingerprint: str) -> str:
    return f"{_PREFIX_GRANT}{context}|{fingerprint}"


def _failure_key(context: str, identifier: str, credentials: str) -> str:
    return f"{_PREFIX_FAILURE}{context}|{identifier}|{credentials}"


def _glob(text: str) -> str:
    """``text`` as a literal inside a Redis ``MATCH`` pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _evict(client: redis.Redis, index: str, excess: int) -> None:
    """Drop the ``excess`` least recently used entries of ``index`` (another replica may race: harmless)."""
    oldest = client.zpopmin(index, excess)
    if oldest:
        client.delete(*(_text(pair[0]) for pair in oldest))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
