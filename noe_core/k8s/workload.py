"""A Pod or a DaemonSet's pod template, read once into the typed view the policy trusts.

The API server calls mutating webhooks before validation, so the object may be
malformed. :func:`read_workload` checks every field the policy reads or edits
and is the only place that raises :class:`InvalidObject` for a pod's shape (a
400 naming the field); everything after it works on the :class:`Workload` it
returns, metadata included (:class:`~noe_core.k8s.object_meta.ObjectMeta`). The raw
object is kept as it came and never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import ObjectMeta, read_object_meta
from noe_core.util import fields
from noe_core.util.safe_load import MAX_DEPTH, TooComplex, check_depth, load_json

POD = "Pod"
DAEMON_SET = "DaemonSet"
KINDS = (POD, DAEMON_SET)

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
    meta: ObjectMeta
    """The object's own metadata: the Pod's, or the DaemonSet's."""
    pod_meta: ObjectMeta
    """The metadata its pods carry: the Pod's own (``meta`` itself), or the DaemonSet template's."""
    spec: Mapping[str, Any]
    spec_pointer: str
    spec_state: bool | None
    images: tuple[str, ...]
    """Rule 3: ``containers``, ``initContainers`` and the image volumes' references, de-duplicated in order."""
    pull_secrets: tuple[str, ...]
    node_name: str
    node_selector: Mapping[str, str]
    placement_record: Mapping[str, Any] | None
    """What noe recorded on a DaemonSet template when it placed it; ``None`` for pods and when unreadable."""
    volume_images: frozenset[str] = frozenset()
    """The images only mounted as image volumes (``spec.volumes[].image``), no container's: an artifact
    among them constrains nothing (rule 17)."""
    ephemeral: Mapping[str, str] = dataclass_field(default_factory=dict)
    """A Pod's ephemeral containers (``kubectl debug``), name → image: rule 18 checks the new ones."""

    @property
    def labels(self) -> Mapping[str, str]:
        """The labels the pods carry (rules 7 and 9 read them)."""
        return self.pod_meta.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        """The pods' annotations with string values (a DaemonSet template's hold noe's placement record)."""
        return self.pod_meta.annotations

    @property
    def template_pointer(self) -> str:
        """Where the metadata of the pods sits: the object's own, or the DaemonSet template's."""
        return "/spec/template" if self.kind == DAEMON_SET else ""


def check_nesting(obj: object) -> None:
    """Raise :class:`InvalidObject` (a 400) when ``obj`` nests deeper than :data:`MAX_DEPTH` (the one depth check)."""
    try:
        check_depth(obj, MAX_DEPTH)
    except TooComplex:
        raise InvalidObject(f"the object is nested more than {MAX_DEPTH} levels deep") from None


def read_workload(obj: object, kind: str, *, meta: ObjectMeta | None = None) -> Workload:
    """Read a Pod or DaemonSet into a :class:`Workload`; raise :class:`InvalidObject` naming the bad field.

    ``meta`` is the object's metadata when the caller has read it already
    (``parse_admission_review`` has), so that it is read once.
    """
    if kind not in KINDS:
        raise InvalidObject(f"kind {kind!r} has no pod spec; noe handles {', '.join(KINDS)}")
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InvalidObject(f"the {kind} must be an object, not {fields.json_type(obj)}")
    check_nesting(obj)
    own = meta if meta is not None else read_object_meta(obj)
    if kind == DAEMON_SET:
        spec_field = fields.mapping(obj.get("spec"), "spec")
        if spec_field.get("template") is None:
            raise InvalidObject("spec.template is missing: a DaemonSet needs a pod template")
        holder = fields.mapping(spec_field.get("template"), "spec.template")
        pod_meta = read_object_meta(holder, "spec.template")
        spec_path, pointer = "spec.template.spec", "/spec/template/spec"
    else:
        holder, pod_meta = obj, own
        spec_path, pointer = "spec", "/spec"
    raw_spec = holder.get("spec")
    spec = fields.mapping(raw_spec, spec_path)
    state: bool | None = "spec" in holder and (None if raw_spec is None else True)
    _check_placement_fields(spec, spec_path)
    containers = _images(spec, spec_path)
    volumes = _volume_images(spec, spec_path) if spec.get("volumes") is not None else ()
    return Workload(
        kind=kind,
        obj=obj,
        meta=own,
        pod_meta=pod_meta,
        spec=spec,
        spec_pointer=pointer,
        spec_state=state,
        images=tuple(dict.fromkeys((*containers, *volumes))) if volumes else containers,
        pull_secrets=pull_secret_names(spec.get("imagePullSecrets")),
        node_name=fields.string(spec.get("nodeName"), f"{spec_path}.nodeName"),
        node_selector=fields.string_map(spec.get("nodeSelector"), f"{spec_path}.nodeSelector"),
        placement_record=_placement_record(pod_meta.annotations) if kind == DAEMON_SET else None,
        volume_images=frozenset(volumes).difference(containers) if volumes else frozenset(),
        ephemeral=_ephemeral(spec, spec_path) if kind == POD and spec.get("ephemeralContainers") is not None else {},
    )


