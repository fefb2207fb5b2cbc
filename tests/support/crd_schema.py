"""Judge an object by a CRD's openAPIV3Schema as the API server would, without an API server.

No kube-apiserver runs here, so the two parts of its judgement are done by
well-kept implementations of the same standards: the OpenAPI v3 keywords by
``jsonschema`` (unknown fields refused, as ``kubectl apply``'s strict field
validation does, except under ``x-kubernetes-preserve-unknown-fields``) and the
``x-kubernetes-validations`` rules by ``cel-python`` (CEL, with ``self`` bound
to the value at the rule's node, as Kubernetes binds it). Also: the structural
checks apiextensions.k8s.io/v1 makes of a schema, and "every field has a
description".
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import celpy
import jsonschema

_KEYWORDS_NOT_FIELDS = frozenset({"metadata"})
# cel-python raises the interpreter's recursion limit whenever an Environment is made: made once here, at
# import, so a hypothesis test that is the first to judge an object never sees the limit change under it
# (hypothesis warns, and filterwarnings=error fails the test).
_CEL = celpy.Environment()


def version_schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever the API server would prune or refuse them."""
    out = copy.deepcopy(schema)

    def walk(node: dict[str, Any]) -> None:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for name, child in node.get("properties", {}).items():
            if name not in _KEYWORDS_NOT_FIELDS:
                walk(child)
        if isinstance(node.get("items"), dict):
            walk(node["items"])
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"])

    walk(out)
    return out


def _rules(schema: dict[str, Any], value: Any, path: str) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Every (path, rule, self) pair: each x-kubernetes-validations rule with the value at its node."""
    for rule in schema.get("x-kubernetes-validations", ()):
        yield path, rule, value
    if isinstance(value, dict):
        for name, child in schema.get("properties", {}).items():
            if name in value:
                yield from _rules(child, value[name], f"{path}.{name}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _rules(schema["items"], item, f"{path}[{index}]")


def problems(crd: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """What the API server would refuse in ``obj`` (empty: it would be accepted)."""
    schema = version_schema(crd)
    found = [
        f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in jsonschema.Draft7Validator(_strict(schema)).iter_errors(obj)
    ]
    if found:
        return found  # CEL rules only run on objects that pass the schema
    for path, rule, value in _rules(schema, obj, ""):
        program = _CEL.program(_CEL.compile(rule["rule"]))
        result = program.evaluate({"self": celpy.json_to_cel(value)})
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            found.append(f"{path or '<root>'}: {rule.get('message', rule['rule'])}")
    return found


def undescribed(schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Fields without a description (``kubectl explain`` would show nothing for them)."""
    for name, child in schema.get("properties", {}).items():
        where = f"{path}.{name}"
        if name not in _KEYWORDS_NOT_FIELDS and not child.get("description"):
            yield where
        yield from undescribed(child, where)
    if isinstance(schema.get("items"), dict):
        yield from undescribed(schema["items"], f"{path}[]")


def structural_errors(schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """The structural-schema rules of apiextensions.k8s.io/v1 that a generated schema could break."""
    if "type" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields") and path:
        yield f"{path}: no type"
    for name, child in schema.get("properties", {}).items():
        yield from structural_errors(child, f"{path}.{name}")
    if schema.get("type") == "array":
        if not isinstance(schema.get("items"), dict):
            yield f"{path}: an array needs items"
        else:
            yield from structural_errors(schema["items"], f"{path}[]")
    if schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        required = set(schema.get("items", {}).get("required", ()))
        if not keys or not set(keys) <= required:
            yield f"{path}: map list keys must be required fields"
