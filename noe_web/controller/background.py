"""A pass run on its own daemon thread, every interval or as soon as it is woken, until stopped.

The leader's writers (policy status, PolicyReports, rollouts) each run one: what they share
is the thread's life cycle, and that one pass that raises is logged, never the end of the
controller. When a pass may run (leading, caches synced) is each writer's own test, made
inside its pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class Background:
    """``step`` on thread ``name`` every ``interval()`` seconds, and at once after :meth:`wake`."""

    def __init__(
        self, name: str, step: Callable[[], None], interval: Callable[[], float], *, log: logging.Logger, failed: str
    ) -> None:
        self.name, self._step, self._interval = name, step, interval
        self._log, self._failed = log, failed
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wake(self) -> None:
        """Run a pass now (or right after the one under way)."""
        self._wake.set()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` inside a pass, cut short by :meth:`stop` (a retry's backoff)."""
        self._stop.wait(seconds)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval())
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._step()
            except Exception:  # one bad pass must not stop the controller
                self._log.exception(self._failed)
