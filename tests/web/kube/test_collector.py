"""The garbage collector paused while lists run: off from the first list to the last, then one collection,
the survivors frozen, and on again; a collector someone else turned off stays off."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from noe_web.kube.collector import CollectorPause


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_collector_is_off_from_the_first_list_to_the_last_then_collects_and_freezes() -> None:
    gc.enable()
    gc.unfreeze()
    pause = CollectorPause()
    pause.pause()
    assert not gc.isenabled()
    pause.pause()  # a second informer lists meanwhile
    pause.resume()
    assert not gc.isenabled() and pause.lists == 1  # one list still under way
    left = weakref.ref(Cycle())  # garbage only the collector frees, left while it was off
    assert left() is not None
    pause.resume()
    assert gc.isenabled() and pause.lists == 0
    assert gc.get_freeze_count() > 0  # what survived (the caches) is out of the generations
    assert left() is None  # collected before the freeze, not frozen with the caches


def test_a_collector_already_off_stays_off_and_nothing_is_frozen() -> None:
    gc.disable()
    gc.unfreeze()
    pause = CollectorPause()
    pause.pause()
    pause.resume()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0
