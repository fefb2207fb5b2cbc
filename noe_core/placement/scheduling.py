"""Editing nodeSelector, node affinity and tolerations without changing what the user meant.

Kubernetes ORs ``nodeSelectorTerms`` and ANDs what is inside one term, so a
requirement noe adds is ANDed into *every* existing term: appending a term of
its own would OR it and let the pod through the user's other terms. Every
helper is idempotent (it never adds what is already there) so mutating a
mutated pod changes nothing.

Helpers take an :class:`~noe_core.util.json_patch.Edits` over the pod spec's placement
fields, so each change they make is recorded as the JSON Patch operation the
webhook answers with, and return whether they changed anything. A plain dict
is accepted too (edited in place), for callers that do not need the operations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from noe_core.image.node_platform import (
    ARCH_LABEL,
    BETA_ARCH_LABEL,
    BETA_OS_LABEL,
    LEVEL_LABEL_PREFIX,
    OS_LABEL,
    WINDOWS_BUILD_LABEL,
)
from noe_core.util.json_patch import Edits, copy_json

ARCH_LABELS = (ARCH_LABEL, BETA_ARCH_LABEL)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

Requirement = dict[str, Any]
PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations")
"""The pod spec fields noe edits; an :class:`Edits` over a pod spec holds only these."""
_TERMS = ("affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms")
_PREFERRED_PATH = ("affinity", "nodeAffinity", PREFERRED)
_PLATFORM_KEYS = frozenset({ARCH_LABEL, BETA_ARCH_LABEL, OS_LABEL, BETA_OS_LABEL, WINDOWS_BUILD_LABEL})


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


def require_any(target: dict[str, Any] | Edits, terms: list[list[Requirement]]) -> bool:
    """AND "one of ``terms``" into the required node affinity: the cartesian product with the existing terms.

    Each non-empty existing term becomes one copy per new term, with that term's
    expressions appended (one new term: appended in place, one operation each);
    with no existing term the new terms become the terms. Empty terms stay as they
    are (they match nothing). Expressions are appended even when the term already
    has an equal one, so that :func:`withdraw` can take exactly noe's back off the
    end of each term.
    """
    edits = _edits(target)
    existing = edits.get(_TERMS)
    if not existing:
        edits.set(_TERMS, [{"matchExpressions": [dict(e) for e in term]} for term in terms])
        return True
    if len(terms) == 1:
        changed = False
        for index, term in enumerate(existing):
            if _is_empty_term(term):
                continue
            for expression in terms[0]:
                if isinstance(edits.get((*_TERMS, index, "matchExpressions")), list):
                    edits.append((*_TERMS, index, "matchExpressions"), dict(expression))
                else:
                    edits.set((*_TERMS, index, "matchExpressions"), [dict(expression)])
                changed = True
        return changed
    product: list[dict[str, Any]] = []
    for term in existing:
        if _is_empty_term(term):
            product.append(term)
            continue
        expressions = term.get("matchExpressions")
        kept = copy_json(expressions) if isinstance(expressions, list) else []
        for new in terms:
            product.append({**copy_json(term), "matchExpressions": [*kept, *(dict(e) for e in new)]})
    edits.set(_TERMS, product)
    return True


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
                if len(remaining) != len(expressions) and _left_empty(term, remaining):
                    continue  # the term held nothing but noe's requirement
            kept.append(term)
        required["nodeSelectorTerms"] = kept
        if not kept:
            del node_affinity[REQUIRED]
    recorded_terms = _recorded_terms(record.get("terms"))
    required = node_affinity.get(REQUIRED)
    if recorded_terms and isinstance(required, dict) and isinstance(required.get("nodeSelectorTerms"), list):
        kept_terms = _withdraw_terms(required["nodeSelectorTerms"], recorded_terms)
        required["nodeSelectorTerms"] = kept_terms
        if not kept_terms:
            del node_affinity[REQUIRED]
    recorded = record.get("preferred")
    preferred_archs = [recorded] if isinstance(recorded, str) else recorded if isinstance(recorded, list) else []
    preferred = node_affinity.get(PREFERRED)
    if preferred_archs and isinstance(preferred, list):
        noe_preferences = [requirement(ARCH_LABEL, "In", [str(arch)]) for arch in preferred_archs]

        def is_noes(item: Any) -> bool:
            expressions = ((item or {}).get("preference") or {}).get("matchExpressions") or []
            return len(expressions) == 1 and any(_same_requirement(expressions[0], p) for p in noe_preferences)

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


def _left_empty(term: dict[str, Any], remaining: list[Any]) -> bool:
    """Give ``term`` the expressions left once noe's are withdrawn; True when nothing is left of it."""
    if remaining:
        term["matchExpressions"] = remaining
    else:
        del term["matchExpressions"]
    return _is_empty_term(term)


