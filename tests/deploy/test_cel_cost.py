"""The rule-cost estimator itself (tests/support/cel_cost.py), on expressions whose cost the real one fixes.

Each expected number is what cel-go 0.16 / Kubernetes 1.28 compute, derived in the comment from their
cost rules (and, where marked, the figure their own test suites assert for the same schema and rule).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cel_cost import (
    MAX_UINT64,
    PER_RULE_LIMIT,
    CelType,
    RuleCost,
    UnsupportedCel,
    decl_type,
    estimate,
    refusal,
    rule_costs,
)

pytestmark = pytest.mark.deploy

OBJECT: dict[str, Any] = {"type": "object"}
UNBOUNDED_STRING = 3 * 1024 * 1024 - 2  # the request limit less the two quotes


def cost(rule: str, schema: dict[str, Any] = OBJECT, rule_only: bool = True) -> int:
    self_type = decl_type(schema)
    assert self_type is not None
    return estimate(rule, self_type, rule_only=rule_only)[0].max


def array(items: dict[str, Any], max_items: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


def string(max_length: int | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", **extra}
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("true", 0),  # a constant costs nothing
        ("self", 1),  # an identifier costs 1
        ("[1, 2, 3]", 10),  # a list literal's base cost (its constants are free)
        ("2 in [1, 2, 3]", 13),  # in on a list: its size (3) + the literal (10)
        ("{'a': 1}", 30),  # a map literal's base cost
        ("'a' in {'a': 1}", 31),  # in on a map: 1 + the literal (30)
        ("1 < 2", 1),  # an O(1) call
        ("true || false", 0),  # || adds both sides, no call cost
        ("true ? 1 : 2", 0),  # ?: the condition plus the dearer branch
        ("size('123')", 1),
        ("[1, 2, 3].all(x, true)", 20),  # 10 + 3 x (loop 2 + step 1) + result 1 — cel-go's own test says 20
        ("'abc'.startsWith('a')", 1),  # ceil(1 x 0.1)
    ],
)
def test_constructs_cost_what_cel_go_charges(rule: str, expected: int) -> None:
    assert cost(rule, rule_only=False) == expected


def test_a_rule_must_give_a_bool() -> None:
    with pytest.raises(UnsupportedCel, match="bool"):
        cost("size('123')")


@pytest.mark.parametrize(
    ("schema", "rule", "expected"),
    [
        # Kubernetes 1.28's TestCostEstimation figures, same schema and rule:
        # unbounded number list: (3 MiB - 2) / (1 + 1) items x (loop 2 + step 1) + 2
        (array({"type": "number"}), "self.all(x, true)", 4718591),
        (array({"type": "number"}, 10), "self.all(x, true)", 32),
        (array(string()), "self.all(x, true)", 3145727),  # a string is at least 2 bytes ("")
        (array({"type": "boolean"}), "self.all(x, true)", 1887437),  # a bool at least 4 (true)
        (array({"type": "number"}, 10), "self.all(x, self.all(y, true))", 352),  # nesting multiplies
        (array({"type": "number"}, 10), "self.all(x, self.all(y, self.all(z, true)))", 3552),
        # an unbounded string: ceil((3 MiB - 2) x 0.1) x ceil(4 x 0.1) + 1
        (string(), "self.contains('test')", 314574),
        (string(10), "self.contains('test')", 5),  # maxLength 10 is 40 bytes: 4 x 1 + 1
        (string(), 'size(self + "hello") > size("hello")', 314578),
        (string(4), 'size(self + "hello") > size("hello")', 7),
        (string(), 'self.matches("x")', 314574),
        (string(50), 'self.matches("x")', 22),
        (string(0), 'self == "x"', 1),  # the smaller side is 0 bytes: equality costs 0
        (array(string(), 8), "self[1] == self[1]", 314577),  # list items unbounded strings
        (array({"type": "number"}), "self[1] == 0.0", 2),  # a number reached by path has size 0
        (array(string(format="date-time")), "self.all(x, true)", 428963),
        (
            {"type": "object", "additionalProperties": string(10), "maxProperties": 10},
            "self.all(x, x.contains(self[x]))",
            72,  # a map key has size 0 in the server's declarations, so contains() costs only its operands
        ),
    ],
)
def test_schema_bounds_as_kubernetes_1_28_applies_them(schema: dict[str, Any], rule: str, expected: int) -> None:
    assert cost(rule, schema) == expected


def test_an_enum_does_not_bound_a_string() -> None:
    enum_only = string(enum=["In", "NotIn"])
    assert cost("self.startsWith(self)", enum_only) == 1 + 1 + -(-UNBOUNDED_STRING // 10)
    assert cost("self.startsWith(self)", string(5, enum=["In", "NotIn"])) == 1 + 1 + 2  # 20 bytes x 0.1


def test_a_map_or_filter_result_is_unbounded_so_in_on_it_saturates() -> None:
    schema = array(string(8), 16)
    assert cost("'a' in self.filter(s, s == 'a')", schema) == MAX_UINT64
    assert cost("'a' in self.map(s, s)", schema) == MAX_UINT64
    assert cost("'a' in self", schema) < 30  # 16 + 1 + …: the list itself is bounded


def test_comprehension_over_a_map_reads_keys() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 5}
    assert cost("self.all(k, self[k] > 0)", schema) == 1 + 1 + 5 * (2 + 1 + (1 + (1 + 1 + 1) + 0))


@pytest.mark.parametrize(
    "rule",
    [
        "self.name.lowerAscii() == 'a'",  # a Kubernetes library function
        "self.name == 'a\\nb'",  # an escape sequence
        "undeclared == 1",
        "self.missing == 1",
        "self.name.size() == 1 && type(self) == string",
    ],
)
def test_unmodelled_constructs_are_refused_not_guessed(rule: str) -> None:
    schema = {"type": "object", "properties": {"name": string(5)}}
    with pytest.raises(UnsupportedCel):
        cost(rule, schema)


def test_int_or_string_is_refused() -> None:
    with pytest.raises(UnsupportedCel, match="int-or-string"):
        decl_type({"x-kubernetes-int-or-string": True})


def test_cardinality_is_the_product_of_the_bounds_above_the_rule() -> None:
    rule = {"rule": "self.x > 0"}
    inner = {"type": "object", "properties": {"x": {"type": "integer"}}, "x-kubernetes-validations": [rule]}
    crd = {
        "metadata": {"name": "things.example.com"},
        "spec": {
            "versions": [
                {
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "bounded": array(array(inner, 3), 4),
                                "unbounded": array(inner),
                            },
                        }
                    }
                }
            ]
        },
    }
    by_where = {c.where: c for c in rule_costs(crd)}
    assert by_where[".bounded[][] rule 0"].cardinality == 12
    # an unbounded list above: the request size over the smallest JSON the node can be ({} is 2 bytes, + a comma)
    assert by_where[".unbounded[] rule 0"].cardinality == 3 * 1024 * 1024 // 3


def test_refusal_words_the_factor_as_the_api_server_does() -> None:
    def at(total: int) -> RuleCost:
        return RuleCost("c", "w", "r", total, 1, ())

    assert refusal(at(PER_RULE_LIMIT)) is None
    assert refusal(at(PER_RULE_LIMIT * 3)) == "estimated rule cost exceeds budget by factor of 3.0x"
    assert refusal(at(PER_RULE_LIMIT * 101)) == "estimated rule cost exceeds budget by factor of more than 100x"


def test_reached_nodes_say_whether_the_schema_bounds_them() -> None:
    schema = {
        "type": "object",
        "properties": {"a": string(), "b": string(3), "c": array(string(2), 4), "d": {"type": "integer"}},
    }
    self_type = decl_type(schema)
    assert isinstance(self_type, CelType)
    _, reached = estimate("self.a == self.b && self.c.all(x, x == 'y') && self.d > 0", self_type)
    bounds = {r.where: r.bounded for r in reached if r.kind in ("string", "list", "map")}
    assert bounds == {".a": False, ".b": True, ".c": True, ".c[]": True}
