"""Policy files: both kinds, Namespace labels, List documents; invalid policies kept aside with their reason."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core.errors import InvalidSettings
from noe_core.policies import read_documents

API = "arch.noe.adevinta.com/v1alpha1"


def doc(kind: str, name: str, spec: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def test_policies_namespaces_and_lists() -> None:
    found = read_documents(
        [
            doc("ClusterPlacementPolicy", "base", {"priority": 1}),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}},
            {"apiVersion": "v1", "kind": "List", "items": [doc("PlacementPolicy", "p", {}, namespace="team-a")]},
        ],
        "policies.yaml",
    )
    assert [str(p.ref) for p in found.policies] == ["ClusterPlacementPolicy/base", "PlacementPolicy/team-a/p"]
    assert found.namespaces == {"team-a": {"env": "prod"}}
    assert found.rejected == ()


def test_an_invalid_policy_is_kept_aside_with_its_reason() -> None:
    found = read_documents(
        [doc("ClusterPlacementPolicy", "bad", {"priority": 5000}), doc("ClusterPlacementPolicy", "good", {})], "f.yaml"
    )
    assert [str(p.ref) for p in found.policies] == ["ClusterPlacementPolicy/good"]
    (rejected,) = found.rejected
    assert rejected.reason == "PriorityOutOfRange"
    assert (
        str(rejected) == "ClusterPlacementPolicy/bad: PriorityOutOfRange: spec.priority: 5000 is not between 0 and 1000"
    )


def test_a_name_defined_twice_is_refused() -> None:
    found = read_documents([doc("ClusterPlacementPolicy", "a", {}), doc("ClusterPlacementPolicy", "a", {})], "f")
    assert len(found.policies) == 1
    assert [r.reason for r in found.rejected] == ["DuplicateName"]
    combined = found + found  # two files defining the same object: one kept, the other refused too
    assert len(combined.policies) == 1 and [r.reason for r in combined.rejected] == ["DuplicateName"] * 3


def test_other_kinds_stop_the_command() -> None:
    with pytest.raises(InvalidSettings, match=r"f\.yaml document 1: kind 'Pod'"):
        read_documents([{"kind": "Pod", "metadata": {"name": "x"}}], "f.yaml")
