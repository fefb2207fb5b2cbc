"""The decision trail: the ``arch.noe.adevinta.com/policies`` annotation on every pod a policy touched.

Every admitted Pod that at least one valid placement policy matched carries the
annotation, listing the policies in application order
(``ClusterPlacementPolicy/base,PlacementPolicy/team-a/arm-first``), also when
rule 2 leaves its architecture alone; a pod noe leaves unchanged (rule 1,
``spec.nodeName`` set) gets none, and so does a denied one. The annotation is
added through the same JSON Patch as the placement. A DaemonSet's template is
not annotated: its pods are, when they are created.

The value (:func:`noe_core.policies.merge.trail`, made once per merge) is
bounded (:data:`MAX_VALUE`): a pod matching more policies than fit lists the
first ones and says how many more, so no cluster of policies can push a pod's
annotations past the API server's limit.
"""

from __future__ import annotations

from noe_core.k8s.workload import POD, Workload
from noe_core.policies.merge import MAX_TRAIL as MAX_VALUE
from noe_core.policies.merge import MergedSettings, trail
from noe_core.policies.objects import GROUP
from noe_core.util.json_patch import Edits, Operation, copy_json

POLICIES_ANNOTATION = f"{GROUP}/policies"
FALLBACK_ENTRY = "fallbackArchitecture"
"""The trail's last entry (``fallbackArchitecture=arm64``) on a pod rule 13a required onto its fallback."""

__all__ = ["MAX_VALUE", "POLICIES_ANNOTATION", "trail", "trail_operations"]


def trail_operations(workload: Workload, merged: MergedSettings, fallback: str = "") -> tuple[Operation, ...]:
    """The operations that set the annotation on a Pod the ``merged`` policies matched (none when it holds it).

    A pod required onto its fallback architecture (rule 13a) lists ``fallbackArchitecture=ARCH`` last, so the
    trail says why it runs there, whether a policy or the flag set it.
    """
    if workload.kind != POD or workload.node_name:
        return ()
    entries = [merged.trail] if merged.applied else []
    if fallback:
        entries.append(f"{FALLBACK_ENTRY}={fallback}")
    if not entries:
        return ()
    value = ",".join(entries)
    meta = workload.pod_meta
    if meta.annotations.get(POLICIES_ANNOTATION) == value:
        return ()
    # a copy of the annotations alone: the edit must not reach the object as sent
    doc = {"annotations": copy_json(meta.raw["annotations"])} if "annotations" in meta.raw else {}
    edits = Edits(doc, workload.template_pointer + "/metadata", present=meta.state)
    edits.set(("annotations", POLICIES_ANNOTATION), value)
    return tuple(edits.operations())
