"""Editing nodeSelector, node affinity and tolerations without changing what the user meant.

Kubernetes ORs ``nodeSelectorTerms`` and ANDs what is inside one term, so a
requirement noe adds is ANDed into *every* existing term: appending a term of
its own would OR it and let the pod through the user's other terms. Every
helper is idempotent (it never adds what is already there) so mutating a
mutated pod changes nothing.

Helpers take an :class:`~noe_core.patch.Edits` over the pod spec's placement
fields, so each change they make is recorded as the JSON Patch operation the
webhook answers with, and return whether they changed anything. A plain dict
is accepted too (edited in place), for callers that do not need the operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noe_core.patch import Edits

ARCH_LABEL = "kubernetes.io/arch"
BETA_ARCH_LABEL = "beta.kubernetes.io/arch"
ARCH_LABELS = (ARCH_LABEL, BETA_ARCH_LABEL)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

Requirement = dict[str, Any]
PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations")
"""The pod spec fields noe edits; an :class:`Edits` over a pod spec holds only these."""
_TERMS = ("affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms")
_PREFERRED_PATH = ("affinity", "nodeAffinity", PREFERRED)


def _edits(target: dict[str, Any] | Edits) -> Edits:
    return target if isinstance(target, Edits) else Edits(target)


def requirement(key: str, operator: str, values: list[str] | None = None) -> Requirement:
    """A node selector requirement (``matchExpressions`` item)."""
    out: Requirement = {"key": key, "operator": operator}
    if values is not None:
        out["values"] = list(values)
    return out


def _same_requirement(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal meaning: same key and operator, same set of values (order does not matter)."""
    return (
        a.get("key") == b.get("key")
        and a.get("operator") == b.get("operator")
        and sorted(a.get("values") or []) == sorted(b.get("values") or [])
    )


