"""``noe controller`` and placement policies, against the HTTPS stand-in cluster: the leader writes each
policy's status (observedGeneration, Accepted), and gated pods are placed with their policies' settings."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core import testing
from noe_core.placement.gate import SCHEDULING_GATE
from noe_core.policies.trail import POLICIES_ANNOTATION
from noe_web.controller.command import Running
from tests.support.certs import CA, make_ca
from tests.support.controller import Controllers
from tests.support.fake_cluster import FakeCluster, start_fake_cluster

TOKEN = "controller-policies-" + uuid.uuid4().hex
CLUSTER, NAMESPACED = "clusterplacementpolicies", "placementpolicies"
NODES = [testing.node(f"n-{arch}", arch) for arch in ("amd64", "arm64", "ppc64le")]


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("controller policies kube CA", tmp_path_factory.mktemp("controller-policies-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.3
        c.add("namespaces", testing.namespace("team-a", {"env": "prod"}))
        yield c


@pytest.fixture
def controller(cluster: FakeCluster, tmp_path: Path) -> Iterator[Callable[..., Running]]:
    controllers = Controllers(cluster, tmp_path, TOKEN)
    yield controllers
    controllers.stop()


def accepted(obj: dict[str, Any] | None) -> dict[str, Any]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    found = [c for c in conditions if c.get("type") == "Accepted"]
    return found[0] if found else {}


def status_writes(cluster: FakeCluster) -> list[str]:
    return [path for method, path in cluster.writes() if method == "PATCH" and path.endswith("/status")]


def test_the_leader_writes_observed_generation_and_the_accepted_condition(
    cluster: FakeCluster, controller: Callable[..., Running]
) -> None:
    cluster.add(CLUSTER, testing.cluster_policy("good", strict=True))
    cluster.add(
        NAMESPACED,
        testing.placement_policy("bad", "team-a", preferredArchitectures=[{"architecture": "arm64", "weight": 500}]),
    )
    running = controller()
    # one pass writes them one after the other, in no promised order: wait for both
    assert cluster.wait(
        lambda: accepted(cluster.get(NAMESPACED, "team-a", "bad")) and accepted(cluster.get(CLUSTER, "", "good")), 15
    )
    good, bad = cluster.get(CLUSTER, "", "good"), cluster.get(NAMESPACED, "team-a", "bad")
    assert good is not None and bad is not None
    assert good["status"]["observedGeneration"] == 1
    assert {k: accepted(good)[k] for k in ("status", "reason", "message", "observedGeneration")} == {
        "status": "True",
        "reason": "Valid",
        "message": "noe applies this policy to the pods it matches",
        "observedGeneration": 1,
    }
    assert accepted(bad)["status"] == "False" and accepted(bad)["reason"] == "WeightOutOfRange"
    assert accepted(bad)["message"] == "spec.preferredArchitectures[0].weight: 500 is not between 1 and 100"
    # the same words noe policy check prints (tests/core/cli/test_policy.py)
    sample = running.controller.metrics.registry.get_sample_value
    assert cluster.wait(lambda: sample("noe_controller_placement_policies", {"state": "invalid"}) == 1, 5)
    assert sample("noe_controller_placement_policies", {"state": "accepted"}) == 1

    # someone else's part of the status (a rollout's progress) is left alone; a fixed spec flips the condition
    cluster.update(NAMESPACED, "team-a", "bad", lambda p: p["status"].update(rollout={"cohort": {"placed": 3}}))
    since = accepted(cluster.get(NAMESPACED, "team-a", "bad"))["lastTransitionTime"]
    time.sleep(1.1)  # a new transition gets a later second
    cluster.update(NAMESPACED, "team-a", "bad", lambda p: p["spec"]["preferredArchitectures"][0].update(weight=50))
    assert cluster.wait(lambda: cluster.get(NAMESPACED, "team-a", "bad")["status"]["observedGeneration"] == 2, 15)
    fixed = cluster.get(NAMESPACED, "team-a", "bad")
    assert fixed is not None and fixed["metadata"]["generation"] == 2
    assert accepted(fixed)["status"] == "True" and accepted(fixed)["lastTransitionTime"] > since
    assert fixed["status"]["rollout"] == {"cohort": {"placed": 3}}
    assert cluster.wait(lambda: sample("noe_controller_placement_policies", {"state": "accepted"}) == 2, 5)

    # nothing more to say: nothing more is written, also after a full resync
    writes = len(status_writes(cluster))
    running.statuses.changed()
    time.sleep(1.0)
    assert len(status_writes(cluster)) == writes == 3


def test_a_dry_run_writes_no_status(cluster: FakeCluster, controller: Callable[..., Running]) -> None:
    cluster.add(CLUSTER, testing.cluster_policy("bad", priority=-4))
    running = controller("--dry-run")
    assert cluster.wait(running.controller.ready, 15)
    sample = running.controller.metrics.registry.get_sample_value
    assert cluster.wait(lambda: sample("noe_controller_placement_policies", {"state": "invalid"}) == 1, 10)
    time.sleep(0.5)
    assert status_writes(cluster) == [] and "status" not in (cluster.get(CLUSTER, "", "bad") or {})


def test_a_gated_pod_is_placed_with_the_settings_its_policies_give_it(
    cluster: FakeCluster, controller: Callable[..., Running]
) -> None:
    cluster.add(
        NAMESPACED,
        testing.placement_policy(
            "arm-only",
            "team-a",
            schedulableArchitectures=["arm64", "ppc64le"],
            preferredArchitectures=[{"architecture": "ppc64le", "weight": 40}],
            imagePlatforms=[{"image": "declared/app:1", "platforms": ["linux/amd64", "linux/arm64", "linux/ppc64le"]}],
        ),
    )
    gated = testing.pod(["declared/app:1"], namespace="team-a", name="gated")
    gated["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
    gated["metadata"]["annotations"] = {POLICIES_ANNOTATION: "ClusterPlacementPolicy/deleted-since"}
    cluster.add("pods", {**gated, "status": {"phase": "Pending"}})
    controller()
    assert cluster.wait(lambda: not cluster.get("pods", "team-a", "gated")["spec"].get("schedulingGates"), 15)
    placed = cluster.get("pods", "team-a", "gated")
    assert placed is not None
    assert {n["metadata"]["name"] for n in NODES if testing.schedulable(placed, n)} == {"n-arm64", "n-ppc64le"}
    preferred = placed["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [(t["preference"]["matchExpressions"][0]["values"], t["weight"]) for t in preferred] == [(["ppc64le"], 40)]
    assert placed["metadata"]["annotations"] == {POLICIES_ANNOTATION: "PlacementPolicy/team-a/arm-only"}
