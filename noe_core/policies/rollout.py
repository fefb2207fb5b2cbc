"""Rollout at admission: a stable share of a workload's pods moved to one architecture (``docs/policies.md``).

A pod is in the cohort when ``int(sha256(request.uid).hexdigest()[:8], 16) % 100 < percent``
(:func:`bucket`): the draw needs no state, every replica of the webhook draws the
same way, and a test can compute it. It applies only to a Pod at CREATE whose
``common`` (after every other rule) holds the rollout's architecture **and**
another one (:meth:`RolloutDraw.arm`); the cohort is required onto the
architecture, the control group off it, and the pod says which with the label
:data:`ROLLOUT_LABEL` (the architecture, or ``control``), which
``noe controller`` reads to compare the two groups. A workload the controller
rolled back draws as ``percent: 0``.

The workload at admission is the pod's top owner as ``noe report`` derives it
(:mod:`noe_core.k8s.owners`), from the owner reference and ``pod-template-hash``
alone: a ReplicaSet's pods have no name yet at CREATE. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from noe_core.k8s.object_meta import ObjectMeta
from noe_core.k8s.object_meta import label_operations as set_label
from noe_core.k8s.owners import Owners
from noe_core.k8s.workload import POD, Workload
from noe_core.policies.objects import GROUP, PolicyRef, Rollout
from noe_core.util.json_patch import Operation

ROLLOUT_LABEL = f"{GROUP}/rollout"
CONTROL = "control"
_NO_OWNERS = Owners()


def bucket(uid: str) -> int:
    """The admission's bucket, 0..99: ``int(sha256(uid).hexdigest()[:8], 16) % 100`` (the contract's hash)."""
    return int(hashlib.sha256(uid.encode("utf-8")).hexdigest()[:8], 16) % 100


def in_cohort(uid: str, percent: int) -> bool:
    """Whether the admission ``uid`` falls in a ``percent`` cohort."""
    return bucket(uid) < percent


def workload_of(meta: ObjectMeta, owners: Owners = _NO_OWNERS) -> str:
    """``Deployment/web``: the pod's top owner, as ``noe report`` derives it (``owners``: the ReplicaSets and
    Jobs known; none at admission, where the controllers' naming rules stand in).

    A pod being created has a ``generateName`` and no name yet; a bare one is ``Pod/<generateName>``.
    """
    named = meta if meta.name else replace(meta, name=meta.generate_name or "-")
    top = owners.top_owner(named)
    return f"{top.kind}/{top.name}"


@dataclass(frozen=True)
class RolloutArm:
    """Which group an admission fell in, and the architectures that group may use."""

    architecture: str
    cohort: bool
    allowed: frozenset[str]
    bucket: int
    percent: int

    @property
    def label(self) -> str:
        """The :data:`ROLLOUT_LABEL` value: the architecture for the cohort, ``control`` otherwise."""
        return self.architecture if self.cohort else CONTROL


@dataclass(frozen=True)
class RolloutDraw:
    """The rollout one admission is subject to: the merged ``rollout``, where it came from, the request uid
    and the pod's workload."""

    rollout: Rollout
    source: PolicyRef | None
    uid: str
    namespace: str
    workload: str
    group: str | None = None
    """The group a live pod was placed in (its :data:`ROLLOUT_LABEL`), taken instead of a new draw."""

    @property
    def rolled_back(self) -> bool:
        return (self.namespace, self.workload) in self.rollout.rolled_back

    @property
    def percent(self) -> int:
        """The effective percent: 0 for a rolled-back workload."""
        return 0 if self.rolled_back else self.rollout.percent

    def arm(self, common: frozenset[str]) -> RolloutArm | None:
        """The group for a pod whose images share ``common``; ``None`` when the rollout does not affect it."""
        arch = self.rollout.architecture
        if arch not in common or len(common) < 2:
            return None
        drawn = bucket(self.uid)
        cohort = drawn < self.percent if self.group is None else self.group == arch
        allowed = frozenset({arch}) if cohort else common - {arch}
        return RolloutArm(arch, cohort, allowed, drawn, self.percent)

    def reason(self, arm: RolloutArm) -> str:
        """The decision's reason line: which group, why, and which policy."""
        where = f" of {self.source}" if self.source is not None else ""
        back = f" ({self.workload} rolled back: percent 0)" if self.rolled_back else ""
        group = f"cohort ({arm.architecture})" if arm.cohort else "control"
        sign = "<" if arm.cohort else ">="
        drawn = f"bucket {arm.bucket} {sign} {arm.percent}{back}" if self.group is None else "the pod's label"
        return f"rollout{where}: {drawn}: {group}, required in {', '.join(sorted(arm.allowed))}"


def label_operations(meta: ObjectMeta, value: str, earlier: Sequence[Operation]) -> tuple[Operation, ...]:
    """The operations that set :data:`ROLLOUT_LABEL` to ``value`` on a Pod, after the ``earlier`` ones."""
    return set_label(meta, ROLLOUT_LABEL, value, earlier)


def draw_for(
    rollout: Rollout | None,
    source: PolicyRef | None,
    *,
    uid: str,
    namespace: str,
    workload: Workload,
    operation: str,
    group: str | None = None,
) -> RolloutDraw | None:
    """The rollout a Pod CREATE is subject to (``None`` for anything else, or when no policy sets one);
    ``group``: the group a live pod was placed in, taken as drawn."""
    if rollout is None or workload.kind != POD or operation != "CREATE" or workload.node_name:
        return None
    return RolloutDraw(rollout, source, uid, namespace, workload_of(workload.meta), group)