def _images(spec: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The images of ``containers`` then ``initContainers``, de-duplicated in order, empty ignored.

    Ephemeral containers are left out: they cannot exist when a pod is created.
    A null container entry reads as empty. The common shape is read inline; anything else field by field,
    so a wrong type is named.
    """
    images: dict[str, None] = {}
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if items is None:
            continue
        if type(items) is not list:
            return _images_checked(spec, path)
        for container in items:
            image = container.get("image") if type(container) is dict else 0
            if type(image) is not str:
                return _images_checked(spec, path)
            if image and not image.isspace():
                images[image] = None
    return tuple(images)


def _images_checked(spec: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """:func:`_images`, field by field: raises :class:`InvalidObject` naming the first field of a wrong type."""
    images: dict[str, None] = {}
    for field in ("containers", "initContainers"):
        for index, container in enumerate(fields.array(spec.get(field), f"{path}.{field}")):
            item = fields.mapping(container, f"{path}.{field}[{index}]")
            image = fields.string(item.get("image"), f"{path}.{field}[{index}].image")
            if image.strip():
                images.setdefault(image, None)
    return tuple(images)


def _volume_images(spec: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The references of image volumes (``volumes[].image.reference``), in order, empty ones ignored.

    The kubelet pulls them for its node's platform as it pulls container images (rule 3).
    """
    images: dict[str, None] = {}
    for index, volume in enumerate(fields.array(spec.get("volumes"), f"{path}.volumes")):
        item = fields.mapping(volume, f"{path}.volumes[{index}]")
        source = fields.mapping(item.get("image"), f"{path}.volumes[{index}].image")
        reference = fields.string(source.get("reference"), f"{path}.volumes[{index}].image.reference")
        if reference.strip():
            images.setdefault(reference, None)
    return tuple(images)


def _ephemeral(spec: Mapping[str, Any], path: str) -> dict[str, str]:
    """``ephemeralContainers`` as name → image (entries without a name or image are skipped: the API
    server refuses them anyway, and noe never edits them)."""
    found: dict[str, str] = {}
    for index, container in enumerate(fields.array(spec.get("ephemeralContainers"), f"{path}.ephemeralContainers")):
        item = fields.mapping(container, f"{path}.ephemeralContainers[{index}]")
        name = fields.string(item.get("name"), f"{path}.ephemeralContainers[{index}].name")
        image = fields.string(item.get("image"), f"{path}.ephemeralContainers[{index}].image")
        if name and image.strip():
            found[name] = image
    return found


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
    """The fields the policy reads or edits, beyond images: tolerations and node affinity.

    The common cases (none of them, or tolerations of strings) are checked inline; anything else field by
    field, so a wrong type is named.
    """
    tolerations = spec.get("tolerations")
    if spec.get("affinity") is None and (
        tolerations is None
        or (
            type(tolerations) is list
            and all(
                type(item) is dict and all(v is None or type(v) is str for k, v in item.items() if k in _TOLERATION)
                for item in tolerations
            )
        )
    ):
        return
    _check_placement_fields_checked(spec, path)


_TOLERATION = frozenset({"key", "operator", "value", "effect"})


def _check_placement_fields_checked(spec: Mapping[str, Any], path: str) -> None:
    """:func:`_check_placement_fields`, field by field."""
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
