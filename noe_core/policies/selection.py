"""Which placement policies select a pod, which do not, and why: what ``noe why`` lists.

A policy applies when its ``namespaceSelector`` (cluster policies) and its
``podSelector`` select the pod (:meth:`PolicySet.matching`); a policy that
applies can still lose every field it sets to a later one (higher priority,
or a namespaced policy after the cluster ones, ``docs/policies.md``) and then
changes nothing. Pure: the merge's own ``sources`` say who won each field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from noe_core.policies.merge import MergedSettings, PolicySet
from noe_core.policies.objects import CLUSTER_KIND, PlacementPolicy

_ATTRIBUTES = {
    "preferredArchitectures": "preferred_architectures",
    "preferenceMode": "preference_mode",
    "schedulableArchitectures": "schedulable_architectures",
    "strict": "strict",
    "onLookupFailure": "on_lookup_failure",
    "fallbackArchitecture": "fallback_architecture",
    "matchNodeLabels": "match_node_labels",
    "architectureTolerations": "architecture_tolerations",
    "imagePlatforms": "image_platforms",
}


@dataclass(frozen=True)
class PolicyVerdict:
    """One policy against one pod: whether it shaped the pod's settings, and the reason."""

    kind: str
    namespace: str
    name: str
    applied: bool
    reason: str

    def as_data(self) -> dict[str, str | bool]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "applied": self.applied,
            "reason": self.reason,
        }


def _fields_set(policy: PlacementPolicy) -> list[str]:
    fields = [name for name, attribute in _ATTRIBUTES.items() if getattr(policy, attribute) not in (None, False)]
    return [*fields, "rollout"] if policy.rollout is not None else fields


def _lost(policy: PlacementPolicy, merged: MergedSettings) -> tuple[list[str], list[str]]:
    """The fields ``policy`` sets that it kept, and those a later policy took over."""
    name = str(policy.ref)
    kept: list[str] = []
    lost: list[str] = []
    for field_name in _fields_set(policy):
        if field_name == "rollout":
            won = merged.rollout_source == policy.ref
        else:
            won = name in merged.sources.get(field_name, ())
        (kept if won else lost).append(field_name)
    return kept, lost


def policy_verdicts(
    policies: PolicySet,
    *,
    namespace: str,
    namespace_labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    merged: MergedSettings,
) -> tuple[PolicyVerdict, ...]:
    """Every policy that could concern a pod of ``namespace`` (the cluster's, and that namespace's), in
    application order, with why it applied or not; ``merged`` is the pod's merge (the Decision's inputs)."""
    out = []
    for policy in (*policies.cluster, *policies.namespaced.get(namespace, ())):
        ref = policy.ref
        if ref.kind == CLUSTER_KIND and not policy.namespace_selector.matches(namespace_labels):
            applied, reason = False, f"namespaceSelector does not select namespace {namespace}"
        elif not policy.pod_selector.matches(pod_labels):
            applied, reason = False, "podSelector does not select the pod's labels"
        else:
            kept, lost = _lost(policy, merged)
            later = "a later policy (higher priority, or a namespaced one)"
            if lost and not kept:
                applied, reason = False, f"priority lost: {', '.join(lost)} taken over by {later}"
            elif lost:
                applied, reason = True, f"selects the pod; priority lost for {', '.join(lost)} to {later}"
            else:
                applied, reason = True, "selects the pod" + (f" ({', '.join(kept)})" if kept else "")
        out.append(PolicyVerdict(ref.kind, ref.namespace, ref.name, applied, reason))
    return tuple(out)


__all__ = ["PolicyVerdict", "policy_verdicts"]
