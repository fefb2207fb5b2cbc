"""Where the pod spec sits in the objects noe mutates, and checks of its shape.

The API server calls mutating webhooks before validation, so the object may
be malformed. Every field the policy reads or edits is checked here first, so
a bad object becomes an :class:`InvalidObject` naming the field (a 400), never
a ``KeyError`` deep inside the policy (a 500).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noe_core.errors import InvalidObject

POD = "Pod"
DAEMON_SET = "DaemonSet"
KINDS = (POD, DAEMON_SET)
MAX_DEPTH = 100
"""Deepest nesting of objects and arrays noe accepts. A Pod or DaemonSet is about 15 levels deep;
much deeper input would exhaust Python's recursion limit in ``copy.deepcopy`` or the patch diff."""


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    """``value`` as a mapping; ``None`` (JSON null or absent) reads as empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidObject(f"{path} must be an object, not {type(value).__name__}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidObject(f"{path} must be a list, not {type(value).__name__}")
    return value


def _string(value: object, path: str, *, optional: bool = True) -> str:
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise InvalidObject(f"{path} must be a string, not {type(value).__name__}")
    return value


def _string_map(value: object, path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, item in _mapping(value, path).items():
        if not isinstance(key, str):
            raise InvalidObject(f"{path} keys must be strings")
        out[key] = _string(item, f"{path}[{key!r}]", optional=False)
    return out


def _spec_path(kind: str) -> str:
    return "spec.template.spec" if kind == DAEMON_SET else "spec"


def pod_spec(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The pod spec inside ``obj`` (the object itself, so a caller may edit its own copy).

    A missing spec is created empty, so callers can always write into it.
    """
    if not isinstance(obj, dict):
        raise InvalidObject(f"the {kind} must be an object, not {type(obj).__name__}")
    if kind == POD:
        holder: dict[str, Any] = obj
    elif kind == DAEMON_SET:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            raise InvalidObject("spec must be an object with a pod template")
        template = spec.get("template")
        if not isinstance(template, dict):
            raise InvalidObject("spec.template must be an object")
        holder = template
    else:
        raise InvalidObject(f"kind {kind!r} has no pod spec; noe handles {', '.join(KINDS)}")
    inner = holder.get("spec")
    if inner is None:
        inner = holder["spec"] = {}
    if not isinstance(inner, dict):
        raise InvalidObject(f"{_spec_path(kind)} must be an object, not {type(inner).__name__}")
    return inner


def pod_labels(obj: Mapping[str, Any], kind: str) -> dict[str, str]:
    """The labels the pods will carry: the Pod's own, or the DaemonSet template's."""
    if kind == DAEMON_SET:
        template = _mapping(_mapping(obj.get("spec"), "spec").get("template"), "spec.template")
        metadata = _mapping(template.get("metadata"), "spec.template.metadata")
        return _string_map(metadata.get("labels"), "spec.template.metadata.labels")
    metadata = _mapping(obj.get("metadata"), "metadata")
    return _string_map(metadata.get("labels"), "metadata.labels")


def _check_term(term: object, path: str, *, fields: bool) -> None:
    term_map = _mapping(term, path)
    for index, expression in enumerate(_list(term_map.get("matchExpressions"), f"{path}.matchExpressions")):
        _check_requirement(expression, f"{path}.matchExpressions[{index}]")
    if fields:
        for index, expression in enumerate(_list(term_map.get("matchFields"), f"{path}.matchFields")):
            _check_requirement(expression, f"{path}.matchFields[{index}]")


def _check_requirement(expression: object, path: str) -> None:
    item = _mapping(expression, path)
    _string(item.get("key"), f"{path}.key", optional=False)
    _string(item.get("operator"), f"{path}.operator", optional=False)
    for index, value in enumerate(_list(item.get("values"), f"{path}.values")):
        _string(value, f"{path}.values[{index}]", optional=False)


def check_pod_spec(spec: Mapping[str, Any], path: str = "spec") -> None:
    """Raise :class:`InvalidObject` when a field noe reads or edits has the wrong shape."""
    for field in ("containers", "initContainers"):
        for index, container in enumerate(_list(spec.get(field), f"{path}.{field}")):
            item = _mapping(container, f"{path}.{field}[{index}]")
            _string(item.get("image"), f"{path}.{field}[{index}].image")
    _string(spec.get("nodeName"), f"{path}.nodeName")
    _string_map(spec.get("nodeSelector"), f"{path}.nodeSelector")
    for index, toleration in enumerate(_list(spec.get("tolerations"), f"{path}.tolerations")):
        item = _mapping(toleration, f"{path}.tolerations[{index}]")
        for key in ("key", "operator", "value", "effect"):
            _string(item.get(key), f"{path}.tolerations[{index}].{key}")
    affinity = _mapping(spec.get("affinity"), f"{path}.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    base = f"{path}.affinity.nodeAffinity"
    required_path = f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
    required = _mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), required_path)
    terms = _list(required.get("nodeSelectorTerms"), f"{required_path}.nodeSelectorTerms")
    for index, term in enumerate(terms):
        _check_term(term, f"{required_path}.nodeSelectorTerms[{index}]", fields=True)
    preferred_path = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = _list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    for index, item in enumerate(preferred):
        entry = _mapping(item, f"{preferred_path}[{index}]")
        weight = entry.get("weight")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int)):
            raise InvalidObject(f"{preferred_path}[{index}].weight must be an integer")
        _check_term(entry.get("preference"), f"{preferred_path}[{index}].preference", fields=True)


def check_depth(obj: object, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`InvalidObject` when ``obj`` nests objects or arrays deeper than ``limit`` (no recursion)."""
    stack: list[tuple[object, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            raise InvalidObject(f"the object is nested more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children)


def check_workload(obj: object, kind: str) -> None:
    """Check that ``obj`` is a ``kind`` noe can read: its labels and the pod spec fields it uses."""
    if not isinstance(obj, dict):
        raise InvalidObject(f"the {kind} must be an object, not {type(obj).__name__}")
    check_depth(obj)
    pod_labels(obj, kind)
    check_pod_spec(pod_spec_view(obj, kind), _spec_path(kind))


def pod_spec_view(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The pod spec for reading only: never creates anything in ``obj``."""
    if kind == DAEMON_SET:
        spec = _mapping(obj.get("spec"), "spec")
        if spec.get("template") is None:
            raise InvalidObject("spec.template is missing: a DaemonSet needs a pod template")
        template = _mapping(spec.get("template"), "spec.template")
        return _mapping(template.get("spec"), "spec.template.spec")
    if kind == POD:
        return _mapping(obj.get("spec"), "spec")
    raise InvalidObject(f"kind {kind!r} has no pod spec; noe handles {', '.join(KINDS)}")


def images_of(obj: Mapping[str, Any], kind: str) -> list[str]:
    """The images of ``containers`` then ``initContainers``, de-duplicated in order, empty ignored.

    Ephemeral containers are left out: they cannot exist when a pod is created.
    """
    check_workload(obj, kind)
    spec = pod_spec_view(obj, kind)
    images: dict[str, None] = {}
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            image = (container or {}).get("image") or ""  # a null entry reads as empty, as check_pod_spec allows
            if image.strip():
                images.setdefault(image, None)
    return list(images)
