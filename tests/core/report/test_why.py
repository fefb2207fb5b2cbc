"""``noe why``'s verdicts, offline: the pipeline's Decision for the pod as admitted, the Nodes, the pod's state."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core import testing
from noe_core.image.image_platforms import LookupFailure
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.admitted import as_admitted, noe_terms
from noe_core.placement.node_fit import NodeFacts
from noe_core.placement.scheduling import split_platform_terms
from noe_core.policies.merge import FIELD_FLAGS
from noe_core.policies.selection import _ATTRIBUTES
from noe_core.report.why import PodState, Why, explain, table

LOOKUPS = testing.platforms({"arm:1": ["linux/arm64"]})


def node(name: str, arch: str, *taints: str) -> NodeFacts:
    raw = testing.node(name, arch, taints=taints)
    raw["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return NodeFacts.from_node(raw)


def why_of(pod: dict[str, Any], nodes: list[NodeFacts], lookups: Any = LOOKUPS, **state: Any) -> Why:
    workload = read_workload(pod, POD)
    before = as_admitted(workload) or workload
    decision = testing.decide(before.obj, lookups)
    terms = noe_terms(decision, workload)
    return explain(
        PodState.from_pod({**pod, **state}),
        images=workload.images,
        decision=decision,
        terms=terms,
        own_terms=terms is None and bool(split_platform_terms(workload.spec)[1]),
        nodes=nodes,
        tolerations=workload.spec.get("tolerations") or [],
        policies=(),
    )


def placed(**spec: Any) -> dict[str, Any]:
    pod = testing.decide(testing.pod(["arm:1"], name="web"), LOOKUPS).obj
    pod["spec"].update(spec)
    return pod


@pytest.mark.parametrize(
    ("pod", "nodes", "verdict"),
    [
        (placed(nodeName="a1"), [node("a1", "arm64")], "placed"),
        (placed(nodeName="x1"), [node("x1", "amd64")], "misplaced"),
        (placed(), [node("x1", "amd64")], "pending-no-node"),
        (placed(), [node("a1", "arm64", "arch=arm64:NoSchedule")], "pending-no-node"),
        (placed(), [node("a1", "arm64")], "pending-other"),
        (testing.pod(["arm:1"], node_selector={"kubernetes.io/arch": "arm64"}), [node("a1", "arm64")], "not-placed"),
        (testing.pod(["arm:1"]), [node("a1", "arm64")], "not-placed"),
    ],
)
def test_each_verdict(pod: dict[str, Any], nodes: list[NodeFacts], verdict: str) -> None:
    answer = why_of(pod, nodes)
    assert answer.verdict == verdict, answer.message
    assert table(answer).splitlines()[1] == f"Verdict:   {verdict}"


def test_unknown_when_a_lookup_failed_and_the_fallback_is_reported() -> None:
    failing = {"arm:1": LookupFailure("registry.example answered 503", temporary=True)}
    assert why_of(testing.pod(["arm:1"]), [node("a1", "arm64")], failing).verdict == "unknown"
    fell_back = placed(nodeName="a1")
    fell_back["metadata"]["labels"] = {"arch.noe.adevinta.com/fallback": "true"}
    assert why_of(fell_back, [node("a1", "arm64")]).message.endswith(
        "(its fallback architecture: an image could not be inspected)"
    )


def test_every_merged_field_is_judged_by_the_policy_selection() -> None:
    assert set(_ATTRIBUTES) == set(FIELD_FLAGS)