def _recorded_terms(value: Any) -> list[list[dict[str, Any]]]:
    """The terms a placement record lists (``[[expression, ...], ...]``); anything malformed reads as none."""
    if not isinstance(value, list):
        return []
    terms = []
    for term in value:
        if isinstance(term, list) and term and all(isinstance(e, dict) for e in term):
            terms.append(term)
    return terms


def _withdraw_terms(terms: list[Any], recorded: list[list[dict[str, Any]]]) -> list[Any]:
    """Undo :func:`require_any`: take a recorded term's expressions off the end of each term that ends with
    them, drop the terms left empty, and keep one of the copies the product made of each user term."""
    kept: list[Any] = []
    seen: set[str] = set()
    for term in terms:
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        noe_term = _ending(expressions, recorded) if isinstance(expressions, list) else None
        if noe_term is None or not isinstance(expressions, list):
            kept.append(term)
            continue
        if _left_empty(term, expressions[: len(expressions) - len(noe_term)]):
            continue  # the term held nothing but noe's requirement
        key = json.dumps(term, sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept


def _ending(expressions: list[Any], recorded: list[list[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """The recorded term ``expressions`` ends with, if any (each starts with its architecture expression, so
    no recorded term ends another)."""
    for noe_term in recorded:
        size = len(noe_term)
        tail = expressions[len(expressions) - size :] if size <= len(expressions) else []
        if tail and all(isinstance(e, dict) and _same_requirement(e, m) for e, m in zip(tail, noe_term, strict=True)):
            return noe_term
    return None


def is_platform_key(key: object) -> bool:
    """A node label noe's terms use: OS, architecture, Windows build, x86-64 level (GA or beta)."""
    return isinstance(key, str) and (key in _PLATFORM_KEYS or key.startswith(LEVEL_LABEL_PREFIX))


def split_platform_terms(spec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``spec`` as two placement specs: without the platform requirements, and with only them.

    Required terms keep their order; a term left empty on one side is dropped (the same term
    twice, once noe's platforms are taken out of terms noe multiplied, is kept once). The first
    spec is what the pod was like before noe required platforms of it — deciding it again
    gives what noe would require — and the second the platforms the pod requires now.
    """
    rest: dict[str, Any] = {k: v for k, v in spec.items() if k not in ("nodeSelector", "affinity")}
    only: dict[str, Any] = {}
    selector = spec.get("nodeSelector") or {}
    if isinstance(selector, Mapping):
        if mine := {k: v for k, v in selector.items() if is_platform_key(k)}:
            only["nodeSelector"] = mine
        if theirs := {k: v for k, v in selector.items() if not is_platform_key(k)}:
            rest["nodeSelector"] = theirs
    affinity = copy_json(spec.get("affinity")) if isinstance(spec.get("affinity"), Mapping) else None
    node_affinity = affinity.get("nodeAffinity") if affinity else None
    required = node_affinity.pop(REQUIRED, None) if isinstance(node_affinity, dict) else None
    if isinstance(required, Mapping):
        kept: list[dict[str, Any]] = []
        platform: list[dict[str, Any]] = []
        for term in required.get("nodeSelectorTerms") or ():
            if not isinstance(term, Mapping):
                continue
            expressions = [e for e in term.get("matchExpressions") or () if isinstance(e, Mapping)]
            other = {**term, "matchExpressions": [e for e in expressions if not is_platform_key(e.get("key"))]}
            if not other["matchExpressions"]:
                del other["matchExpressions"]
            if not _is_empty_term(other) and other not in kept:
                kept.append(other)
            if ours := [e for e in expressions if is_platform_key(e.get("key"))]:
                platform.append({"matchExpressions": ours})
        if kept:
            node_affinity[REQUIRED] = {**required, "nodeSelectorTerms": kept}  # type: ignore[index]
        if platform:
            only["affinity"] = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": platform}}}
    if affinity:
        if isinstance(node_affinity, dict) and not node_affinity:
            del affinity["nodeAffinity"]
        if affinity:
            rest["affinity"] = affinity
    return rest, only
