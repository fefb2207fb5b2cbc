"""AdmissionReview in and out (``admission.k8s.io/v1`` and ``v1beta1``): the request read, the answer built.

Parsing is strict and precise because whatever the API server (or a user with
``noe mutate``) sends that cannot be read must become a 400 naming the field,
never a 500. The response is built in the request's own apiVersion, since the
API server rejects an answer in another version. What happens in between is
:func:`noe_core.admission.admitting.admit`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import ObjectMeta, read_object_meta
from noe_core.placement.rules import Decision
from noe_core.util import fields
from noe_core.util.json_patch import Operation

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


def parse_admission_review(doc: object) -> AdmissionRequest:
    """Read an AdmissionReview document (already JSON-decoded); raise :class:`InvalidObject` if malformed.

    Each field is checked inline for the type it has in every well-formed review, and only a field that is
    not goes through :mod:`noe_core.util.fields`, which says what is wrong with it: one reader, one message
    per mistake, and no call per field on the common path.
    """
    if type(doc) is not dict:
        raise InvalidObject(f"an AdmissionReview must be a JSON object, not {fields.json_type(doc)}")
    api_version = doc.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise InvalidObject(f"apiVersion {api_version!r} is not one of {', '.join(API_VERSIONS)}")
    if doc.get("kind") != "AdmissionReview":
        raise InvalidObject(f"kind {doc.get('kind')!r} is not AdmissionReview")
    request = doc.get("request")
    if type(request) is not dict:
        request = fields.mapping(request, "AdmissionReview.request", required=True)
    uid = request.get("uid")
    if type(uid) is not str:
        uid = fields.string(uid, "request.uid", required=True)
    if not uid:
        raise InvalidObject("request.uid is empty")
    gvk = request.get("kind")
    if type(gvk) is not dict:
        gvk = fields.mapping(gvk, "request.kind", required=True)
    kind = gvk.get("kind")
    if type(kind) is not str:
        kind = fields.string(kind, "request.kind.kind", required=True)
    operation = request.get("operation")
    if type(operation) is not str:
        operation = fields.string(operation, "request.operation", required=True)
    if operation not in OPERATIONS:
        raise InvalidObject(f"request.operation {operation!r} is not one of {', '.join(OPERATIONS)}")
    sub_resource = request.get("subResource")
    if type(sub_resource) is not str:
        sub_resource = fields.string(sub_resource, "request.subResource")
    dry_run = request.get("dryRun")
    if type(dry_run) is not bool:
        dry_run = fields.boolean(dry_run, "request.dryRun") or False
    obj = request.get("object")
    if obj is None and operation in ("DELETE", "CONNECT"):
        obj = {}
    if not isinstance(obj, dict):
        what = "missing" if obj is None else f"{fields.json_type(obj)}, not an object"
        raise InvalidObject(f"request.object is {what}")
    meta = read_object_meta(obj, "request.object")
    namespace = request.get("namespace")
    if type(namespace) is not str:
        namespace = fields.string(namespace, "request.namespace")
    name = request.get("name")
    if type(name) is not str:
        name = fields.string(name, "request.name")
    user_info = request.get("userInfo")
    if type(user_info) is not dict:
        user_info = fields.mapping(user_info, "request.userInfo")
    user = user_info.get("username")
    if user is not None and type(user) is not str:
        user = fields.string(user, "request.userInfo.username")
    # Only a subresource's UPDATE reads its oldObject (rule 18): a pod's CREATE has none to read.
    old_obj = None
    if sub_resource:
        old_obj = request.get("oldObject")
        if old_obj is not None and type(old_obj) is not dict:
            old_obj = dict(fields.mapping(old_obj, "request.oldObject"))
    return AdmissionRequest(
        api_version=api_version,
        uid=uid,
        kind=kind,
        operation=operation,
        namespace=namespace or meta.namespace,
        name=name or meta.name or meta.generate_name,
        obj=obj,
        dry_run=dry_run,
        user=user,
        sub_resource=sub_resource,
        meta=meta,
        old_obj=old_obj,
    )


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
