"""Bounded JSON and YAML: the one depth check, and the loaders that run it."""

from __future__ import annotations

import pytest

from noe_core.util.safe_load import MAX_DEPTH, TooComplex, check_depth, load_json, load_json_cut


def _nested(depth: int) -> object:
    value: object = []
    for level in range(depth - 1):
        value = [value] if level % 2 else {"k": value}
    return value


def test_check_depth_accepts_the_limit_and_rejects_one_more() -> None:
    check_depth(_nested(MAX_DEPTH))
    check_depth({"a": "x" * 10, "b": [1, 2, {"c": None}]})
    with pytest.raises(TooComplex, match=f"nested deeper than {MAX_DEPTH} levels"):
        check_depth(_nested(MAX_DEPTH + 1))
    assert isinstance(TooComplex("x"), ValueError)


def test_load_json_runs_the_depth_check() -> None:
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    with pytest.raises(TooComplex, match="nested deeper"):
        load_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_one_hostile_object_in_a_list_is_cut_to_stay_too_deep_and_the_others_are_read() -> None:
    hostile = "[" * 5000 + '"x"' + "]" * 5000
    text = '{"items": [{"name": "a [{\\"\\\\"}, {"spec": ' + hostile + '}, {"name": "b"}]}'
    doc = load_json_cut(text)
    assert doc["items"][0] == {"name": 'a [{"\\'} and doc["items"][2] == {"name": "b"}
    with pytest.raises(TooComplex):
        check_depth(doc["items"][1], MAX_DEPTH)  # still refused by whoever reads it
    assert load_json_cut(b'{"a": [1, 2]}') == {"a": [1, 2]}  # ordinary JSON as json.loads reads it
    with pytest.raises(ValueError):
        load_json_cut("{not json")
