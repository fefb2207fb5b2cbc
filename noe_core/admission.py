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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from noe_core.ephemeral import NodeLookup, acts_on_debug, check_debug, new_debug_images
from noe_core.errors import InvalidObject
from noe_core.gate import OnLookupFailure
from noe_core.learned_platforms import LearnedPlatforms
from noe_core.lookup import Inspect, Lookup, LookupRequest, LookupResult
from noe_core.object_meta import ObjectMeta, read_object_meta
from noe_core.patch import Operation
from noe_core.pipeline import NO_LEARNED, PodInputs, merged_settings, prepare
from noe_core.policies.merge import MergedSettings, PolicySource
from noe_core.policy import Decision, Label, acts_on, skipped
from noe_core.settings import PolicySettings
from noe_core.workload import POD, Workload, read_workload

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
    """Decide one admission through the one placement pipeline (:mod:`noe_core.pipeline`).

    ``settings`` are the flags; with ``policies`` the pod gets them merged with
    every placement policy that matches it (``docs/policies.md``); ``learned``
    takes the architectures ``exec format error`` disproved out of the lookups.
    ``inspect`` is called at most once, and only when there are images to look
    up; warnings it returns (a pull secret that could not be read) are added to
    the decision's. Raises :class:`InvalidObject` for an object noe acts on but
    cannot read. ``on_lookup_failure`` overrides the flags' gate mode.
    ``nodes`` reads a Node for ``kubectl debug``'s requests (rule 18,
    :mod:`noe_core.ephemeral`); without it such a request is judged from the
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


def encode_patch(patch: Sequence[Operation]) -> bytes:
    """The patch as compact JSON (the standard library's; the webhook passes its faster encoder)."""
    return _PATCH_ENCODER.encode(patch).encode()


def review_response(
    request: AdmissionRequest, decision: Decision, *, encode: Callable[[Sequence[Operation]], bytes] = encode_patch
) -> dict[str, Any]:
    """The AdmissionReview answering ``request``: patch only when changed, 403 status on deny.

    ``encode`` writes the patch's JSON (its bytes are base64'd into the answer); the answer itself is the
    caller's to encode.
    """
    response: dict[str, Any] = {"uid": request.uid, "allowed": decision.allowed}
    if decision.allowed and decision.patch:
        body = encode(decision.patch)
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
