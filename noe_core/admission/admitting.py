"""One admission: read the object once, inspect the images the policy needs, place, answer: :func:`admit`.

:func:`admit` is the one admission path: the webhook, ``noe mutate`` and users'
own tests call it with their own ``inspect`` (registry, platforms file, fixed
answers), so they give the same answer by construction. The request comes from
:func:`~noe_core.admission.review.parse_admission_review` and the answer is
:func:`~noe_core.admission.review.review_response`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from noe_core.admission.review import AdmissionRequest, review_response
from noe_core.image.image_platforms import Inspect, Lookup, LookupRequest
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.placement.ephemeral import NodeLookup, acts_on_debug, check_debug, new_debug_images
from noe_core.placement.gate import gated, held_back
from noe_core.placement.rules import Decision, acts_on, lookup_images, place, skipped
from noe_core.placement.session import PlacementSession
from noe_core.policies.merge import MergedSettings, PolicySource
from noe_core.policies.rollout import draw_for, label_operations
from noe_core.policies.settings import OnLookupFailure, PolicySettings
from noe_core.policies.trail import trail_operations

Label = Literal["mutated", "allowed", "denied", "skipped", "gated"]


@dataclass(frozen=True)
class Admission:
    """Everything a caller needs of one admission: the decision, how to count it, the answer to send.

    ``workload`` is ``None`` for requests noe does not act on; ``lookups`` holds
    the answers for the images that were inspected (empty when none were needed);
    ``merged`` the settings the pod got and the placement policies that gave them
    (``None`` for requests noe does not act on).
    """

    request: AdmissionRequest
    workload: Workload | None
    images: tuple[str, ...]
    lookups: Mapping[str, Lookup]
    decision: Decision
    label: Label
    response: dict[str, Any]
    merged: MergedSettings | None = None

    @property
    def policies(self) -> tuple[str, ...]:
        """The placement policies applied, in order (``ClusterPlacementPolicy/base``, …)."""
        return self.merged.names if self.merged is not None else ()


def admit(
    request: AdmissionRequest,
    settings: PolicySettings,
    inspect: Inspect,
    *,
    on_lookup_failure: OnLookupFailure | None = None,
    policies: PolicySource | None = None,
    nodes: NodeLookup | None = None,
) -> Admission:
    """Decide one admission: read the object once, inspect the images the policy needs, place, answer.

    ``settings`` are the flags; with ``policies`` the pod gets them merged with
    every placement policy that matches it (``docs/policies.md``): the merged
    settings place it, its policies' ``imagePlatforms`` answer before the
    registry, and the pod is annotated with the policies applied
    (:mod:`noe_core.policies.trail`). ``inspect`` is called at most once, and
    only when there are images to look up; warnings it returns (a pull secret
    that could not be read) are added to the decision's. Raises
    :class:`InvalidObject` for an object noe acts on but cannot read. With
    ``on_lookup_failure="gate"`` (the argument, else the merged settings') a
    pod whose lookups failed temporarily gets the scheduling gate instead of a
    placement (:mod:`noe_core.placement.gate`). ``nodes`` reads a Node for ``kubectl
    debug``'s requests (rule 18, :mod:`noe_core.placement.ephemeral`); without it such a
    request is judged from the pod's own placement alone.
    """
    if request.sub_resource and acts_on_debug(request.kind, request.operation, request.sub_resource):
        return _admit_debug(request, settings, inspect, nodes, policies)
    if not acts_on(request.kind, request.operation, request.sub_resource):
        decision = skipped(request.obj, request.kind, request.operation, request.sub_resource)
        return Admission(request, None, (), {}, decision, "skipped", review_response(request, decision))
    workload = read_workload(request.obj, request.kind, meta=request.meta)
    if on_lookup_failure is not None and on_lookup_failure != settings.on_lookup_failure:
        settings = replace(settings, on_lookup_failure=on_lookup_failure)
    merged = _merged(settings, policies, request.namespace, workload)
    settings = merged.settings
    session = PlacementSession.of(workload)
    images = lookup_images(workload, session)
    lookups: Mapping[str, Lookup] = {}
    extra: tuple[str, ...] = ()
    if images:
        found = inspect(LookupRequest(images, request.namespace, workload.pull_secrets, merged.declared))
        lookups, extra = found.lookups, found.warnings
    draw = draw_for(
        merged.rollout,
        merged.rollout_source,
        uid=request.uid,
        namespace=request.namespace,
        workload=workload,
        operation=request.operation,
    )
    decision = place(
        workload, namespace=request.namespace, lookups=lookups, settings=settings, session=session, rollout=draw
    )
    if extra:
        decision = replace(decision, warnings=tuple(dict.fromkeys((*decision.warnings, *extra))))
    label: Label = "denied" if not decision.allowed else "mutated" if decision.changed else "allowed"
    if settings.on_lookup_failure == "gate":
        waiting = held_back(
            workload, namespace=request.namespace, lookups=lookups, settings=settings, decision=decision
        )
        if waiting:
            decision, label = gated(workload, decision, waiting), "gated"
    decision = with_trail(decision, workload, merged)
    if label != "gated":
        decision = with_label(decision, workload)  # the rollout group, for noe controller to compare
    return Admission(request, workload, images, lookups, decision, label, review_response(request, decision), merged)


def _merged(
    settings: PolicySettings, policies: PolicySource | None, namespace: str, workload: Workload
) -> MergedSettings:
    if policies is None:
        return MergedSettings(settings)
    return policies.settings_for(settings, namespace=namespace, pod_labels=workload.labels)


def with_trail(decision: Decision, workload: Workload, merged: MergedSettings) -> Decision:
    """An allowed decision with the policies' annotation added to its patch (the decision trail)."""
    if not merged.applied or not decision.allowed:
        return decision
    operations = trail_operations(workload, merged)
    if not operations:
        return decision
    reason = f"placement policies applied: {merged.trail}"
    return replace(decision, patch=(*decision.patch, *operations), reasons=(*decision.reasons, reason))


def _admit_debug(
    request: AdmissionRequest,
    settings: PolicySettings,
    inspect: Inspect,
    nodes: NodeLookup | None,
    policies: PolicySource | None,
) -> Admission:
    """Rule 18: the new ephemeral containers' images against the pod's node; allowed or denied, never patched.

    The pod's policies apply as at its creation (a strict namespace's policy denies, their ``imagePlatforms``
    answer first); the pod is not annotated again.
    """
    workload = read_workload(request.obj, POD, meta=request.meta)
    merged = _merged(settings, policies, request.namespace, workload)
    settings = merged.settings
    images = new_debug_images(workload, request.old_obj)
    lookups: Mapping[str, Lookup] = {}
    extra: tuple[str, ...] = ()
    if images:
        found = inspect(LookupRequest(images, request.namespace, workload.pull_secrets, merged.declared))
        lookups, extra = found.lookups, found.warnings
    check = check_debug(workload, images, lookups, namespace=request.namespace, settings=settings, nodes=nodes)
    decision = check.decision
    if extra:
        decision = replace(decision, warnings=tuple(dict.fromkeys((*decision.warnings, *extra))))
    label: Label = "allowed" if decision.allowed else "denied"
    return Admission(request, workload, images, lookups, decision, label, review_response(request, decision))


def with_label(decision: Decision, workload: Workload) -> Decision:
    """An allowed decision placed in a rollout group, with the ``arch.noe.adevinta.com/rollout`` label added
    to its patch (``noe controller`` compares the groups by it)."""
    if decision.rollout is None or not decision.allowed:
        return decision
    operations = label_operations(workload.meta, decision.rollout.label, decision.patch)
    if not operations:
        return decision
    return replace(decision, patch=(*decision.patch, *operations))
