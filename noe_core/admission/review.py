"""AdmissionReview in, one decision, AdmissionReview out (``admission.k8s.io/v1`` and ``v1beta1``).

:func:`admit` is the one admission path: the webhook, ``noe mutate`` and users'
own tests call it with their own ``inspect`` (registry, platforms file, fixed
answers), so they give the same answer by construction. Parsing is strict and
precise because whatever the API server (or a user with ``noe mutate``) sends
that cannot be read must become a 400 naming the field, never a 500. The
response is built in the request's own apiVersion, since the API server
rejects an answer in another version.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import Inspect, Lookup, LookupRequest
from noe_core.k8s.object_meta import ObjectMeta, read_object_meta
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.placement.ephemeral import NodeLookup, acts_on_debug, check_debug, new_debug_images
from noe_core.placement.gate import gated, held_back
from noe_core.placement.rules import Decision, acts_on, lookup_images, place, skipped
from noe_core.placement.session import PlacementSession
from noe_core.policies.merge import MergedSettings, PolicySource
from noe_core.policies.rollout import draw_for, label_operations
from noe_core.policies.settings import OnLookupFailure, PolicySettings
from noe_core.policies.trail import trail_operations

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
# json.dumps with separators builds a new encoder per call; the patch is a fresh tree (no cycle to look for)
_PATCH_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)

_UNREAD = ObjectMeta()


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of an AdmissionReview request noe uses.

    ``kind`` is the object's kind (``Pod``); ``name`` falls back to
    ``generateName`` (pods of a ReplicaSet have no name yet); ``namespace``
    falls back from the request to the object's metadata. ``meta`` is the
    object's metadata, read once: :func:`parse_admission_review` reads it, and a
    request built directly reads it when it is made.
    """

    api_version: str
    uid: str
    kind: str
    operation: str
    namespace: str
    name: str
    obj: dict[str, Any]
    dry_run: bool = False
    user: str | None = None
    sub_resource: str = ""
    meta: ObjectMeta = field(default=_UNREAD, compare=False, repr=False)
    old_obj: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """``request.oldObject`` (the object before an UPDATE): rule 18 tells the new ephemeral containers by it."""

    def __post_init__(self) -> None:
        if self.meta is _UNREAD:
            object.__setattr__(self, "meta", read_object_meta(self.obj))


_JSON_NAMES: dict[type, str] = {dict: "an object", str: "a string", bool: "a boolean", int: "an integer"}


def _json_name(value: object) -> str:
    """The JSON name of a decoded value's type, for messages users read."""
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return names.get(type(value), type(value).__name__)


def _field(container: Mapping[str, Any], key: str, path: str, kind: type, *, required: bool) -> Any:
    value = container.get(key)
    if type(value) is kind:
        return value
    if value is None:
        if required:
            raise InvalidObject(f"{path}.{key} is missing")
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidObject(f"{path}.{key} must be {_JSON_NAMES[kind]}, not {_json_name(value)}")
    return value


def parse_admission_review(doc: object) -> AdmissionRequest:
    """Read an AdmissionReview document (already JSON-decoded); raise :class:`InvalidObject` if malformed."""
    if not isinstance(doc, dict):
        raise InvalidObject(f"an AdmissionReview must be a JSON object, not {_json_name(doc)}")
    api_version = doc.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise InvalidObject(f"apiVersion {api_version!r} is not one of {', '.join(API_VERSIONS)}")
    if doc.get("kind") != "AdmissionReview":
        raise InvalidObject(f"kind {doc.get('kind')!r} is not AdmissionReview")
    request = _field(doc, "request", "AdmissionReview", dict, required=True)
    uid = _field(request, "uid", "request", str, required=True)
    if not uid:
        raise InvalidObject("request.uid is empty")
    gvk = _field(request, "kind", "request", dict, required=True)
    kind = _field(gvk, "kind", "request.kind", str, required=True)
    operation = _field(request, "operation", "request", str, required=True)
    if operation not in OPERATIONS:
        raise InvalidObject(f"request.operation {operation!r} is not one of {', '.join(OPERATIONS)}")
    sub_resource = _field(request, "subResource", "request", str, required=False) or ""
    dry_run = _field(request, "dryRun", "request", bool, required=False) or False
    obj = request.get("object")
    if obj is None and operation in ("DELETE", "CONNECT"):
        obj = {}
    if not isinstance(obj, dict):
        what = "missing" if obj is None else f"{_json_name(obj)}, not an object"
        raise InvalidObject(f"request.object is {what}")
    meta = read_object_meta(obj, "request.object")
    namespace = _field(request, "namespace", "request", str, required=False) or meta.namespace
    name = _field(request, "name", "request", str, required=False) or meta.name or meta.generate_name
    user_info = _field(request, "userInfo", "request", dict, required=False) or {}
    user = _field(user_info, "username", "request.userInfo", str, required=False)
    # Only a subresource's UPDATE reads its oldObject (rule 18): a pod's CREATE has none to read.
    old_obj = _field(request, "oldObject", "request", dict, required=False) if sub_resource else None
    return AdmissionRequest(
        api_version=api_version,
        uid=uid,
        kind=kind,
        operation=operation,
        namespace=namespace,
        name=name,
        obj=obj,
        dry_run=dry_run,
        user=user,
        sub_resource=sub_resource,
        meta=meta,
        old_obj=old_obj,
    )


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


def review_response(request: AdmissionRequest, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview answering ``request``: patch only when changed, 403 status on deny."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": decision.allowed}
    if decision.allowed and decision.patch:
        body = _PATCH_ENCODER.encode(decision.patch).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(body).decode("ascii")
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if not decision.allowed:
        response["status"] = {
            "code": 403,
            "message": decision.message or "denied by noe",
            "reason": "Forbidden",
        }
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}
