"""The migration plan toward one target architecture, as data: savings, rebuild steps, newer-tag hints.

What :mod:`noe_core.report.planner` computes and the report prints: :class:`Savings`
(each workload's monthly saving on the target, today's per namespace and in
total), :class:`Plan` (today's runnable CPU and saving, then every blocking
image in rebuild order, each :class:`PlanStep` with what it unlocks and where
the cluster stands after it) and :class:`Upgrade` (a newer tag of an image
that already offers the target). Images are named by :func:`canonical_image`:
``nginx:1.27`` is ``docker.io/library/nginx:1.27``, and ``name:tag@digest`` is
``name@digest``, since the digest is what runs. Amounts are exact fractions;
JSON rounds them to cents. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from noe_core.errors import InvalidReference
from noe_core.k8s.owners import TopOwner
from noe_core.k8s.resources import cores
from noe_core.name.reference import parse_reference
from noe_core.report.pricing import money


def canonical_image(image: str) -> str:
    """One spelling per image: the expanded reference, the digest alone when there is one."""
    try:
        ref = parse_reference(image)
    except InvalidReference:
        return image
    return f"{ref.context}@{ref.digest}" if ref.digest is not None else str(ref)


@dataclass(frozen=True)
class Upgrade:
    """A newer tag of a blocking image that offers the target: upgrading beats rebuilding."""

    tag: str
    image: str

    def to_json(self) -> dict[str, str]:
        return {"tag": self.tag, "image": self.image}


@dataclass(frozen=True)
class Savings:
    """What running on the target saves a month: each workload's saving, and today's per namespace and in total."""

    target: str
    monthly: Fraction
    by_namespace: Mapping[str, Fraction]
    by_workload: Mapping[TopOwner, Fraction]
    """Every workload's saving were it on the target (zero where there is nothing to save), runnable there or not."""

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "monthly": money(self.monthly),
            "by_namespace": {name: money(amount) for name, amount in self.by_namespace.items()},
        }


@dataclass(frozen=True)
class PlanStep:
    """Rebuild (or upgrade) one image; what that unlocks, and where the cluster stands after it."""

    image: str
    unlocked: tuple[TopOwner, ...]
    unlocked_cpu_millis: int
    runnable_cpu_millis: int
    monthly_saving: Fraction | None
    upgrade: Upgrade | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "unlocked_workloads": len(self.unlocked),
            "unlocked_cpu_cores": cores(self.unlocked_cpu_millis),
            "runnable_cpu_cores": cores(self.runnable_cpu_millis),
            "monthly_saving": None if self.monthly_saving is None else money(self.monthly_saving),
            "upgrade": None if self.upgrade is None else self.upgrade.to_json(),
        }


@dataclass(frozen=True)
class Plan:
    """Today's runnable CPU and saving on the target, then every blocking image in rebuild order."""

    target: str
    runnable_cpu_millis: int
    monthly_saving: Fraction | None
    steps: tuple[PlanStep, ...]

    def with_upgrades(self, upgrades: Mapping[str, Upgrade]) -> Plan:
        """The same plan with each step's newer-tag hint (by canonical image) attached."""
        steps = tuple(replace(step, upgrade=upgrades.get(step.image)) for step in self.steps)
        return replace(self, steps=steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "runnable_cpu_cores": cores(self.runnable_cpu_millis),
            "monthly_saving": None if self.monthly_saving is None else money(self.monthly_saving),
            "steps": [step.to_json() for step in self.steps],
        }
