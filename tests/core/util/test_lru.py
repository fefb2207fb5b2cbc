"""LRU + TTL cache and single-flight."""

from __future__ import annotations

import threading
import time

import pytest

from noe_core.errors import DeadlineExceeded, RegistryError
from noe_core.util.deadline import Deadline
from noe_core.util.lru import LRUCache, SingleFlight


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lru_eviction_and_recency() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.set("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_ttl_expiry_keeps_the_stale_entry_for_revalidation() -> None:
    clock = Clock()
    cache: LRUCache[str, str] = LRUCache(10, clock=clock)
    cache.set("tag", "sha256:x", ttl=60)
    cache.set("forever", "y")
    clock.now = 59
    assert cache.get("tag") == "sha256:x"
    clock.now = 60
    assert cache.get("tag") is None
    entry = cache.get_entry("tag")
    assert entry is not None and entry.value == "sha256:x" and not entry.fresh(clock.now)
    clock.now = 1e9
    assert cache.get("forever") == "y"
    cache.pop("tag")
    assert cache.get_entry("tag") is None


def test_invalid_size() -> None:
    with pytest.raises(ValueError):
        LRUCache(0)


def test_single_flight_shares_one_call() -> None:
    flight: SingleFlight[str, int] = SingleFlight()
    calls = []
    gate = threading.Event()

    def work() -> int:
        calls.append(1)
        gate.wait(5)
        return 42

    results: list[tuple[int, bool]] = []
    threads = [
        threading.Thread(target=lambda: results.append(flight.do("k", work, Deadline.after(5)))) for _ in range(20)
    ]
    for t in threads:
        t.start()
    while flight.in_flight() == 0:
        time.sleep(0.001)
    time.sleep(0.05)
    gate.set()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(results) == [(42, False)] + [(42, True)] * 19
    assert flight.in_flight() == 0


def test_single_flight_errors_reach_every_waiter_and_waiting_respects_the_deadline() -> None:
    flight: SingleFlight[str, int] = SingleFlight()
    gate = threading.Event()

    def fail() -> int:
        gate.wait(5)
        raise RegistryError("boom", registry="r")

    errors: list[BaseException] = []

    def run(deadline: Deadline) -> None:
        try:
            flight.do("k", fail, deadline)
        except RegistryError as exc:
            errors.append(exc)

    leader = threading.Thread(target=run, args=(Deadline.after(5),))
    leader.start()
    while flight.in_flight() == 0:
        time.sleep(0.001)
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        flight.do("k", fail, Deadline.after(0.1))
    assert time.monotonic() - start < 0.5
    waiter = threading.Thread(target=run, args=(Deadline.after(5),))
    waiter.start()
    time.sleep(0.05)
    gate.set()
    leader.join()
    waiter.join()
    assert [str(e) for e in errors] == ["boom", "boom"]


def test_waiter_with_time_left_retries_after_the_leader_ran_out() -> None:
    flight: SingleFlight[str, str] = SingleFlight()
    gate = threading.Event()
    outcome: list[str] = []

    def slow_fail() -> str:
        gate.wait(5)
        raise DeadlineExceeded("leader out of time")

    def leader() -> None:
        try:
            flight.do("k", slow_fail, Deadline.after(5))
        except DeadlineExceeded:
            outcome.append("leader timed out")

    t = threading.Thread(target=leader)
    t.start()
    while flight.in_flight() == 0:
        time.sleep(0.001)
    threading.Timer(0.05, gate.set).start()
    value, shared = flight.do("k", lambda: "fresh", Deadline.after(5))
    t.join()
    assert value == "fresh" and shared
    assert outcome == ["leader timed out"]


def test_a_waiter_without_a_deadline_gets_the_shared_value() -> None:
    # Deadline.never() (noe mutate without --timeout) must wait, not crash on an infinite timeout.
    flight: SingleFlight[str, int] = SingleFlight()
    gate = threading.Event()
    results: list[tuple[int, bool]] = []

    def work() -> int:
        gate.wait(5)
        return 7

    leader = threading.Thread(target=lambda: results.append(flight.do("k", work, Deadline.after(5))))
    leader.start()
    while flight.in_flight() == 0:
        time.sleep(0.001)
    threading.Timer(0.05, gate.set).start()
    assert flight.do("k", lambda: 0, Deadline.never()) == (7, True)
    leader.join()
    assert results == [(7, False)]