def required_terms(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The required node-selector terms (a read-only view: the list in the spec or a new empty one)."""
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get(REQUIRED) or {}
    terms: list[dict[str, Any]] = required.get("nodeSelectorTerms") or []
    return terms


def _is_empty_term(term: Mapping[str, Any] | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


def architecture_selection(spec: Mapping[str, Any]) -> str | None:
    """Say how the pod already chooses its architecture, or ``None`` when it does not.

    A pod that sets ``kubernetes.io/arch`` (or the beta label) itself, or that is
    pinned to one node by ``matchFields metadata.name`` (DaemonSet pods), is left
    alone: its author, or the DaemonSet controller, already decided.
    """
    selector = spec.get("nodeSelector") or {}
    for label in ARCH_LABELS:
        if label in selector:
            return f"nodeSelector sets {label}={selector[label]}"
    for index, term in enumerate(required_terms(spec)):
        for expression in (term or {}).get("matchExpressions") or []:
            if expression.get("key") in ARCH_LABELS:
                return f"required node affinity term {index} has a {expression['key']} expression"
        for expression in (term or {}).get("matchFields") or []:
            if expression.get("key") == "metadata.name":
                return f"required node affinity term {index} pins the node by metadata.name"
    return None


def has_required(spec: Mapping[str, Any], expression: Mapping[str, Any]) -> bool:
    """True when every non-empty required term already carries ``expression``."""
    terms = [t for t in required_terms(spec) if not _is_empty_term(t)]
    if not terms:
        return False
    return all(any(_same_requirement(e, expression) for e in term.get("matchExpressions") or []) for term in terms)


def require(target: dict[str, Any] | Edits, expression: Requirement) -> bool:
    """AND ``expression`` into every required term; add one term when there is none.

    An empty term matches no node in Kubernetes; adding to it would widen the pod's
    placement, so empty terms are left as they are.
    """
    edits = _edits(target)
    terms = edits.get(_TERMS)
    if not terms:
        edits.set(_TERMS, [{"matchExpressions": [dict(expression)]}])
        return True
    changed = False
    for index, term in enumerate(terms):
        if _is_empty_term(term):
            continue
        expressions = term.get("matchExpressions")
        if not isinstance(expressions, list):
            edits.set((*_TERMS, index, "matchExpressions"), [dict(expression)])
            changed = True
        elif not any(_same_requirement(e, expression) for e in expressions):
            edits.append((*_TERMS, index, "matchExpressions"), dict(expression))
            changed = True
    return changed


def prefer(target: dict[str, Any] | Edits, expression: Requirement, weight: int) -> bool:
    """Add a preferred term for ``expression`` unless one with the same single expression exists."""
    edits = _edits(target)
    for item in edits.get(_PREFERRED_PATH) or []:
        expressions = ((item or {}).get("preference") or {}).get("matchExpressions") or []
        fields = ((item or {}).get("preference") or {}).get("matchFields") or []
        if len(expressions) == 1 and not fields and _same_requirement(expressions[0], expression):
            return False
    edits.append(_PREFERRED_PATH, {"weight": weight, "preference": {"matchExpressions": [dict(expression)]}})
    return True


def select(target: dict[str, Any] | Edits, key: str, value: str) -> bool:
    """Set ``nodeSelector[key] = value`` unless it is already so."""
    edits = _edits(target)
    selector = edits.get(("nodeSelector",))
    if isinstance(selector, dict) and selector.get(key) == value:
        return False
    edits.set(("nodeSelector", key), value)
    return True


def _effects_covered(existing: str, wanted: str) -> bool:
    return not existing or existing == wanted


def covers(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """True when toleration ``existing`` tolerates every taint ``wanted`` tolerates."""
    if not _effects_covered(existing.get("effect") or "", wanted.get("effect") or ""):
        return False
    # A time-limited NoExecute toleration is weaker than a permanent one.
    if (
        existing.get("tolerationSeconds") is not None
        and wanted.get("tolerationSeconds") is None
        and (existing.get("effect") or "NoExecute") == "NoExecute"
    ):
        return False
    existing_op = existing.get("operator") or "Equal"
    wanted_op = wanted.get("operator") or "Equal"
    existing_key = existing.get("key") or ""
    if existing_op == "Exists" and not existing_key:
        return True
    if existing_key != (wanted.get("key") or ""):
        return False
    if existing_op == "Exists":
        return True
    return wanted_op == "Equal" and (existing.get("value") or "") == (wanted.get("value") or "")


def tolerate(target: dict[str, Any] | Edits, toleration: Mapping[str, Any]) -> bool:
    """Add ``toleration`` unless an existing one already tolerates the same taints."""
    edits = _edits(target)
    if any(covers(t or {}, toleration) for t in edits.get(("tolerations",)) or []):
        return False
    edits.append(("tolerations",), dict(toleration))
    return True


def _without(items: list[Any], unwanted: Any) -> list[Any]:
    return [item for item in items if not unwanted(item)]


def withdraw(spec: dict[str, Any], record: Mapping[str, Any]) -> None:
    """Remove what noe added to ``spec`` earlier, as ``record`` lists it, pruning what becomes empty.

    A DaemonSet template that noe placed at CREATE carries noe's own
    architecture requirement; at UPDATE it must be decided afresh (its images may
    have changed), not mistaken for the user's own choice. Only entries equal to
    the recorded ones are removed, so anything the user wrote stays.
    """
    affinity_view = spec.get("affinity")
    node_affinity = affinity_view.get("nodeAffinity") if isinstance(affinity_view, dict) else None
    if not isinstance(node_affinity, dict):
        node_affinity = {}
    values = record.get("required")
    required = node_affinity.get(REQUIRED)
    if isinstance(values, list) and isinstance(required, dict) and isinstance(required.get("nodeSelectorTerms"), list):
        noe_requirement = requirement(ARCH_LABEL, "In", [str(v) for v in values])

        def is_noe_requirement(expression: Any) -> bool:
            return isinstance(expression, dict) and _same_requirement(expression, noe_requirement)

        kept = []
        for term in required["nodeSelectorTerms"]:
            expressions = term.get("matchExpressions") if isinstance(term, dict) else None
            if isinstance(expressions, list):
                remaining = _without(expressions, is_noe_requirement)
                if len(remaining) != len(expressions):
                    if remaining:
                        term["matchExpressions"] = remaining
                    else:
                        del term["matchExpressions"]
                    if _is_empty_term(term):
                        continue  # the term held nothing but noe's requirement
            kept.append(term)
        required["nodeSelectorTerms"] = kept
        if not kept:
            del node_affinity[REQUIRED]
    preferred_arch = record.get("preferred")
    preferred = node_affinity.get(PREFERRED)
    if isinstance(preferred_arch, str) and isinstance(preferred, list):
        noe_preference = requirement(ARCH_LABEL, "In", [preferred_arch])

        def is_noes(item: Any) -> bool:
            expressions = ((item or {}).get("preference") or {}).get("matchExpressions") or []
            return len(expressions) == 1 and _same_requirement(expressions[0], noe_preference)

        remaining_preferred = _without(preferred, is_noes)
        if remaining_preferred:
            node_affinity[PREFERRED] = remaining_preferred
        else:
            del node_affinity[PREFERRED]
    selected = record.get("nodeSelector")
    selector = spec.get("nodeSelector")
    if isinstance(selected, str) and isinstance(selector, dict) and selector.get(ARCH_LABEL) == selected:
        del selector[ARCH_LABEL]
        if not selector:
            del spec["nodeSelector"]
    added = record.get("tolerations")
    tolerations = spec.get("tolerations")
    if isinstance(added, list) and isinstance(tolerations, list):
        remaining_tolerations = _without(tolerations, lambda t: t in added)
        if remaining_tolerations:
            spec["tolerations"] = remaining_tolerations
        else:
            del spec["tolerations"]
    affinity = spec.get("affinity")
    if isinstance(affinity, dict) and affinity.get("nodeAffinity") == {}:
        del affinity["nodeAffinity"]
        if not affinity:
            del spec["affinity"]
