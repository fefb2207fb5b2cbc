"""What the registry client reports about its work, without a metrics library.

``noe_core`` calls a :class:`RegistryObserver`; the web layer implements it with
Prometheus counters, ``noe inspect -v`` and the tests use
:class:`CountingObserver`. Observers must be cheap and thread-safe, and must
never raise: they are called on the lookup's own thread.

Label values are bounded: ``registry`` is a host, ``method`` an HTTP verb,
``status`` an HTTP status code or ``0`` when no answer arrived, ``kind`` one of
a few fixed words (``tag``, ``digest``, ``token``, ``negative``) and
``outcome`` / error ``kind`` short fixed words too.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Protocol


class RegistryObserver(Protocol):
    def request(self, registry: str, method: str, status: int) -> None:
        """One HTTP request to a registry or token server (status 0: no answer)."""

    def cache_hit(self, kind: str) -> None:
        """A lookup answered from cache."""

    def cache_miss(self, kind: str) -> None:
        """A lookup that had to go to the registry."""

    def coalesced(self, kind: str) -> None:
        """A lookup that waited for an identical one already in flight."""

    def token_fetch(self, registry: str, outcome: str) -> None:
        """A bearer token request: ``ok``, ``denied`` or ``error``."""

    def rate_limit(self, registry: str, remaining: int, limit: int) -> None:
        """Docker Hub-style ``RateLimit-Remaining`` / ``RateLimit-Limit`` seen."""

    def error(self, registry: str, kind: str) -> None:
        """A failed lookup step: ``auth``, ``not_found``, ``digest``, ``deadline``, ``server``, ``manifest``…"""


class NullObserver:
    """Discards everything."""

    def request(self, registry: str, method: str, status: int) -> None:
        pass

    def cache_hit(self, kind: str) -> None:
        pass

    def cache_miss(self, kind: str) -> None:
        pass

    def coalesced(self, kind: str) -> None:
        pass

    def token_fetch(self, registry: str, outcome: str) -> None:
        pass

    def rate_limit(self, registry: str, remaining: int, limit: int) -> None:
        pass

    def error(self, registry: str, kind: str) -> None:
        pass


class CountingObserver:
    """Counts every event in memory; thread-safe. For tests and ``noe inspect -v``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.coalesced_waits: Counter[str] = Counter()
        self.token_fetches: Counter[tuple[str, str]] = Counter()
        self.rate_limits: dict[str, tuple[int, int]] = {}
        self.errors: Counter[tuple[str, str]] = Counter()

    def request(self, registry: str, method: str, status: int) -> None:
        with self._lock:
            self.requests[(registry, method, status)] += 1

    def cache_hit(self, kind: str) -> None:
        with self._lock:
            self.hits[kind] += 1

    def cache_miss(self, kind: str) -> None:
        with self._lock:
            self.misses[kind] += 1

    def coalesced(self, kind: str) -> None:
        with self._lock:
            self.coalesced_waits[kind] += 1

    def token_fetch(self, registry: str, outcome: str) -> None:
        with self._lock:
            self.token_fetches[(registry, outcome)] += 1

    def rate_limit(self, registry: str, remaining: int, limit: int) -> None:
        with self._lock:
            self.rate_limits[registry] = (remaining, limit)

    def error(self, registry: str, kind: str) -> None:
        with self._lock:
            self.errors[(registry, kind)] += 1

    def summary(self) -> dict[str, object]:
        """A plain dict for printing (``noe inspect -v``)."""
        with self._lock:
            return {
                "requests": {f"{r} {m} {s}": n for (r, m, s), n in sorted(self.requests.items())},
                "cache_hits": dict(self.hits),
                "cache_misses": dict(self.misses),
                "coalesced": dict(self.coalesced_waits),
                "token_fetches": {f"{r} {o}": n for (r, o), n in sorted(self.token_fetches.items())},
                "rate_limits": {r: f"{rem}/{lim}" for r, (rem, lim) in sorted(self.rate_limits.items())},
                "errors": {f"{r} {k}": n for (r, k), n in sorted(self.errors.items())},
            }
