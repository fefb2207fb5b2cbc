"""Kubernetes label selectors (``matchLabels`` and ``matchExpressions``), read once and matched as the API does.

Placement policies choose namespaces and pods with them. The semantics are the
API machinery's: every ``matchLabels`` pair and every expression must hold;
``In`` needs the key with one of the values, ``NotIn`` holds when the key is
absent or has another value, ``Exists`` / ``DoesNotExist`` look at the key only.
An empty selector (``{}``) selects everything. A malformed selector raises
:class:`InvalidSelector` naming the field, so a policy carrying one is refused
whole rather than half-applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from noe_core.errors import InvalidSelector
from noe_core.name.kubernetes import is_label_key, is_label_value

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
OPERATORS: tuple[Operator, ...] = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_REQUIREMENTS = 64
"""More requirements than any real selector needs; a hostile policy cannot make every admission slow."""
MAX_VALUES = 256


@dataclass(frozen=True)
class Requirement:
    """One ``key operator [values]`` condition."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        present = self.key in labels and labels[self.key] in self.values
        return present if self.operator == "In" else not present


@dataclass(frozen=True)
class LabelSelector:
    """A parsed selector: all requirements must hold (``matchLabels`` become ``In`` with one value)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def everything(self) -> bool:
        """True for ``{}``: it selects every object."""
        return not self.requirements


EVERYTHING = LabelSelector()


def parse_label_selector(obj: object, where: str) -> LabelSelector:
    """Read a ``LabelSelector`` object; raise :class:`InvalidSelector` naming ``where`` and the bad part."""
    if not isinstance(obj, Mapping):
        raise InvalidSelector(f"{where} must be an object with matchLabels and/or matchExpressions")
    unknown = sorted(str(key) for key in obj if key not in ("matchLabels", "matchExpressions"))
    if unknown:
        raise InvalidSelector(f"{where}: unknown field {unknown[0]!r} (use matchLabels or matchExpressions)")
    requirements: list[Requirement] = []
    labels = obj.get("matchLabels")
    if labels is not None:
        if not isinstance(labels, Mapping):
            raise InvalidSelector(f"{where}.matchLabels must be an object of label keys to values")
        for key, value in labels.items():
            _check_key(key, f"{where}.matchLabels")
            if not isinstance(value, str) or not is_label_value(value):
                raise InvalidSelector(f"{where}.matchLabels[{key!r}]: {value!r} is not a label value")
            requirements.append(Requirement(key, "In", frozenset((value,))))
    expressions = obj.get("matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            raise InvalidSelector(f"{where}.matchExpressions must be an array")
        for index, expression in enumerate(expressions):
            requirements.append(_expression(expression, f"{where}.matchExpressions[{index}]"))
    if len(requirements) > MAX_REQUIREMENTS:
        raise InvalidSelector(f"{where}: {len(requirements)} requirements; at most {MAX_REQUIREMENTS} are accepted")
    return LabelSelector(tuple(requirements))


def _check_key(key: object, where: str) -> None:
    if not isinstance(key, str) or not is_label_key(key):
        raise InvalidSelector(f"{where}: {key!r} is not a label key")


def _expression(obj: object, where: str) -> Requirement:
    if not isinstance(obj, Mapping):
        raise InvalidSelector(f"{where} must be an object with key, operator and values")
    unknown = sorted(str(key) for key in obj if key not in ("key", "operator", "values"))
    if unknown:
        raise InvalidSelector(f"{where}: unknown field {unknown[0]!r}")
    key = obj.get("key")
    _check_key(key, f"{where}.key")
    assert isinstance(key, str)
    operator = obj.get("operator")
    if operator not in OPERATORS:
        raise InvalidSelector(f"{where}.operator: {operator!r} is not one of {', '.join(OPERATORS)}")
    values = obj.get("values")
    if values is None:
        values = []
    if not isinstance(values, list) or len(values) > MAX_VALUES:
        raise InvalidSelector(f"{where}.values must be an array of at most {MAX_VALUES} label values")
    for value in values:
        if not isinstance(value, str) or not is_label_value(value):
            raise InvalidSelector(f"{where}.values: {value!r} is not a label value")
    if operator in ("In", "NotIn") and not values:
        raise InvalidSelector(f"{where}: operator {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidSelector(f"{where}: operator {operator} takes no values")
    return Requirement(key, operator, frozenset(values))
