"""Deadline arithmetic on an injected clock."""

from __future__ import annotations

import pytest

from noe_core.errors import DeadlineExceeded
from noe_core.util.deadline import Deadline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_remaining_expired_and_timeout() -> None:
    clock = Clock()
    d = Deadline.after(2.0, clock=clock)
    assert d.remaining() == 2.0 and not d.expired
    assert d.timeout() == 2.0
    assert d.timeout(0.5) == 0.5
    assert d.allows(1.9) and not d.allows(2.0)
    clock.now += 1.5
    assert d.remaining() == pytest.approx(0.5)
    assert d.timeout(10) == pytest.approx(0.5)
    clock.now += 1.0
    assert d.expired and d.remaining() == 0.0
    with pytest.raises(DeadlineExceeded):
        d.timeout()
    with pytest.raises(DeadlineExceeded) as caught:
        d.check("reg.example", "the lookup")
    assert "reg.example" in str(caught.value) and caught.value.temporary


def test_never() -> None:
    never = Deadline.never()
    assert not never.expired and never.timeout(3) == 3


def test_tiny_remaining_gives_a_positive_timeout() -> None:
    clock = Clock()
    d = Deadline(clock.now + 1e-9, clock)
    assert d.timeout() > 0
