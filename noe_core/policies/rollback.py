"""When ``noe controller`` rolls a workload's rollout back: its cohort pods against its control pods.

The contract (``docs/policies.md``, "Rollout"): a workload is rolled back at
once when one of its cohort pods reports ``exec format error``, or when at
least :data:`MIN_COHORT` cohort pods are observed and the share of failing
cohort pods exceeds the control group's share by more than :data:`MARGIN`. A
pod is failing when a container restarted at least :data:`FAILING_RESTARTS`
times, is in ``CrashLoopBackOff``, or the pod is not Ready
:data:`NOT_READY_AFTER` seconds after it started. Only pods bound to a node
(placed) are counted. Pure: the controller feeds it what it watches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

FAILING_RESTARTS = 3
NOT_READY_AFTER = 300.0
MARGIN = 0.25
MIN_COHORT = 2

Group = Literal["cohort", "control"]
REASON_EXEC_FORMAT = "ExecFormatError"
REASON_FAILING = "CohortFailing"


@dataclass(frozen=True)
class PodHealth:
    """One placed pod of a rollout, as last observed."""

    group: Group
    failing: bool
    exec_format_error: bool = False


def is_failing(*, restart_counts: Iterable[int], crash_looping: bool, ready: bool, running_for: float | None) -> bool:
    """The contract's failing pod: restarts ≥ 3, ``CrashLoopBackOff``, or not Ready 5 minutes after start."""
    if crash_looping or any(count >= FAILING_RESTARTS for count in restart_counts):
        return True
    return not ready and running_for is not None and running_for >= NOT_READY_AFTER


@dataclass(frozen=True)
class Tally:
    """A workload's (or a policy's) rollout pods: placed and failing, per group."""

    cohort: int = 0
    cohort_failing: int = 0
    control: int = 0
    control_failing: int = 0
    exec_format_errors: int = 0

    @classmethod
    def of(cls, pods: Iterable[PodHealth]) -> Tally:
        counts = [0, 0, 0, 0, 0]
        for pod in pods:
            base = 0 if pod.group == "cohort" else 2
            counts[base] += 1
            counts[base + 1] += pod.failing
            counts[4] += pod.exec_format_error and pod.group == "cohort"
        return cls(*counts)

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.cohort + other.cohort,
            self.cohort_failing + other.cohort_failing,
            self.control + other.control,
            self.control_failing + other.control_failing,
            self.exec_format_errors + other.exec_format_errors,
        )

    def share(self, group: Group) -> float:
        placed, failing = (
            (self.cohort, self.cohort_failing) if group == "cohort" else (self.control, self.control_failing)
        )
        return failing / placed if placed else 0.0


@dataclass(frozen=True)
class Verdict:
    """Why a workload is rolled back: a CamelCase reason and a sentence an operator reads."""

    reason: str
    message: str


def rollback_verdict(tally: Tally, architecture: str) -> Verdict | None:
    """The contract's rule: ``None`` while the cohort does as well as the control group (within the margin)."""
    if tally.exec_format_errors:
        return Verdict(
            REASON_EXEC_FORMAT,
            f"a cohort pod on {architecture} failed with exec format error: the image does not run there",
        )
    if tally.cohort < MIN_COHORT:
        return None
    cohort, control = tally.share("cohort"), tally.share("control")
    if cohort - control > MARGIN:
        return Verdict(
            REASON_FAILING,
            f"{tally.cohort_failing} of {tally.cohort} cohort pods on {architecture} are failing "
            f"({cohort:.0%}) against {tally.control_failing} of {tally.control} control pods ({control:.0%}): "
            f"more than {MARGIN:.0%} worse",
        )
    return None
