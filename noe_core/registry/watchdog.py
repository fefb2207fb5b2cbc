"""Wall-clock limits on registry exchanges: a connection still busy at the deadline is shut down.

Socket timeouts restart with every byte, so a registry that drips its headers
or body a few bytes a second never trips them: ``noe inspect --timeout 4``
waited forever, and webhook lookups kept their pool threads busy long after
the admission had been answered. :func:`watch` arms one shared timer thread
for the exchange made inside it; the connections the exchange opens or
reuses (registered by the adapter in :mod:`noe_core.registry.sender` through
:func:`attach`) are shut down when the deadline passes, so the blocked read
returns at once and the sender reports the deadline.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

_local = threading.local()


class Watch:
    """One exchange's limit and the connections it is using."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.fired = False
        self.done = False
        self._connections: list[Any] = []
        self._lock = threading.Lock()

    def attach(self, connection: Any) -> None:
        with self._lock:
            if self.fired:
                _shutdown(connection)
            else:
                self._connections.append(connection)

    def finish(self) -> None:
        """The exchange is over: nothing to shut down any more."""
        with self._lock:
            self.done = True
            self._connections.clear()

    def fire(self) -> None:
        with self._lock:
            if self.done:
                return
            self.fired = True
            connections, self._connections = self._connections, []
        for connection in connections:
            _shutdown(connection)


def _shutdown(connection: Any) -> None:
    """Shut the connection's socket down under whoever is blocked reading it (not close: they own the fd)."""
    sock = getattr(connection, "sock", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, not SSLSocket's unwrap


class _Timer:
    """One daemon thread firing watches in deadline order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._count = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watch: Watch) -> None:
        with self._cond:
            heapq.heappush(self._heap, (watch.at, next(self._count), watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="noe-registry-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(30.0)
                    if not self._heap:
                        self._thread = None
                        return
                    continue
                at, _, watch = self._heap[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
            watch.fire()


_timer = _Timer()


@contextlib.contextmanager
def watch(seconds: float | None) -> Iterator[Watch | None]:
    """Connections used in this block (by this thread) are shut down ``seconds`` from now; None: no limit."""
    if seconds is None or seconds == float("inf"):
        yield None
        return
    current = Watch(time.monotonic() + max(0.0, seconds))
    previous = getattr(_local, "watch", None)
    _local.watch = current
    _timer.add(current)
    try:
        yield current
    finally:
        _local.watch = previous
        current.finish()


def attach(connection: Any) -> None:
    """Called by a connection before it connects or sends: bind it to this thread's current watch."""
    current: Watch | None = getattr(_local, "watch", None)
    if current is not None:
        current.attach(connection)
