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

A pod without a controller (or owned by a Node: a static pod's mirror) is its
own workload, of kind ``Pod``. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject

POD_TEMPLATE_HASH = "pod-template-hash"
INTERMEDIATE_KINDS = ("ReplicaSet", "Job")
"""Kinds whose owner is looked up to find the top owner."""
_CRONJOB_JOB = re.compile(r"^(?P<cronjob>.+)-(?P<minutes>[0-9]{8,10})$")
_MAX_DEPTH = 8


@dataclass(frozen=True, order=True)
class Workload:
    """The top owner of a set of pods: namespace, kind and name."""

    namespace: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True)
class OwnerRef:
    kind: str
    name: str


def _metadata(obj: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidObject(f"{what} has no metadata object")
    return meta


def controller_of(metadata: Mapping[str, Any], what: str = "object") -> OwnerRef | None:
    """The controller among ``metadata.ownerReferences`` (else the first reference), or ``None``."""
    refs = metadata.get("ownerReferences")
    if refs is None:
        return None
    if not isinstance(refs, list):
        raise InvalidObject(f"{what}: metadata.ownerReferences must be a list")
    chosen: Mapping[str, Any] | None = None
    for index, ref in enumerate(refs):
        if not isinstance(ref, Mapping) or not isinstance(ref.get("kind"), str) or not isinstance(ref.get("name"), str):
            raise InvalidObject(f"{what}: metadata.ownerReferences[{index}] needs a kind and a name")
        if ref.get("controller") is True:
            chosen = ref
            break
        if chosen is None:
            chosen = ref
    if chosen is None or not chosen["kind"] or not chosen["name"]:
        return None
    return OwnerRef(chosen["kind"], chosen["name"])


@dataclass(frozen=True)
class Owners:
    """The controller reference of each known ReplicaSet and Job (``None`` when it has none)."""

    parents: Mapping[tuple[str, str, str], OwnerRef | None] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> Owners:
        """Index ReplicaSets and Jobs (other kinds are skipped) by namespace, kind and name."""
        parents: dict[tuple[str, str, str], OwnerRef | None] = {}
        for obj in objects:
            kind = obj.get("kind")
            if kind not in INTERMEDIATE_KINDS:
                continue
            meta = _metadata(obj, str(kind))
            name = meta.get("name")
            if not isinstance(name, str) or not name:
                raise InvalidObject(f"a {kind} has no metadata.name")
            namespace = meta.get("namespace") or "default"
            parents[(str(namespace), str(kind), name)] = controller_of(meta, f"{kind} {namespace}/{name}")
        return cls(parents)

    def top_owner(self, pod: Mapping[str, Any]) -> Workload:
        """The workload ``pod`` belongs to (see the module docstring for the rules)."""
        meta = _metadata(pod, "a Pod")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidObject("a Pod has no metadata.name")
        namespace = str(meta.get("namespace") or "default")
        ref = controller_of(meta, f"Pod {namespace}/{name}")
        if ref is None or ref.kind == "Node":
            return Workload(namespace, "Pod", name)
        labels = meta.get("labels")
        template_hash = labels.get(POD_TEMPLATE_HASH) if isinstance(labels, Mapping) else None
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
        return Workload(namespace, ref.kind, ref.name)


def _by_naming_rule(ref: OwnerRef, template_hash: object) -> OwnerRef:
    """The owner of an unknown ReplicaSet or Job, from the name its controller gave it."""
    if ref.kind == "ReplicaSet" and isinstance(template_hash, str) and template_hash:
        suffix = f"-{template_hash}"
        if ref.name.endswith(suffix) and len(ref.name) > len(suffix):
            return OwnerRef("Deployment", ref.name[: -len(suffix)])
    if ref.kind == "Job":
        match = _CRONJOB_JOB.match(ref.name)
        if match:
            return OwnerRef("CronJob", match["cronjob"])
    return ref
