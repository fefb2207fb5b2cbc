"""The workload a pod belongs to: its top owner, from owner references.

A Deployment's pod is owned by a ReplicaSet, which the Deployment owns; a
CronJob's pod by a Job, which the CronJob owns. When the intermediate object is
known (listed from the API, or present in the input file), its own controller
reference is followed. When it is not — a file of Pods only, as
``kubectl get pods -A -o json`` prints — the controllers' naming rules stand in:

* ReplicaSet ``web-6d4cf56db6`` whose pod carries ``pod-template-hash: 6d4cf56db6``
  → Deployment ``web`` (the Deployment controller names its ReplicaSets so);
* Job ``backup-28458840`` → CronJob ``backup`` (the CronJob controller names its
  Jobs ``<cronjob>-<scheduled time in minutes since 1970>``).

A pod without an owner (or owned by a Node: a static pod's mirror) is its own
workload, of kind ``Pod``. Owner references are read by the one owner rule
(:func:`noe_core.k8s.object_meta.owner_reference`: the controller, else the first).
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import ObjectMeta, OwnerRef, read_object_meta

POD_TEMPLATE_HASH = "pod-template-hash"
INTERMEDIATE_KINDS = ("ReplicaSet", "Job")
"""Kinds whose owner is looked up to find the top owner."""
_CRONJOB_JOB = re.compile(r"^(?P<cronjob>.+)-(?P<minutes>[0-9]{8,10})$")
_MAX_DEPTH = 8


@dataclass(frozen=True, order=True)
class TopOwner:
    """The top owner of a set of pods (the workload ``noe report`` counts): namespace, kind and name."""

    namespace: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True)
class Owners:
    """The owner reference of each known ReplicaSet and Job (``None`` when it has none)."""

    parents: Mapping[tuple[str, str, str], OwnerRef | None] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> Owners:
        """Index ReplicaSets and Jobs (other kinds are skipped) by namespace, kind and name."""
        parents: dict[tuple[str, str, str], OwnerRef | None] = {}
        for obj in objects:
            kind = obj.get("kind")
            if kind not in INTERMEDIATE_KINDS:
                continue
            try:
                meta = read_object_meta(obj)
            except InvalidObject as exc:
                raise InvalidObject(f"a {kind}: {exc}") from None
            if not meta.name:
                raise InvalidObject(f"a {kind} has no metadata.name")
            parents[(meta.namespace or "default", str(kind), meta.name)] = meta.owner
        return cls(parents)

    def top_owner(self, meta: ObjectMeta) -> TopOwner:
        """The workload of the pod whose metadata is ``meta`` (see the module docstring for the rules)."""
        if not meta.name:
            raise InvalidObject("a Pod has no metadata.name")
        namespace = meta.namespace or "default"
        ref = meta.owner
        if ref is None or ref.kind == "Node":
            return TopOwner(namespace, "Pod", meta.name)
        template_hash = meta.labels.get(POD_TEMPLATE_HASH)
        for _ in range(_MAX_DEPTH):
            key = (namespace, ref.kind, ref.name)
            if key in self.parents:
                parent = self.parents[key]
                if parent is None:
                    break
                ref = parent
                continue
            ref = _by_naming_rule(ref, template_hash)
            break
        return TopOwner(namespace, ref.kind, ref.name)


def _by_naming_rule(ref: OwnerRef, template_hash: str | None) -> OwnerRef:
    """The owner of an unknown ReplicaSet or Job, from the name its controller gave it."""
    if ref.kind == "ReplicaSet" and template_hash:
        suffix = f"-{template_hash}"
        if ref.name.endswith(suffix) and len(ref.name) > len(suffix):
            return OwnerRef("Deployment", ref.name[: -len(suffix)])
    if ref.kind == "Job":
        match = _CRONJOB_JOB.match(ref.name)
        if match:
            return OwnerRef("CronJob", match["cronjob"])
    return ref
