"""The nodes that can take a pod on noe's terms, and the line naming what keeps the rest out."""

from __future__ import annotations

from noe_core import testing
from noe_core.image.offer import ANYWHERE, Offer, PairOffer
from noe_core.placement.node_fit import NodeFacts, fit

ARM64_ONLY = Offer({("linux", "arm64"): ANYWHERE})
EITHER = Offer({("linux", "arm64"): ANYWHERE, ("linux", "amd64"): ANYWHERE})


def _facts(*nodes: dict[str, object]) -> list[NodeFacts]:
    return [NodeFacts.from_node(n) for n in nodes]


def _ready(node: dict[str, object], ready: bool = True) -> dict[str, object]:
    node["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return node


def test_an_empty_arm64_pool_matches_nothing_and_says_so() -> None:
    nodes = _facts(*(_ready(testing.node(f"x{i}", "amd64")) for i in range(3)))
    result = fit(ARM64_ONLY, nodes, [], levels=False)
    assert not result.satisfiable
    assert result.missing() == "no Ready linux/arm64 node"
    assert result.as_data() == {
        "total": 3,
        "matching": 0,
        "by_architecture": {
            "amd64": {"total": 3, "ready": 3, "matching": 0},
            "arm64": {"total": 0, "ready": 0, "matching": 0},
        },
    }


def test_a_tainted_arm64_pool_names_the_taint_and_a_toleration_opens_it() -> None:
    nodes = _facts(
        *(_ready(testing.node(f"a{i}", "arm64", taints=["arch=arm64:NoSchedule"])) for i in range(3)),
        _ready(testing.node("x0", "amd64")),
    )
    result = fit(ARM64_ONLY, nodes, [], levels=False)
    assert result.missing() == "no Ready linux/arm64 node; 3 arm64 nodes are tainted arch=arm64:NoSchedule"
    assert result.by_architecture["arm64"].ready == 3
    tolerated = fit(ARM64_ONLY, nodes, [{"key": "arch", "value": "arm64", "effect": "NoSchedule"}], levels=False)
    assert tolerated.matching == 3 and tolerated.satisfiable


def test_prefer_no_schedule_never_blocks() -> None:
    nodes = _facts(_ready(testing.node("a0", "arm64", taints=["spot=true:PreferNoSchedule"])))
    assert fit(ARM64_ONLY, nodes, [], levels=False).matching == 1


def test_not_ready_and_cordoned_nodes_take_no_pod() -> None:
    cordoned = _ready(testing.node("a1", "arm64"))
    cordoned["spec"] = {"unschedulable": True}
    nodes = _facts(_ready(testing.node("a0", "arm64"), ready=False), cordoned, testing.node("a2", "arm64"))
    result = fit(ARM64_ONLY, nodes, [], levels=False)
    assert result.matching == 0
    assert result.missing() == ("no Ready linux/arm64 node; 2 arm64 nodes are not Ready; 1 arm64 node is cordoned")
    assert result.by_architecture["arm64"].total == 3 and result.by_architecture["arm64"].ready == 0


def test_either_architecture_counts_per_architecture() -> None:
    nodes = _facts(_ready(testing.node("a0", "arm64")), _ready(testing.node("x0", "amd64")))
    result = fit(EITHER, nodes, [], levels=False)
    assert result.matching == 2
    assert {a: c.matching for a, c in result.by_architecture.items()} == {"amd64": 1, "arm64": 1}


def test_an_x86_64_level_counts_only_with_levels() -> None:
    v3 = Offer({("linux", "amd64"): PairOffer(any_build=3)})
    nodes = _facts(
        _ready(testing.node("x0", "amd64", x86_64_level=2)), _ready(testing.node("x1", "amd64", x86_64_level=3))
    )
    assert fit(v3, nodes, [], levels=True).matching == 1
    assert (
        "1 amd64 node is of a Windows build or x86-64 level the images lack"
        in fit(v3, nodes, [], levels=True).missing()
    )
    assert fit(v3, nodes, [], levels=False).matching == 2


def test_the_architecture_falls_back_to_node_info_and_malformed_parts_read_as_absent() -> None:
    node = {
        "metadata": {"name": "n", "labels": "nope"},
        "spec": {"taints": ["bad"]},
        "status": {
            "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    facts = NodeFacts.from_node(node)
    assert (facts.platform.os, facts.platform.architecture, facts.taints, facts.ready) == ("linux", "arm64", (), True)
    assert NodeFacts.from_node({}).ready is False
