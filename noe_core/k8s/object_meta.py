"""An object's metadata, read once at the border into the typed value every later step trusts.

``parse_admission_review`` reads the admitted object's metadata with
:func:`read_object_meta`, :func:`~noe_core.k8s.workload.read_workload` a DaemonSet
template's, ``noe report`` and ``noe controller`` each pod's. Nothing after that
reads ``metadata`` again: the webhook's Events and log line, the top owner in
the report and the controller's evictions all take the :class:`ObjectMeta`.

The owner rule lives here, once (:func:`owner_reference`): the entry of
``ownerReferences`` with ``controller: true``, else the first entry (marked
``controller=False``). Events and evictions act only on a controlling owner;
the report follows either to find the top owner.

Names, namespace, uid, labels and owner references must have their Kubernetes
types (a wrong type is an :class:`~noe_core.errors.InvalidObject` naming the
field, as the API server's own decoding would refuse it); annotations are read
as far as noe reads them (string values), the rest being the API server's to
validate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.util import fields
from noe_core.util.json_patch import Edits, Operation, copy_json


@dataclass(frozen=True)
class OwnerRef:
    """The owner an object names in ``metadata.ownerReferences``."""

    kind: str
    name: str
    api_version: str = ""
    uid: str = ""
    controller: bool = True
    """``controller: true`` in the reference: the owner manages the object (recreates it, scales it)."""


@dataclass(frozen=True)
class ObjectMeta:
    """What an object says about itself: its ``apiVersion`` and the ``metadata`` fields noe uses.

    ``raw`` is the ``metadata`` object as sent (read-only; empty when absent)
    and ``state`` whether it is there (``True``), absent (``False``) or null
    (``None``), so an edit of it knows whether it must create it.
    """

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: OwnerRef | None = None
    """The controlling owner, else the first owner reference; ``None`` when there is none."""
    api_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    state: bool | None = False


def read_object_meta(obj: Mapping[str, Any], where: str = "") -> ObjectMeta:
    """Read the ``metadata`` of ``obj`` (found at ``where``: ``request.object``, ``spec.template``, or the top).

    Raises :class:`InvalidObject` naming the field that has the wrong type.
    """
    raw = obj.get("metadata")
    if type(raw) is dict:
        fast = _read_plain(obj, raw, where)
        if fast is not None:
            return fast
    prefix = f"{where}." if where else ""
    path = f"{prefix}metadata"
    metadata = fields.mapping(raw, path)
    return ObjectMeta(
        name=fields.string(metadata.get("name"), f"{path}.name"),
        generate_name=fields.string(metadata.get("generateName"), f"{path}.generateName"),
        namespace=fields.string(metadata.get("namespace"), f"{path}.namespace"),
        uid=fields.string(metadata.get("uid"), f"{path}.uid"),
        labels=fields.string_map(metadata.get("labels"), f"{path}.labels"),
        annotations=_annotations(metadata.get("annotations")),
        owner=owner_reference(metadata.get("ownerReferences"), f"{path}.ownerReferences"),
        api_version=fields.string(obj.get("apiVersion"), f"{prefix}apiVersion"),
        raw=metadata,
        state="metadata" in obj and (None if raw is None else True),
    )


def _read_plain(obj: Mapping[str, Any], metadata: dict[str, Any], where: str) -> ObjectMeta | None:
    """The common case read without a call per field: every field noe reads has its type (or is absent).
    ``None`` when one has not: :func:`read_object_meta` then reads it field by field, to say which."""
    name, generate_name = metadata.get("name"), metadata.get("generateName")
    namespace, uid, api_version = metadata.get("namespace"), metadata.get("uid"), obj.get("apiVersion")
    for value in (name, generate_name, namespace, uid, api_version):
        if value is not None and type(value) is not str:
            return None
    labels = metadata.get("labels")
    if labels is not None and (
        type(labels) is not dict or not all(type(k) is str and type(v) is str for k, v in labels.items())
    ):
        return None
    refs = metadata.get("ownerReferences")
    owner = None
    if refs is not None:
        owner = owner_reference(refs, f"{where}.metadata.ownerReferences" if where else "metadata.ownerReferences")
    return ObjectMeta(
        name=name or "",
        generate_name=generate_name or "",
        namespace=namespace or "",
        uid=uid or "",
        labels=dict(labels) if labels else {},
        annotations=_annotations(metadata.get("annotations")),
        owner=owner,
        api_version=api_version or "",
        raw=metadata,
        state=True,
    )


def owner_reference(refs: object, path: str = "metadata.ownerReferences") -> OwnerRef | None:
    """The one owner rule: the reference with ``controller: true``, else the first; ``None`` when none names one.

    Raises :class:`InvalidObject` for a list that is not one, or an entry without a kind and a name.
    """
    if refs is None:
        return None
    if not isinstance(refs, list):
        raise InvalidObject(f"{path} must be a list, not {fields.json_type(refs)}")
    chosen: Mapping[str, Any] | None = None
    chosen_index = 0
    for index, ref in enumerate(refs):
        if not isinstance(ref, Mapping) or not isinstance(ref.get("kind"), str) or not isinstance(ref.get("name"), str):
            raise InvalidObject(f"{path}[{index}] needs a kind and a name")
        if ref.get("controller") is True:
            chosen, chosen_index = ref, index
            break
        if chosen is None:
            chosen, chosen_index = ref, index
    if chosen is None or not chosen["kind"] or not chosen["name"]:
        return None
    where = f"{path}[{chosen_index}]"
    return OwnerRef(
        kind=chosen["kind"],
        name=chosen["name"],
        api_version=fields.string(chosen.get("apiVersion"), f"{where}.apiVersion"),
        uid=fields.string(chosen.get("uid"), f"{where}.uid"),
        controller=chosen.get("controller") is True,
    )


def _annotations(value: object) -> Mapping[str, str]:
    """Annotations as far as noe reads them: string values of an object, anything else ignored.

    noe neither reads nor edits other annotations, so their shape is left to the API server's validation.
    """
    if value is None or not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def label_operations(meta: ObjectMeta, key: str, value: str, earlier: Sequence[Operation]) -> tuple[Operation, ...]:
    """The operations that set the label ``key`` to ``value`` on an object, after the ``earlier`` ones.

    Labels are copied, never replaced whole; when an earlier operation created ``/metadata`` (a pod sent
    without it), the label is added inside it rather than adding ``/metadata`` a second time.
    """
    if meta.labels.get(key) == value:
        return ()
    created = any(op.get("path") == "/metadata" for op in earlier)
    doc = {"labels": copy_json(meta.raw["labels"])} if "labels" in meta.raw and meta.raw["labels"] is not None else {}
    edits = Edits(doc, "/metadata", present=True if created else meta.state)
    edits.set(("labels", key), value)
    return tuple(edits.operations())
