"""When a rollout is rolled back (docs/policies.md "Rollout"): failing pods, cohort against control."""

from __future__ import annotations

import pytest

from noe_core.policies.rollback import PodHealth, Tally, is_failing, rollback_verdict


def pods(cohort: int, cohort_failing: int, control: int, control_failing: int) -> list[PodHealth]:
    return [
        *(PodHealth("cohort", i < cohort_failing) for i in range(cohort)),
        *(PodHealth("control", i < control_failing) for i in range(control)),
    ]


@pytest.mark.parametrize(
    ("restarts", "crash_looping", "ready", "running_for", "failing"),
    [
        ([0, 2], False, True, 10.0, False),
        ([0, 3], False, True, 10.0, True),  # restartCount >= 3 in any container
        ([0], True, False, 1.0, True),  # CrashLoopBackOff
        ([0], False, False, 299.0, False),  # not Ready, but not yet 5 minutes after start
        ([0], False, False, 300.0, True),
        ([0], False, False, None, False),  # not started
    ],
)
def test_failing_pod(
    restarts: list[int], crash_looping: bool, ready: bool, running_for: float | None, failing: bool
) -> None:
    assert (
        is_failing(restart_counts=restarts, crash_looping=crash_looping, ready=ready, running_for=running_for)
        is failing
    )


@pytest.mark.parametrize(
    ("counts", "rolled_back"),
    [
        ((1, 1, 10, 0), False),  # one cohort pod observed: not enough
        ((2, 2, 10, 0), True),  # 100% against 0%
        ((4, 2, 4, 1), False),  # 50% against 25%: exactly 0.25 worse is not more
        ((4, 3, 4, 1), True),  # 75% against 25%
        ((10, 3, 10, 1), False),  # 30% against 10%
        ((10, 4, 10, 1), True),  # 40% against 10%
        ((2, 2, 2, 2), False),  # control fails as much: not the architecture
        ((3, 3, 0, 0), True),  # no control pod (percent 100): compared with 0
    ],
)
def test_share_rule(counts: tuple[int, int, int, int], rolled_back: bool) -> None:
    verdict = rollback_verdict(Tally.of(pods(*counts)), "arm64")
    assert (verdict is not None) is rolled_back
    if verdict is not None:
        assert (
            verdict.reason == "CohortFailing" and f"{counts[1]} of {counts[0]} cohort pods on arm64" in verdict.message
        )


def test_an_exec_format_error_rolls_back_at_once() -> None:
    tally = Tally.of([PodHealth("cohort", True, exec_format_error=True), *pods(0, 0, 5, 5)])
    verdict = rollback_verdict(tally, "arm64")
    assert verdict is not None and verdict.reason == "ExecFormatError"
    control_only = Tally.of([PodHealth("control", True, exec_format_error=True)])
    assert control_only.exec_format_errors == 0 and rollback_verdict(control_only, "arm64") is None


def test_tallies_add_up() -> None:
    total = Tally.of(pods(2, 1, 3, 0)) + Tally.of(pods(1, 1, 1, 1))
    assert total == Tally(cohort=3, cohort_failing=2, control=4, control_failing=1)
    assert total.share("cohort") == 2 / 3 and Tally().share("control") == 0.0
