"""Label selectors as the API machinery reads and matches them: tables of selectors, labels and refusals."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidSelector
from noe_core.k8s.label_selector import MAX_REQUIREMENTS, parse_label_selector

TEAM_A = {"team": "a", "tier": "web"}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),
        ({}, TEAM_A, True),
        ({"matchLabels": {"team": "a"}}, TEAM_A, True),
        ({"matchLabels": {"team": "b"}}, TEAM_A, False),
        ({"matchLabels": {"team": "a", "tier": "db"}}, TEAM_A, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}, TEAM_A, True),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]}, TEAM_A, False),
        ({"matchExpressions": [{"key": "missing", "operator": "In", "values": ["x"]}]}, TEAM_A, False),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]}, TEAM_A, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, TEAM_A, False),
        ({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["a"]}]}, TEAM_A, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, TEAM_A, True),
        ({"matchExpressions": [{"key": "missing", "operator": "Exists"}]}, TEAM_A, False),
        ({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"}]}, TEAM_A, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist", "values": []}]}, TEAM_A, False),
        (
            {"matchLabels": {"tier": "web"}, "matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]},
            TEAM_A,
            False,
        ),
        ({"matchLabels": {"team": ""}}, {"team": ""}, True),
    ],
)
def test_matches_as_the_api_does(selector: dict[str, object], labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector, "spec.podSelector").matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ([], "spec.podSelector must be an object"),
        ({"matchLabel": {}}, "unknown field 'matchLabel'"),
        ({"matchLabels": []}, "matchLabels must be an object"),
        ({"matchLabels": {"bad key!": "a"}}, "'bad key!' is not a label key"),
        ({"matchLabels": {"team": "a b"}}, "'a b' is not a label value"),
        ({"matchLabels": {"team": 3}}, "3 is not a label value"),
        ({"matchExpressions": {}}, "matchExpressions must be an array"),
        ({"matchExpressions": ["team"]}, r"matchExpressions\[0\] must be an object"),
        ({"matchExpressions": [{"key": "team", "operator": "Has"}]}, "'Has' is not one of In, NotIn"),
        ({"matchExpressions": [{"key": "team", "operator": "In"}]}, "operator In needs at least one value"),
        ({"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]}, "Exists takes no values"),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": "a"}]}, "values must be an array"),
        ({"matchExpressions": [{"operator": "Exists"}]}, r"matchExpressions\[0\]\.key: None is not a label key"),
        ({"matchExpressions": [{"key": "t", "operator": "Exists", "extra": 1}]}, "unknown field 'extra'"),
        ({"matchLabels": {f"k{i}": "v" for i in range(MAX_REQUIREMENTS + 1)}}, "at most 64"),
    ],
)
def test_refusals_name_the_field(selector: object, message: str) -> None:
    with pytest.raises(InvalidSelector, match=message):
        parse_label_selector(selector, "spec.podSelector")


def test_empty_selector_selects_everything() -> None:
    assert parse_label_selector({}, "x").everything
    assert not parse_label_selector({"matchLabels": {"a": "b"}}, "x").everything
