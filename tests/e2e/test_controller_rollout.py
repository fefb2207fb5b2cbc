"""``noe controller`` and rollouts, against the HTTPS stand-in cluster: a workload's cohort compared with its
control group, rollback recorded in the policy's status with Events, cohort pods evicted one at a time through
the Eviction API (budgets honoured), control pods untouched, a new generation clearing the list, --dry-run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core import testing
from noe_core.policies.rollout import ROLLOUT_LABEL
from tests.support.certs import CA, make_ca
from tests.support.controller import Controllers
from tests.support.fake_cluster import FakeCluster, owned_by, ready, start_fake_cluster

TOKEN = "controller-rollout-" + uuid.uuid4().hex
CLUSTER = "clusterplacementpolicies"
IMAGE = "registry.example/app:1"
SPEC = {
    "rollout": {"architecture": "arm64", "percent": 50},
    "imagePlatforms": [{"image": IMAGE, "platforms": ["linux/amd64", "linux/arm64"]}],
}
EXEC_FORMAT = "exec /app: exec format error"


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("controller rollout kube CA", tmp_path_factory.mktemp("controller-rollout-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.3
        c.add("nodes", testing.node("n-arm64", "arm64"))
        c.add("nodes", testing.node("n-amd64", "amd64"))
        c.add(CLUSTER, testing.cluster_policy("move", SPEC))
        yield c


@pytest.fixture
def controller(cluster: FakeCluster, tmp_path: Path) -> Iterator[Controllers]:
    controllers = Controllers(cluster, tmp_path, TOKEN)
    yield controllers
    controllers.stop()


def rollout_pod(
    name: str,
    group: str,
    *,
    workload: str = "web",
    failing: bool = False,
    exec_format: bool = False,
    namespace: str = "apps",
) -> dict[str, Any]:
    """A Deployment's pod as the webhook placed it (label), running on the group's node."""
    template_hash = "5d8f6c7b9"
    state: dict[str, Any] = {"running": {}}
    restarts = 0
    if failing or exec_format:
        message = EXEC_FORMAT if exec_format else "back-off 5m0s restarting failed container"
        state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        restarts = 4
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": workload, "pod-template-hash": template_hash, ROLLOUT_LABEL: group},
            "ownerReferences": owned_by("ReplicaSet", f"{workload}-{template_hash}"),
        },
        "spec": {
            "containers": [{"name": "app", "image": IMAGE}],
            "nodeName": "n-arm64" if group == "arm64" else "n-amd64",
        },
        "status": {
            **ready(not (failing or exec_format)),
            "containerStatuses": [
                {
                    "name": "app",
                    "image": IMAGE,
                    "imageID": "registry.example/app@sha256:" + "a" * 64,
                    "restartCount": restarts,
                    "state": state,
                    "lastState": {},
                }
            ],
        },
    }


def rollout_status(cluster: FakeCluster) -> dict[str, Any]:
    policy = cluster.get(CLUSTER, "", "move") or {}
    return dict((policy.get("status") or {}).get("rollout") or {})


def rolled_back(cluster: FakeCluster) -> list[dict[str, Any]]:
    return list(rollout_status(cluster).get("rolledBack") or [])


def evictions(cluster: FakeCluster) -> list[str]:
    return [path.split("/")[-2] for method, path in cluster.writes() if path.endswith("/eviction")]


def test_an_exec_format_error_in_the_cohort_rolls_the_workload_back_and_evicts_only_cohort_pods(
    cluster: FakeCluster, controller: Controllers
) -> None:
    for index in range(3):
        cluster.add("pods", rollout_pod(f"web-control-{index}", "control"))
    cluster.add("pods", rollout_pod("web-cohort-0", "arm64"))
    cluster.add("pods", rollout_pod("web-cohort-1", "arm64"))
    cluster.add("pods", rollout_pod("api-cohort-0", "arm64", workload="api"))
    running = controller()
    assert cluster.wait(lambda: rollout_status(cluster).get("cohort", {}).get("placed") == 3, 15)
    assert rolled_back(cluster) == []
    cluster.update(
        "pods", "apps", "web-cohort-1", lambda p: p.update(rollout_pod("web-cohort-1", "arm64", exec_format=True))
    )
    assert cluster.wait(lambda: rolled_back(cluster), 15), "never rolled back"
    [entry] = rolled_back(cluster)
    assert {k: entry[k] for k in ("namespace", "workload", "architecture")} == {
        "namespace": "apps",
        "workload": "Deployment/web",
        "architecture": "arm64",
    }
    assert entry["reason"].startswith("ExecFormatError") and entry["time"].endswith("Z")
    assert rollout_status(cluster)["observedGeneration"] == 1
    assert cluster.wait(lambda: sorted(evictions(cluster)) == ["web-cohort-0", "web-cohort-1"], 15)
    assert cluster.wait(lambda: len(cluster.events("RolloutRolledBack")) == 2, 15)  # Events are written async
    events = cluster.events("RolloutRolledBack")
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events} == {
        ("ClusterPlacementPolicy", "move"),
        ("Deployment", "web"),
    }
    assert all(e["type"] == "Warning" and "apps/Deployment/web" in e["message"] for e in events)
    time.sleep(1.0)
    # the other workload of the same policy and every control pod stay
    assert sorted(evictions(cluster)) == ["web-cohort-0", "web-cohort-1"]
    assert all(cluster.get("pods", "apps", f"web-control-{i}") is not None for i in range(3))
    assert cluster.get("pods", "apps", "api-cohort-0") is not None
    assert not [w for w in cluster.writes() if w[0] == "DELETE"]
    assert running.rollouts.rollbacks == 1


def test_crash_looping_cohort_rolls_back_but_not_when_control_fails_as_much(
    cluster: FakeCluster, controller: Controllers
) -> None:
    # api: cohort and control both fail: the architecture is not the cause
    for index in range(2):
        cluster.add("pods", rollout_pod(f"api-cohort-{index}", "arm64", workload="api", failing=True))
        cluster.add("pods", rollout_pod(f"api-control-{index}", "control", workload="api", failing=True))
    # web: one failing cohort pod of one is not enough (at least 2 observed)
    cluster.add("pods", rollout_pod("web-cohort-0", "arm64", failing=True))
    cluster.add("pods", rollout_pod("web-control-0", "control"))
    controller()
    assert cluster.wait(lambda: rollout_status(cluster).get("cohort", {}).get("failing") == 3, 15)
    time.sleep(1.5)
    assert rolled_back(cluster) == [] and evictions(cluster) == []
    # a second failing cohort pod: 2 of 2 against 0 of 1
    cluster.add("pods", rollout_pod("web-cohort-1", "arm64", failing=True))
    assert cluster.wait(lambda: rolled_back(cluster), 15)
    [entry] = rolled_back(cluster)
    assert entry["workload"] == "Deployment/web" and entry["reason"].startswith("CohortFailing")
    assert cluster.wait(lambda: sorted(evictions(cluster)) == ["web-cohort-0", "web-cohort-1"], 15)
    assert rollout_status(cluster)["control"] == {"placed": 3, "failing": 2}


def test_evictions_honour_budgets_and_one_is_in_flight_per_workload(
    cluster: FakeCluster, controller: Controllers
) -> None:
    cluster.state.graceful_eviction = True
    budget = cluster.add_budget("apps", {"app": "web"}, 0)
    for index in range(3):
        cluster.add("pods", rollout_pod(f"web-cohort-{index}", "arm64", exec_format=index == 0))
    cluster.add("pods", rollout_pod("web-control-0", "control"))
    controller()
    assert cluster.wait(lambda: rolled_back(cluster), 15)
    # refused by the budget (429): tried again later, nothing evicted
    assert cluster.wait(lambda: len([p for m, p in cluster.writes() if p.endswith("/eviction")]) >= 2, 15)
    assert cluster.state.evicted == []
    cluster.set_budget(budget, 5)
    assert cluster.wait(lambda: len(cluster.state.evicted) == 1, 15)
    time.sleep(1.5)
    # the evicted pod is still terminating: no second eviction meanwhile
    assert len(cluster.state.evicted) == 1
    first = cluster.state.evicted[0][1]
    cluster.delete("pods", "apps", first)
    assert cluster.wait(lambda: len(cluster.state.evicted) == 2, 15)
    time.sleep(1.0)
    assert len(cluster.state.evicted) == 2
    cluster.delete("pods", "apps", cluster.state.evicted[1][1])
    assert cluster.wait(lambda: len(cluster.state.evicted) == 3, 15)
    assert {name for _, name in cluster.state.evicted} == {f"web-cohort-{i}" for i in range(3)}
    assert cluster.get("pods", "apps", "web-control-0") is not None


def test_a_new_generation_clears_the_rolled_back_list(cluster: FakeCluster, controller: Controllers) -> None:
    cluster.add("pods", rollout_pod("web-cohort-0", "arm64", exec_format=True))
    controller()
    assert cluster.wait(lambda: rolled_back(cluster), 15)
    cluster.update(CLUSTER, "", "move", lambda p: p["spec"]["rollout"].update(percent=20))
    assert cluster.wait(
        lambda: rollout_status(cluster).get("observedGeneration") == 2 and rolled_back(cluster) == [], 15
    ), rollout_status(cluster)


def test_dry_run_reports_without_acting(cluster: FakeCluster, controller: Controllers) -> None:
    cluster.add("pods", rollout_pod("web-cohort-0", "arm64", exec_format=True))
    cluster.add("pods", rollout_pod("web-cohort-1", "arm64"))
    cluster.add("pods", rollout_pod("web-control-0", "control"))
    controller("--dry-run")
    assert cluster.wait(lambda: len(cluster.events("RolloutRolledBack")) == 2, 15)
    assert all(e["message"].startswith("(dry run)") for e in cluster.events("RolloutRolledBack"))
    assert cluster.wait(lambda: len(cluster.events("RolloutEviction")) == 2, 15)
    time.sleep(1.0)
    assert evictions(cluster) == [] and rollout_status(cluster) == {}
    assert not [p for m, p in cluster.writes() if p.endswith("/status")]


def test_a_leader_that_takes_over_waits_for_the_terminating_cohort_pod(
    cluster: FakeCluster, controller: Controllers
) -> None:
    """The eviction in flight is read from the pods (deletionTimestamp), not from the last leader's memory."""
    cluster.state.graceful_eviction = True
    for index in range(2):
        cluster.add("pods", rollout_pod(f"web-cohort-{index}", "arm64", exec_format=index == 0))
    cluster.add("pods", rollout_pod("web-control-0", "control"))
    first = controller()
    assert cluster.wait(lambda: len(cluster.state.evicted) == 1, 15)
    [(_, terminating)] = cluster.state.evicted
    second = controller()  # a follower, then the leader once the first one stops (and releases the Lease)
    assert cluster.wait(second.controller.ready, 15)
    first.stop()
    controller.started.remove(first)
    assert second.elector is not None and cluster.wait(second.elector.is_leader, 15)
    assert cluster.wait(second.rollouts.primed.is_set, 15)  # it examined every pod since it leads
    time.sleep(1.5)  # several rollout passes
    # neither the terminating pod again nor, while it terminates, the next one
    assert evictions(cluster) == [terminating]
    cluster.delete("pods", "apps", terminating)  # its kubelet is done
    assert cluster.wait(lambda: len(cluster.state.evicted) == 2, 15)
    assert sorted(evictions(cluster)) == ["web-cohort-0", "web-cohort-1"]
    assert cluster.get("pods", "apps", "web-control-0") is not None
