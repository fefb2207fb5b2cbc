"""Affinity / toleration editing helpers: AND into every term, never duplicate."""

from __future__ import annotations

import json
from typing import Any

import pytest

from noe_core import testing
from noe_core.image.node_platform import ARCH_LABEL
from noe_core.placement.scheduling import (
    architecture_selection,
    covers,
    prefer,
    require,
    require_any,
    requirement,
    select,
    tolerate,
    withdraw,
)
from noe_core.util.json_patch import Edits

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
ARCH_IN = requirement(ARCH_LABEL, "In", ["amd64", "arm64"])


def _terms(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def _spec(**kwargs: Any) -> dict[str, Any]:
    spec: dict[str, Any] = testing.pod(**kwargs)["spec"]
    return spec


def test_require_creates_one_term_when_none() -> None:
    spec = _spec()
    assert require(spec, ARCH_IN)
    assert spec["affinity"] == _terms({"matchExpressions": [ARCH_IN]})
    assert not require(spec, requirement(ARCH_LABEL, "In", ["arm64", "amd64"]))  # same meaning


def test_require_ands_into_every_term_and_skips_empty_terms() -> None:
    zone1 = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    pinned = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    spec = _spec(affinity=_terms(zone1, pinned, {}))
    assert require(spec, ARCH_IN)
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][-1] == ARCH_IN
    assert terms[1]["matchExpressions"] == [ARCH_IN] and terms[1]["matchFields"] == pinned["matchFields"]
    assert terms[2] == {}  # an empty term matches nothing; adding to it would widen placement
    assert not require(spec, ARCH_IN)


def test_require_with_empty_term_list_or_nulls() -> None:
    spec = _spec(affinity={"nodeAffinity": {REQ: {"nodeSelectorTerms": []}}})
    assert require(spec, ARCH_IN)
    assert len(spec["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]) == 1
    spec = _spec(affinity={"nodeAffinity": None, "podAffinity": {"x": 1}})
    assert require(spec, ARCH_IN)
    assert spec["affinity"]["podAffinity"] == {"x": 1}


def test_prefer_is_idempotent_and_keeps_existing_terms() -> None:
    existing = {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
    spec = _spec(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [existing]}})
    want = requirement(ARCH_LABEL, "In", ["arm64"])
    assert prefer(spec, want, 100)
    preferred = spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [existing, {"weight": 100, "preference": {"matchExpressions": [want]}}]
    assert not prefer(spec, want, 30)


def test_select() -> None:
    spec = _spec(node_selector={"a": "b"})
    assert select(spec, ARCH_LABEL, "arm64")
    assert spec["nodeSelector"] == {"a": "b", ARCH_LABEL: "arm64"}
    assert not select(spec, ARCH_LABEL, "arm64")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"nodeSelector": {"kubernetes.io/arch": "arm64"}}, "nodeSelector sets kubernetes.io/arch=arm64"),
        ({"nodeSelector": {"beta.kubernetes.io/arch": "amd64"}}, "nodeSelector sets beta.kubernetes.io/arch"),
        (
            {
                "affinity": _terms(
                    {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                    {"matchExpressions": [{"key": "beta.kubernetes.io/arch", "operator": "Exists"}]},
                )
            },
            "term 1 has a beta.kubernetes.io/arch expression",
        ),
        (
            {"affinity": _terms({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]})},
            "pins the node by metadata.name",
        ),
        ({"nodeSelector": {"zone": "a"}}, None),
        ({"affinity": _terms({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})}, None),
        ({}, None),
    ],
)
def test_architecture_selection(spec: dict[str, Any], expected: str | None) -> None:
    found = architecture_selection(spec)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found


