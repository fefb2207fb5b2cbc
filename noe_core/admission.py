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
from dataclasses import dataclass, replace
from typing import Any, Literal

from noe_core.errors import InvalidObject
from noe_core.gate import OnLookupFailure, gated, should_gate
from noe_core.lookup import Inspect, Lookup, LookupRequest
from noe_core.policy import Decision, acts_on, lookup_images, place, skipped
from noe_core.settings import PolicySettings
from noe_core.workload import Workload, check_depth, read_workload

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of an AdmissionReview request noe uses.

    ``kind`` is the object's kind (``Pod``); ``name`` falls back to
    ``generateName`` (pods of a ReplicaSet have no name yet); ``namespace``
    falls back from the request to the object's metadata.
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
    metadata = _field(obj, "metadata", "request.object", dict, required=False) or {}
    namespace = _field(request, "namespace", "request", str, required=False) or ""
    if not namespace:
        namespace = _field(metadata, "namespace", "request.object.metadata", str, required=False) or ""
    name = _field(request, "name", "request", str, required=False) or ""
    if not name:
        name = _field(metadata, "name", "request.object.metadata", str, required=False) or ""
    if not name:
        name = _field(metadata, "generateName", "request.object.metadata", str, required=False) or ""
    user_info = _field(request, "userInfo", "request", dict, required=False) or {}
    user = _field(user_info, "username", "request.userInfo", str, required=False)
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
    )


Label = Literal["mutated", "allowed", "denied", "skipped", "gated"]


@dataclass(frozen=True)
class Admission:
    """Everything a caller needs of one admission: the decision, how to count it, the answer to send.

    ``workload`` is ``None`` for requests noe does not act on; ``lookups`` holds
    the answers for the images that were inspected (empty when none were needed).
    """

    request: AdmissionRequest
    workload: Workload | None
    images: tuple[str, ...]
    lookups: Mapping[str, Lookup]
    decision: Decision
    label: Label
    response: dict[str, Any]


def admit(
    request: AdmissionRequest,
    settings: PolicySettings,
    inspect: Inspect,
    *,
    on_lookup_failure: OnLookupFailure = "allow",
) -> Admission:
    """Decide one admission: read the object once, inspect the images the policy needs, place, answer.

    ``inspect`` is called at most once, and only when there are images to look
    up; warnings it returns (a pull secret that could not be read) are added to
    the decision's. Raises :class:`InvalidObject` for an object noe acts on but
    cannot read. With ``on_lookup_failure="gate"`` a pod whose lookups failed
    temporarily gets the scheduling gate instead of a placement (:mod:`noe_core.gate`).
    """
    if not acts_on(request.kind, request.operation, request.sub_resource):
        check_depth(request.obj)
        decision = skipped(request.obj, request.kind, request.operation, request.sub_resource)
        return Admission(request, None, (), {}, decision, "skipped", review_response(request, decision))
    workload = read_workload(request.obj, request.kind)
    images = lookup_images(workload)
    lookups: Mapping[str, Lookup] = {}
    extra: tuple[str, ...] = ()
    if images:
        found = inspect(LookupRequest(images, request.namespace, workload.pull_secrets))
        lookups, extra = found.lookups, found.warnings
    decision = place(workload, namespace=request.namespace, lookups=lookups, settings=settings)
    if extra:
        decision = replace(decision, warnings=tuple(dict.fromkeys((*decision.warnings, *extra))))
    label: Label = "denied" if not decision.allowed else "mutated" if decision.changed else "allowed"
    if on_lookup_failure == "gate" and should_gate(
        workload, namespace=request.namespace, lookups=lookups, settings=settings, decision=decision
    ):
        decision, label = gated(workload, decision, lookups), "gated"
    return Admission(request, workload, images, lookups, decision, label, review_response(request, decision))


def review_response(request: AdmissionRequest, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview answering ``request``: patch only when changed, 403 status on deny."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": decision.allowed}
    if decision.allowed and decision.patch:
        body = json.dumps(decision.patch, separators=(",", ":")).encode()
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
