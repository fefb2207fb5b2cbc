"""A point in time by which a lookup must be finished.

Every registry lookup is given a :class:`Deadline` by its caller (the webhook
has a few seconds per admission). Connect and read timeouts of each HTTP
request are derived from what remains, retries and ``Retry-After`` waits are
only taken when they fit, and waiting for another thread's in-flight lookup is
bounded by it too. A deadline is a value: it is safe to share between threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from noe_core.errors import DeadlineExceeded

Clock = Callable[[], float]

# Never hand requests a zero or negative timeout: it would mean "no timeout"
# for some adapters. A tiny positive one fails fast instead.
_MIN_TIMEOUT = 0.001


@dataclass(frozen=True)
class Deadline:
    """An absolute point on a monotonic clock.

    ``Deadline.after(2.5)`` expires 2.5 s from now; ``Deadline.never()`` does
    not expire (tests, ``noe inspect`` without ``--timeout``).
    """

    at: float
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)
    budget: float = field(default=float("inf"), compare=False)
    """The seconds it was given (for messages such as "timed out after 5s")."""

    @classmethod
    def after(cls, seconds: float, *, clock: Clock = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock, seconds)

    @classmethod
    def never(cls) -> Deadline:
        return cls(float("inf"))

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - self.clock())

    def wait_timeout(self) -> float | None:
        """Seconds left for a blocking wait (``Event.wait``, ``Future.result``); ``None`` for never.

        ``threading`` refuses an infinite timeout with ``OverflowError``.
        """
        return None if self.at == float("inf") else self.remaining()

    @property
    def expired(self) -> bool:
        return self.clock() >= self.at

    def allows(self, seconds: float) -> bool:
        """True when ``seconds`` from now is still before the deadline."""
        return self.clock() + seconds < self.at

    def timeout(self, cap: float | None = None) -> float:
        """A per-request timeout: what remains, at most ``cap``.

        Raises :class:`DeadlineExceeded` when nothing remains, so that no
        request is started that could not finish in time.
        """
        left = self.at - self.clock()
        if left <= 0:
            raise DeadlineExceeded("the lookup ran out of time before the request could start")
        if cap is not None:
            left = min(left, cap)
        return max(left, _MIN_TIMEOUT)

    def check(self, registry: str = "", what: str = "the lookup") -> None:
        """Raise :class:`DeadlineExceeded` when the deadline has passed."""
        if self.expired:
            where = f" on {registry}" if registry else ""
            raise DeadlineExceeded(f"{what}{where} did not finish before its deadline", registry=registry)
