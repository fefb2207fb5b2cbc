"""Thread-safe bounded caches with per-entry expiry, and single-flight.

:class:`LRUCache` keeps at most ``maxsize`` entries, evicting the least
recently used; each entry may carry its own time-to-live. An expired entry is
not returned by :meth:`LRUCache.get` but stays available through
:meth:`LRUCache.get_entry` until evicted, so that a caller can re-validate a
stale value cheaply (one ``HEAD``) instead of fetching it again.

:class:`SingleFlight` makes concurrent calls for the same key share one
execution: the first caller runs the function, the others wait for its
result, each only as long as its own :class:`~noe_core.util.deadline.Deadline`
allows. Nothing here does I/O; the clock is injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from noe_core.errors import DeadlineExceeded, NoeError, RegistryError
from noe_core.util.deadline import Clock, Deadline

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class Entry(Generic[V]):
    """A cached value and when it stops being fresh (``inf``: never)."""

    value: V
    expires_at: float

    def fresh(self, now: float) -> bool:
        return now < self.expires_at


class LRUCache(Generic[K, V]):
    """A bounded LRU map; every operation takes one lock."""

    def __init__(self, maxsize: int, *, clock: Clock = time.monotonic) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._clock = clock
        self._data: OrderedDict[K, Entry[V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value when present and fresh, else ``None``."""
        entry = self.get_entry(key)
        if entry is None or not entry.fresh(self._clock()):
            return None
        return entry.value

    def get_entry(self, key: K) -> Entry[V] | None:
        """The entry even when expired (for re-validation); marks it recently used."""
        with self._lock:
            entry = self._data.get(key)
            if entry is not None:
                self._data.move_to_end(key)
            return entry

    def set(self, key: K, value: V, ttl: float | None = None) -> None:
        """Store ``value``; ``ttl`` seconds of freshness, ``None`` for never-expiring."""
        expires_at = float("inf") if ttl is None else self._clock() + ttl
        with self._lock:
            self._data[key] = Entry(value, expires_at)
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data


class _Call(Generic[V]):
    __slots__ = ("done", "error", "ok", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: V | None = None
        self.ok = False
        self.error: Exception | None = None


class SingleFlight(Generic[K, V]):
    """Concurrent :meth:`do` calls with the same key share one execution.

    ``shared`` lists the errors the waiters receive as the leader did (by
    default :class:`NoeError`; the web layer adds its Kubernetes API errors).
    """

    def __init__(self, shared: tuple[type[Exception], ...] = (NoeError,)) -> None:
        self._shared = shared
        self._lock = threading.Lock()
        self._calls: dict[K, _Call[V]] = {}

    def in_flight(self) -> int:
        with self._lock:
            return len(self._calls)

    def do(self, key: K, fn: Callable[[], V], deadline: Deadline) -> tuple[V, bool]:
        """Run ``fn`` or wait for the identical call in flight; returns ``(value, shared)``.

        A waiter gives up with :class:`DeadlineExceeded` when its own deadline
        passes. When the call it waited for ran out of the *leader's* time, a
        waiter with time left runs the call itself. Errors that are not
        ``shared`` (bugs) reach the leader unchanged and the waiters as a
        :class:`RegistryError`.
        """
        shared = False
        while True:
            with self._lock:
                call = self._calls.get(key)
                leader = call is None
                if call is None:
                    call = _Call()
                    self._calls[key] = call
            if leader:
                return self._lead(key, call, fn), shared
            shared = True
            if not call.done.wait(deadline.wait_timeout()):
                raise DeadlineExceeded("gave up waiting for an identical lookup in flight")
            if call.ok:
                return call.value, shared  # type: ignore[return-value]
            if isinstance(call.error, DeadlineExceeded) and not deadline.expired:
                continue
            if call.error is not None:
                raise call.error
            raise RegistryError("an identical lookup in flight failed unexpectedly", temporary=True)

    def _lead(self, key: K, call: _Call[V], fn: Callable[[], V]) -> V:
        try:
            value = fn()
            call.value = value
            call.ok = True
            return value
        except self._shared as exc:
            call.error = exc
            raise
        finally:
            with self._lock:
                self._calls.pop(key, None)
            call.done.set()
