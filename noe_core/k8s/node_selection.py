"""Which nodes a pod's spec lets kube-scheduler use: node selectors, required node affinity, taints.

The scheduler's spec-only filters (``NodeName``, ``NodeAffinity``, ``TaintToleration``),
pure, over JSON as the API serves it. ``noe why``, the controller's unsatisfiable-placement
check and :mod:`noe_core.testing` read the same rules, so a node "matches" everywhere
for the same reasons the scheduler would give.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from noe_core.errors import InvalidObject

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""Taint effects that keep an untolerating pod off a node (``PreferNoSchedule`` only ranks)."""


def _matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    """One requirement against one node value (``None`` = the label is absent)."""
    operator = requirement.get("operator")
    values = list(requirement.get("values") or [])
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    raise InvalidObject(f"unknown node selector operator {operator!r}")


def term_matches(term: Mapping[str, Any] | None, labels: Mapping[str, str], name: str) -> bool:
    """A term matches when it has at least one requirement and all of them match (empty matches none)."""
    expressions = (term or {}).get("matchExpressions") or []
    fields = (term or {}).get("matchFields") or []
    if not expressions and not fields:
        return False
    for expression in expressions:
        if not _matches(expression, labels.get(expression.get("key", ""))):
            return False
    for expression in fields:
        value = name if expression.get("key") == "metadata.name" else None
        if expression.get("operator") not in ("In", "NotIn") or not _matches(expression, value):
            return False
    return True


def selects(spec: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """``nodeSelector`` and required node affinity (terms ORed, requirements ANDed) accept the node."""
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        terms = required.get("nodeSelectorTerms") or []
        if not any(term_matches(term, labels, name) for term in terms):
            return False
    return True


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(
    tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The ``NoSchedule`` / ``NoExecute`` taints no toleration tolerates: each one keeps the pod off the node."""
    return [
        taint
        for taint in taints
        if taint.get("effect") in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tolerations)
    ]


def taint_text(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as ``kubectl taint`` writes it."""
    value = taint.get("value")
    body = f"{taint.get('key', '')}={value}" if value else str(taint.get("key", ""))
    return f"{body}:{taint.get('effect', '')}"


def schedulable(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """True when kube-scheduler's spec-only filters let a pod of ``spec`` run on ``node``.

    nodeName, nodeSelector, required node affinity (terms ORed, requirements ANDed,
    ``matchFields metadata.name``) and taints: NoSchedule and NoExecute taints must be
    tolerated; PreferNoSchedule never blocks. Preferences only rank nodes, so they
    are ignored here.
    """
    metadata = node.get("metadata") or {}
    name = str(metadata.get("name", ""))
    node_name = spec.get("nodeName")
    if node_name and node_name != name:
        return False
    if not selects(spec, metadata.get("labels") or {}, name):
        return False
    return not untolerated(spec.get("tolerations") or [], (node.get("spec") or {}).get("taints") or [])


__all__ = ["BLOCKING_EFFECTS", "schedulable", "selects", "taint_text", "term_matches", "tolerates", "untolerated"]