ARM_TAINT = {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        (ARM_TAINT, True),
        ({"key": "arch", "value": "arm64", "effect": "NoSchedule"}, True),  # operator defaults to Equal
        ({"key": "arch", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": "arch", "operator": "Equal", "value": "arm64"}, True),  # every effect
        ({"key": "arch", "operator": "Equal", "value": "arm", "effect": "NoSchedule"}, False),
        ({"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"key": "arch", "operator": "Exists", "tolerationSeconds": 30}, False),
    ],
)
def test_covers(existing: dict[str, Any], expected: bool) -> None:
    assert covers(existing, ARM_TAINT) is expected


def test_tolerate_adds_once() -> None:
    spec = _spec(tolerations=[{"key": "other", "operator": "Exists"}])
    assert tolerate(spec, ARM_TAINT)
    assert not tolerate(spec, ARM_TAINT)
    assert spec["tolerations"] == [{"key": "other", "operator": "Exists"}, ARM_TAINT]
    covered = _spec(tolerations=[{"operator": "Exists"}])
    assert not tolerate(covered, ARM_TAINT)


def _required(spec: dict[str, Any]) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = spec["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]
    return terms


LINUX_ANY = [requirement("kubernetes.io/os", "In", ["linux"]), requirement(ARCH_LABEL, "In", ["amd64", "arm64"])]
WINDOWS_2022 = [
    requirement("kubernetes.io/os", "In", ["windows"]),
    requirement(ARCH_LABEL, "In", ["amd64"]),
    requirement("node.kubernetes.io/windows-build", "In", ["10.0.20348"]),
]
ZONE_1 = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
ZONE_2 = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}


def test_require_any_is_the_product_with_the_users_terms() -> None:
    spec = _spec()
    assert require_any(spec, [LINUX_ANY, WINDOWS_2022])
    assert _required(spec) == [{"matchExpressions": LINUX_ANY}, {"matchExpressions": WINDOWS_2022}]
    spec = _spec(affinity=_terms(ZONE_1, ZONE_2, {}))
    assert require_any(spec, [LINUX_ANY, WINDOWS_2022])
    zone_1, zone_2 = ZONE_1["matchExpressions"], ZONE_2["matchExpressions"]
    assert _required(spec) == [
        {"matchExpressions": [*zone_1, *LINUX_ANY]},
        {"matchExpressions": [*zone_1, *WINDOWS_2022]},
        {"matchExpressions": [*zone_2, *LINUX_ANY]},
        {"matchExpressions": [*zone_2, *WINDOWS_2022]},
        {},  # matches nothing, and still does
    ]


def test_require_any_of_one_term_appends_to_each_term_even_what_it_has() -> None:
    own = {"matchExpressions": [requirement("kubernetes.io/os", "In", ["linux"])]}
    spec = _spec(affinity=_terms(own))
    edits = Edits(spec)
    assert require_any(edits, [LINUX_ANY])
    assert _required(spec) == [{"matchExpressions": [LINUX_ANY[0], *LINUX_ANY]}]
    assert [op["op"] for op in edits.operations()] == ["add", "add"]  # one per expression, no rewrite


def test_withdrawing_recorded_terms_gives_back_the_users_terms() -> None:
    own_os = {"matchExpressions": [requirement("kubernetes.io/os", "In", ["windows"])]}
    for users in ([], [ZONE_1], [ZONE_1, ZONE_2, {}], [own_os], [own_os, ZONE_1]):
        spec = _spec(affinity=_terms(*users) if users else None)
        before = json.loads(json.dumps(spec))
        require_any(spec, [LINUX_ANY, WINDOWS_2022])
        withdraw(spec, {"terms": [LINUX_ANY, WINDOWS_2022]})
        assert spec == before, users
        require_any(spec, [WINDOWS_2022])
        withdraw(spec, {"terms": [WINDOWS_2022]})
        assert spec == before, users


def test_a_malformed_record_withdraws_nothing() -> None:
    spec = _spec(affinity=_terms(ZONE_1))
    before = json.loads(json.dumps(spec))
    for record in ({"terms": "x"}, {"terms": [["x"]]}, {"terms": [[]]}, {"terms": [[{"key": "zone"}]]}):
        withdraw(spec, record)
        assert spec == before
