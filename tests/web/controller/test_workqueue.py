"""The controller's work queue, as client-go's: each key once in the queue, never on two workers, delayed retries."""

from __future__ import annotations

import threading
import time
from collections import Counter

from noe_web.controller.workqueue import WorkQueue


def drain(queue: WorkQueue[str], timeout: float = 0.05) -> list[str]:
    """Every key handed out now (each marked done at once)."""
    out = []
    while (key := queue.get(timeout=timeout)) is not None:
        out.append(key)
        queue.done(key)
    return out


def test_a_key_added_many_times_is_handed_out_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a", "c", "b"):
        queue.add(key)
    assert len(queue) == 3 and queue.pending() == 3
    assert drain(queue) == ["a", "b", "c"]  # first-added first
    assert len(queue) == 0 and queue.pending() == 0


def test_a_key_added_while_a_worker_holds_it_waits_for_done_then_comes_back_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("pod")
    assert queue.get(timeout=0.1) == "pod"
    queue.add("pod")
    queue.add("pod")
    assert queue.get(timeout=0.1) is None  # never on two workers at once
    assert queue.pending() > 0  # not drained: held, and wanted again
    queue.done("pod")
    assert queue.get(timeout=0.1) == "pod"  # the change made meanwhile is not lost
    queue.done("pod")
    assert queue.get(timeout=0.1) is None


def test_a_delayed_key_comes_back_after_its_delay_and_not_before() -> None:
    queue: WorkQueue[str] = WorkQueue()
    added = time.monotonic()
    queue.add("retry", delay=0.3)
    assert len(queue) == 1 and queue.pending() == 0  # a retry waiting: the queue has drained
    assert queue.get(timeout=0.1) is None
    assert queue.get(timeout=2.0) == "retry"
    assert time.monotonic() - added >= 0.3
    queue.done("retry")
    assert len(queue) == 0


def test_the_sooner_of_two_delays_wins_and_an_immediate_add_replaces_a_delay() -> None:
    queue: WorkQueue[str] = WorkQueue()
    started = time.monotonic()
    queue.add("k", delay=5.0)
    queue.add("k", delay=0.2)  # sooner: wins
    queue.add("k", delay=3.0)  # later: ignored
    assert queue.get(timeout=2.0) == "k"
    assert 0.2 <= time.monotonic() - started < 2.0
    queue.done("k")
    assert queue.get(timeout=0.3) is None  # the later requests left nothing behind

    queue.add("now", delay=0.3)
    queue.add("now")  # immediate: the delayed one is dropped
    assert queue.get(timeout=0.1) == "now"
    queue.done("now")
    assert queue.get(timeout=0.6) is None  # not handed out a second time when the delay passes
    assert len(queue) == 0


def test_a_ready_key_is_not_delayed_again() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("k")
    queue.add("k", delay=1.0)  # already ready: stays ready
    assert queue.get(timeout=0.1) == "k"
    queue.done("k")
    assert queue.get(timeout=1.5) is None


def test_a_retry_coming_due_while_the_key_is_held_waits_for_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("k")
    assert queue.get(timeout=0.1) == "k"
    queue.add("k", delay=0.1)
    time.sleep(0.2)
    assert queue.get(timeout=0.2) is None  # due, but held
    queue.done("k")
    assert queue.get(timeout=0.1) == "k"


def test_close_wakes_every_waiting_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    results: list[str | None] = []
    workers = [threading.Thread(target=lambda: results.append(queue.get(timeout=30))) for _ in range(4)]
    for worker in workers:
        worker.start()
    time.sleep(0.1)
    started = time.monotonic()
    queue.close()
    for worker in workers:
        worker.join(5)
    assert results == [None] * 4 and time.monotonic() - started < 2
    queue.add("late")
    assert queue.get(timeout=0.1) is None


def test_many_workers_never_hold_one_key_together_and_lose_no_change() -> None:
    queue: WorkQueue[int] = WorkQueue()
    holding: set[int] = set()
    lock = threading.Lock()
    overlaps: list[int] = []
    handled: Counter[int] = Counter()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            key = queue.get(timeout=0.05)
            if key is None:
                continue
            with lock:
                if key in holding:
                    overlaps.append(key)
                holding.add(key)
            time.sleep(0.001)
            with lock:
                holding.discard(key)
                handled[key] += 1
            queue.done(key)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for round_ in range(200):
        for key in range(10):
            queue.add(key, delay=0.01 if round_ % 3 == 0 else 0.0)
    end = time.monotonic() + 10
    while (queue.pending() or len(queue)) and time.monotonic() < end:
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(5)
    assert overlaps == []
    assert set(handled) == set(range(10))  # every key handled after its last add
    assert sum(handled.values()) < 2000  # adds while queued were merged


def test_take_hands_out_a_share_of_the_backlog_in_order_and_never_a_held_key() -> None:
    queue: WorkQueue[int] = WorkQueue()
    for key in range(100):
        queue.add(key)
    first = queue.take(share=4, limit=64, timeout=0.1)
    assert first == list(range(25))  # a quarter of 100: the other workers keep the rest
    second = queue.take(share=4, limit=64, timeout=0.1)
    assert second == list(range(25, 43))  # a quarter of the 75 left
    assert queue.take(share=1, limit=10, timeout=0.1) == list(range(43, 53))  # at most the limit
    queue.add(3)  # changed while a worker holds it: handed out again once that worker is done
    rest = queue.take(share=1, limit=1000, timeout=0.1)
    assert rest == list(range(53, 100))
    assert queue.take(share=1, limit=1000, timeout=0.1) == []
    queue.done(*first)
    assert queue.take(share=4, limit=64, timeout=0.1) == [3]  # a backlog of one is still handed out
    queue.done(3, *second, *range(43, 53), *rest)
    assert queue.pending() == 0


def test_drained_keys_leave_nothing_behind_and_come_out_first_added_first() -> None:
    queue: WorkQueue[int] = WorkQueue()
    out: list[int] = []
    for round_ in range(3):
        for key in range(round_ * 5000, round_ * 5000 + 5000):
            queue.add(key)
        while keys := queue.take(share=1, limit=64, timeout=0.01):
            out.extend(keys)
            queue.done(*keys)
    assert out == list(range(15000))
    assert len(queue) == 0 and queue.pending() == 0


def test_four_workers_taking_turns_each_key_examined_once_and_a_change_meanwhile_once_more() -> None:
    queue: WorkQueue[int] = WorkQueue()
    for key in range(2000):
        queue.add(key)
    seen: Counter[int] = Counter()
    lock = threading.Lock()
    readded = threading.Event()

    def work() -> None:
        while keys := queue.take(share=4, limit=64, timeout=0.2):
            with lock:
                seen.update(keys)
                if 1000 in keys and not readded.is_set():
                    readded.set()
                    queue.add(1000)  # a change while it is held
            queue.done(*keys)

    workers = [threading.Thread(target=work) for _ in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(10)
    assert readded.is_set()
    assert seen[1000] == 2
    assert all(seen[key] == 1 for key in range(2000) if key != 1000)
    assert queue.pending() == 0
