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
from functools import cached_property
from typing import Any

from noe_core.admission.review import AdmissionRequest, review_response
from noe_core.image.image_platforms import Inspect, Lookup, LookupRequest, LookupResult
from noe_core.image.learned import LearnedPlatforms
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.placement.ephemeral import NodeLookup, acts_on_debug, check_debug, new_debug_images
from noe_core.placement.pipeline import NO_LEARNED, PodInputs, merged_settings, prepare
from noe_core.placement.rules import Decision, Label, acts_on, skipped
from noe_core.policies.merge import MergedSettings, PolicySource
from noe_core.policies.settings import OnLookupFailure, PolicySettings


@dataclass(frozen=True)
class Admission:
    """Everything a caller needs of one admission: the decision, how to count it, the answer to send.

    ``workload`` is ``None`` for requests noe does not act on; ``images`` the images the rules read
    (empty when none were needed); ``merged`` the settings the pod got and the placement policies that
    gave them (``None`` for requests noe does not act on). ``response`` is built (and its patch encoded)
    only when asked for: the webhook encodes its own answer, once.
    """

    request: AdmissionRequest
    workload: Workload | None
    images: tuple[str, ...]
    decision: Decision
    merged: MergedSettings | None = None

    @property
    def lookups(self) -> Mapping[str, Lookup]:
        """Each image's answer as the decision read it (learned architectures taken out)."""
        return self.decision.lookups

    @property
    def label(self) -> Label:
        """How the admission is counted (``mutated``, ``allowed``, ``denied``, ``gated``, ``skipped``)."""
        return self.decision.label or "allowed"

    @property
    def policies(self) -> tuple[str, ...]:
        """The placement policies applied, in order (``ClusterPlacementPolicy/base``, …)."""
        return self.decision.policies

    @cached_property
    def response(self) -> dict[str, Any]:
        """The AdmissionReview answering the request (:func:`review_response`)."""
        return review_response(self.request, self.decision)


def admit(
    request: AdmissionRequest,
    settings: PolicySettings,
    inspect: Inspect,
    *,
    on_lookup_failure: OnLookupFailure | None = None,
    policies: PolicySource | None = None,
    nodes: NodeLookup | None = None,
    learned: LearnedPlatforms | None = None,
) -> Admission:
    """Decide one admission through the one placement pipeline (:mod:`noe_core.placement.pipeline`).

    ``settings`` are the flags; with ``policies`` the pod gets them merged with
    every placement policy that matches it (``docs/policies.md``); ``learned``
    takes the architectures ``exec format error`` disproved out of the lookups.
    ``inspect`` is called at most once, and only when there are images to look
    up; warnings it returns (a pull secret that could not be read) are added to
    the decision's. Raises :class:`InvalidObject` for an object noe acts on but
    cannot read. ``on_lookup_failure`` overrides the flags' gate mode.
    ``nodes`` reads a Node for ``kubectl debug``'s requests (rule 18,
    :mod:`noe_core.placement.ephemeral`); without it such a request is judged from the
    pod's own placement alone.
    """
    if request.sub_resource and acts_on_debug(request.kind, request.operation, request.sub_resource):
        return _admit_debug(request, settings, inspect, nodes=nodes, policies=policies, learned=learned)
    if not acts_on(request.kind, request.operation, request.sub_resource):
        decision = skipped(request.obj, request.kind, request.operation, request.sub_resource)
        return Admission(request, None, (), decision)
    workload = read_workload(request.obj, request.kind, meta=request.meta)
    if on_lookup_failure is not None and on_lookup_failure != settings.on_lookup_failure:
        settings = replace(settings, on_lookup_failure=on_lookup_failure)
    inputs = PodInputs(
        workload, request.namespace, settings, policies, learned or NO_LEARNED, request.uid, request.operation
    )
    prepared = prepare(inputs)
    found = inspect(prepared.request) if prepared.images else None
    return Admission(request, workload, prepared.images, prepared.decide(found), prepared.merged)


def _admit_debug(
    request: AdmissionRequest,
    settings: PolicySettings,
    inspect: Inspect,
    *,
    nodes: NodeLookup | None,
    policies: PolicySource | None,
    learned: LearnedPlatforms | None,
) -> Admission:
    """Rule 18: the new ephemeral containers' images against the pod's node; allowed or denied, never patched.

    The pod's policies apply as at its creation (a strict namespace's policy denies, their ``imagePlatforms``
    answer first); the pod is not annotated again.
    """
    workload = read_workload(request.obj, POD, meta=request.meta)
    merged = merged_settings(PodInputs(workload, request.namespace, settings, policies))
    images = new_debug_images(workload, request.old_obj)
    result = LookupResult({})
    if images:
        found = inspect(LookupRequest(images, request.namespace, workload.pull_secrets, merged.declared))
        result = (learned or NO_LEARNED).apply(found)
    check = check_debug(
        workload, images, result.lookups, namespace=request.namespace, settings=merged.settings, nodes=nodes
    )
    decision = check.decision
    if result.warnings:
        decision = replace(decision, warnings=tuple(dict.fromkeys((*decision.warnings, *result.warnings))))
    return Admission(request, workload, images, replace(decision, lookups=result.lookups, sources=result.sources))
