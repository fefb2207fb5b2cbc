"""A work queue of keys, as client-go's: each key at most once in the queue and never on two workers.

A key added while a worker holds it is handed out again once that worker is
done; a key can be added with a delay (retries, backoff), and the sooner of
two requested times wins.
"""

from __future__ import annotations

import collections
import heapq
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        # in order, each taken from the front in constant time: a dict's first key is found past every
        # key deleted before it, which made draining n queued keys (a full pass, a list) cost n²
        self._ready: collections.OrderedDict[K, None] = collections.OrderedDict()
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._seq = 0
        self._closed = False

    def add(self, key: K, delay: float = 0.0) -> None:
        with self._cond:
            if delay <= 0:
                if key in self._active:
                    self._again.add(key)
                else:
                    self._ready[key] = None
                self._due.pop(key, None)
                self._cond.notify()
                return
            due = self._clock() + delay
            if key in self._ready or self._due.get(key, float("inf")) <= due:
                return
            self._due[key] = due
            self._seq += 1
            heapq.heappush(self._delayed, (due, self._seq, key))
            self._cond.notify()

    def get(self, timeout: float = 1.0) -> K | None:
        """The next key to work on (the caller must call :meth:`done`), or ``None`` on timeout or close."""
        keys = self.take(timeout=timeout)
        return keys[0] if keys else None

    def take(self, *, share: int = 1, limit: int = 1, timeout: float = 1.0) -> list[K]:
        """The next keys to work on, at most ``limit`` and at most a ``share``-th of those ready (at least
        one), in order; empty on timeout or close. The caller calls :meth:`done` for each.

        Several CPU-bound workers that take and give back one key at a time hand the queue's lock, and
        with it the interpreter, to each other several times a pod (about five context switches a pod
        at four workers, twice the examinations' cost). A backlog taken in turns of many keys keeps them
        apart; a share of what is ready, so that one worker slowed by a lookup holds back few keys.
        """
        end = self._clock() + timeout
        with self._cond:
            while not self._closed:
                now = self._clock()
                while self._delayed and self._delayed[0][0] <= now:
                    due, _, key = heapq.heappop(self._delayed)
                    if self._due.get(key) == due:
                        del self._due[key]
                        if key in self._active:
                            self._again.add(key)
                        else:
                            self._ready[key] = None
                if self._ready:  # never held by a worker: add, take and done keep such keys in _again
                    count = max(1, min(limit, len(self._ready) // max(share, 1)))
                    keys = [self._ready.popitem(last=False)[0] for _ in range(count)]
                    self._active.update(keys)
                    return keys
                wait = end - now
                if self._delayed:
                    wait = min(wait, self._delayed[0][0] - now)
                if end <= now:
                    return []
                self._cond.wait(max(wait, 0.001))
            return []

    def done(self, *keys: K) -> None:
        """The work on ``keys`` is finished: a key added meanwhile is handed out again."""
        with self._cond:
            for key in keys:
                self._active.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self._ready[key] = None
                    self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def pending(self) -> int:
        """Keys ready or being worked on (delayed retries not counted): 0 means the queue has drained."""
        with self._cond:
            return len(self._ready) + len(self._active) + len(self._again)

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready) + len(self._due)
