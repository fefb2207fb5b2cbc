"""A live pod as noe admitted it, and the platforms noe required of it.

A pod noe placed carries noe's terms (``kubernetes.io/arch In [arm64]`` …) in its
spec, so deciding it again says "architecture left as chosen". To know what noe
required — for ``noe why`` and the controller's ``NoMatchingNode`` — the pod's
platform requirements are taken out (:func:`as_admitted`), the one pipeline
decides that pod, and the Decision's allowed set is narrowed by the platform
requirements the pod carries (:func:`noe_terms`: a rollout group, a fallback
architecture). When the pod's requirements are not the ones the Decision
writes, the terms are not noe's: the user chose them (rule 2). Pure: no I/O.
"""

from __future__ import annotations

from noe_core.image.offer import Offer
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.placement.node_fit import narrowed
from noe_core.placement.pipeline import FALLBACK_LABEL
from noe_core.placement.rules import Decision
from noe_core.placement.scheduling import split_platform_terms
from noe_core.policies.rollout import ROLLOUT_LABEL

NOE_MARKS = (ROLLOUT_LABEL, FALLBACK_LABEL)
"""Labels noe puts on pods it placed (a rollout group, a fallback architecture)."""


def as_admitted(workload: Workload) -> Workload | None:
    """The pod without its platform requirements and unbound (the scheduler's binding came after noe);
    ``None``: it has none, or it is not a Pod."""
    if workload.kind != POD:
        return None
    rest, platform = split_platform_terms(workload.spec)
    if not platform:
        return None
    rest.pop("nodeName", None)
    return read_workload({**workload.obj, "spec": rest}, POD)


def noe_terms(decision: Decision, workload: Workload) -> Offer | None:
    """The nodes noe required of ``workload``: the allowed set of ``decision`` (made for :func:`as_admitted`)
    that the pod's own platform requirements accept; ``None`` when noe required nothing, or when the pod's
    requirements are not the ones the Decision writes (the user's choice, rule 2).

    A pod noe marked as its own (a rollout group, a fallback architecture) keeps its terms even when the
    Decision now writes others: its images may have gained the platforms they lacked at admission.
    """
    if decision.nodes is None:
        return None
    _, platform = split_platform_terms(workload.spec)
    if not platform:
        return None
    found = narrowed(decision.nodes, platform)
    if not any(not pair.empty for pair in found.values()):
        return None
    _, written = split_platform_terms(decision.obj.get("spec") or {})
    if written != platform and not any(label in workload.labels for label in NOE_MARKS):
        return None
    return found


__all__ = ["as_admitted", "noe_terms"]
