"""Python's cyclic garbage collector paused while lists fill the caches, and what they filled frozen out of it.

Why: a list of 60,000 pods builds about a million long-lived dicts, lists and
strings. The collector's oldest generation runs each time the long-lived
objects have grown by a quarter, and each run walks all of them: listing then
cost half again as much CPU as decoding (bench/bench_controller.py). The
objects a cache keeps are decoded JSON, which holds no reference cycle, so
reference counting frees them without the collector. Between the first list
that starts and the last that ends, the collector is off; then one collection
frees whatever cycles other threads left meanwhile, and ``gc.freeze`` moves
every surviving object (the caches) out of the generations, so that no later
collection walks them again.

Process-wide, like the collector itself: :data:`COLLECTOR` counts the lists under way.
A collector that was already off when the first list started stays off.
"""

from __future__ import annotations

import gc
import threading


class CollectorPause:
    """The count of lists under way, and whether the collector was on before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists = 0
        self._enable_after = False

    def pause(self) -> None:
        """A list starts: the collector is off until every list under way has called :meth:`resume`."""
        with self._lock:
            if self._lists == 0:
                self._enable_after = gc.isenabled()
                gc.disable()
            self._lists += 1

    def resume(self) -> None:
        """A list ended (complete or broken off); after the last one, collect once, freeze, turn the collector on."""
        with self._lock:
            self._lists -= 1
            if self._lists > 0 or not self._enable_after:
                return
            gc.collect()  # cycles other threads left while it was off: not frozen with the caches
            gc.freeze()  # the caches live on: keep them out of every later full collection
            gc.enable()

    @property
    def lists(self) -> int:
        return self._lists


COLLECTOR = CollectorPause()
"""The process's one: the collector it pauses is the process's."""
