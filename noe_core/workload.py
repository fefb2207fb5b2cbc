"""A Pod or a DaemonSet's pod template, read once into the typed view the policy trusts.

The API server calls mutating webhooks before validation, so the object may be
malformed. :func:`read_workload` checks every field the policy reads or edits
and is the only place that raises :class:`InvalidObject` for a pod's shape (a
400 naming the field); everything after it works on the :class:`Workload` it
returns. The raw object is kept as it came and never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from noe_core import fields
from noe_core.errors import InvalidObject
from noe_core.safe_load import load_json

POD = "Pod"
DAEMON_SET = "DaemonSet"
KINDS = (POD, DAEMON_SET)
MAX_DEPTH = 100
"""Deepest nesting of objects and arrays noe accepts. A Pod or DaemonSet is about 15 levels deep;
much deeper input would exhaust Python's recursion limit when the object is copied or serialised."""

PLACEMENT_ANNOTATION = "arch.noe.adevinta.com/placement"
"""Annotation on a DaemonSet's pod template recording what noe added, so an UPDATE is decided afresh."""

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class Workload:
    """What the policy needs of a Pod or a DaemonSet template, validated.

    ``spec`` is the pod spec as sent (read-only; an empty mapping when absent),
    ``spec_pointer`` where it sits (``/spec`` or ``/spec/template/spec``) and
    ``spec_state`` whether it is there (``True``), absent (``False``) or null
    (``None``), so edits know whether they must create it.
    """

    kind: str
    obj: Mapping[str, Any]
    spec: Mapping[str, Any]
    spec_pointer: str
    spec_state: bool | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    images: tuple[str, ...]
    pull_secrets: tuple[str, ...]
    node_name: str
    node_selector: Mapping[str, str]
    placement_record: Mapping[str, Any] | None
    """What noe recorded on a DaemonSet template when it placed it; ``None`` for pods and when unreadable."""

    @property
    def template_pointer(self) -> str:
        """Where the metadata of the pods sits: the object's own, or the DaemonSet template's."""
        return "/spec/template" if self.kind == DAEMON_SET else ""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def check_depth(obj: object, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`InvalidObject` when ``obj`` nests objects or arrays deeper than ``limit`` (no recursion).

    Written for speed: it visits every value of every admitted object once.
    """
    stack: list[tuple[Iterable[object], int]] = []
    _push(stack, obj, 1, limit)
    while stack:
        children, depth = stack.pop()
        for child in children:
            if type(child) not in _SCALARS:
                _push(stack, child, depth + 1, limit)


def _push(stack: list[tuple[Iterable[object], int]], value: object, depth: int, limit: int) -> None:
    if type(value) is list:
        children: Iterable[object] = value
    elif type(value) is dict or isinstance(value, Mapping):
        children = value.values()
    else:
        return
    if depth > limit:
        raise InvalidObject(f"the object is nested more than {limit} levels deep")
    stack.append((children, depth))


def read_workload(obj: object, kind: str) -> Workload:
    """Read a Pod or DaemonSet into a :class:`Workload`; raise :class:`InvalidObject` naming the bad field."""
    if kind not in KINDS:
        raise InvalidObject(f"kind {kind!r} has no pod spec; noe handles {', '.join(KINDS)}")
    if not isinstance(obj, Mapping):
        raise InvalidObject(f"the {kind} must be an object, not {fields.json_type(obj)}")
    check_depth(obj)
    if kind == DAEMON_SET:
        spec_field = fields.mapping(obj.get("spec"), "spec")
        if spec_field.get("template") is None:
            raise InvalidObject("spec.template is missing: a DaemonSet needs a pod template")
        holder = fields.mapping(spec_field.get("template"), "spec.template")
        meta_path, spec_path, pointer = "spec.template.metadata", "spec.template.spec", "/spec/template/spec"
    else:
        holder = obj
        meta_path, spec_path, pointer = "metadata", "spec", "/spec"
    metadata = fields.mapping(holder.get("metadata"), meta_path)
    labels = fields.string_map(metadata.get("labels"), f"{meta_path}.labels")
    annotations = _annotations(metadata.get("annotations"), f"{meta_path}.annotations")
    raw_spec = holder.get("spec")
    spec = fields.mapping(raw_spec, spec_path)
    state: bool | None = "spec" in holder and (None if raw_spec is None else True)
    _check_placement_fields(spec, spec_path)
    return Workload(
        kind=kind,
        obj=obj,
        spec=spec,
        spec_pointer=pointer,
        spec_state=state,
        labels=labels,
        annotations=annotations,
        images=_images(spec, spec_path),
        pull_secrets=pull_secret_names(spec.get("imagePullSecrets")),
        node_name=fields.string(spec.get("nodeName"), f"{spec_path}.nodeName"),
        node_selector=fields.string_map(spec.get("nodeSelector"), f"{spec_path}.nodeSelector"),
        placement_record=_placement_record(annotations) if kind == DAEMON_SET else None,
    )


def _annotations(value: object, path: str) -> Mapping[str, str]:
    """Annotations as far as noe reads them: string values of an object, anything else ignored.

    noe neither reads nor edits other annotations, so their shape is left to the API server's validation.
    """
    del path
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _images(spec: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The images of ``containers`` then ``initContainers``, de-duplicated in order, empty ignored.

    Ephemeral containers are left out: they cannot exist when a pod is created.
    A null container entry reads as empty.
    """
    images: dict[str, None] = {}
    for field in ("containers", "initContainers"):
        for index, container in enumerate(fields.array(spec.get(field), f"{path}.{field}")):
            item = fields.mapping(container, f"{path}.{field}[{index}]")
            image = fields.string(item.get("image"), f"{path}.{field}[{index}].image")
            if image.strip():
                images.setdefault(image, None)
    return tuple(images)


def pull_secret_names(value: object) -> tuple[str, ...]:
    """``imagePullSecrets`` names, de-duplicated in order; entries that name nothing are skipped.

    Malformed entries are not an error: the kubelet ignores them too, and a
    missing secret only means anonymous access.
    """
    names: dict[str, None] = {}  # an ordered set: the list may be long
    for entry in value if isinstance(value, list) else ():
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if isinstance(name, str) and name:
            names.setdefault(name, None)
    return tuple(names)


def _check_placement_fields(spec: Mapping[str, Any], path: str) -> None:
    """The fields the policy reads or edits, beyond images: tolerations and node affinity."""
    for index, toleration in enumerate(fields.array(spec.get("tolerations"), f"{path}.tolerations")):
        item = fields.mapping(toleration, f"{path}.tolerations[{index}]")
        for key in ("key", "operator", "value", "effect"):
            fields.string(item.get(key), f"{path}.tolerations[{index}].{key}")
    affinity = fields.mapping(spec.get("affinity"), f"{path}.affinity")
    base = f"{path}.affinity.nodeAffinity"
    node_affinity = fields.mapping(affinity.get("nodeAffinity"), base)
    required_path = f"{base}.{_REQUIRED}"
    required = fields.mapping(node_affinity.get(_REQUIRED), required_path)
    terms = fields.array(required.get("nodeSelectorTerms"), f"{required_path}.nodeSelectorTerms")
    for index, term in enumerate(terms):
        _check_term(term, f"{required_path}.nodeSelectorTerms[{index}]")
    preferred_path = f"{base}.{_PREFERRED}"
    for index, item in enumerate(fields.array(node_affinity.get(_PREFERRED), preferred_path)):
        entry = fields.mapping(item, f"{preferred_path}[{index}]")
        fields.integer(entry.get("weight"), f"{preferred_path}[{index}].weight")
        _check_term(entry.get("preference"), f"{preferred_path}[{index}].preference")


def _check_term(term: object, path: str) -> None:
    term_map = fields.mapping(term, path)
    for field in ("matchExpressions", "matchFields"):
        for index, expression in enumerate(fields.array(term_map.get(field), f"{path}.{field}")):
            where = f"{path}.{field}[{index}]"
            item = fields.mapping(expression, where)
            fields.string(item.get("key"), f"{where}.key", required=True)
            fields.string(item.get("operator"), f"{where}.operator", required=True)
            for value_index, value in enumerate(fields.array(item.get("values"), f"{where}.values")):
                fields.string(value, f"{where}.values[{value_index}]", required=True)


def _placement_record(annotations: Mapping[str, str]) -> Mapping[str, Any] | None:
    raw = annotations.get(PLACEMENT_ANNOTATION)
    if raw is None:
        return None
    try:
        record = load_json(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


# ---------------------------------------------------------------- the earlier, object-level helpers


def images_of(obj: Mapping[str, Any], kind: str) -> list[str]:
    """The images of ``containers`` then ``initContainers`` (see :func:`read_workload`)."""
    return list(read_workload(obj, kind).images)


def pod_labels(obj: Mapping[str, Any], kind: str) -> dict[str, str]:
    """The labels the pods will carry: the Pod's own, or the DaemonSet template's."""
    return dict(read_workload(obj, kind).labels)


def check_workload(obj: object, kind: str) -> None:
    """Check that ``obj`` is a ``kind`` noe can read (see :func:`read_workload`)."""
    read_workload(obj, kind)


def pod_spec(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The pod spec inside ``obj`` for editing in place (created empty when missing)."""
    holder = read_workload(obj, kind)
    target: dict[str, Any] = obj if holder.kind == POD else obj["spec"]["template"]
    if not isinstance(target.get("spec"), dict):
        target["spec"] = {}
    spec: dict[str, Any] = target["spec"]
    return spec
