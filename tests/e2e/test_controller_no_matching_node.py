"""``noe controller`` on pods noe placed that no node can take: one Warning ``NoMatchingNode`` each, a gauge
for the alert, and silence for every other Pending pod (issue 31, item 3).

The pods carry the terms the webhook wrote (the one pipeline, :func:`noe_core.testing.decide`, on the pod
as submitted, with the image's real platforms from the registry), and the scheduler's condition as
kube-scheduler sets it. The nodes are Ready ones of the stand-in, as kubelets report them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core import testing
from noe_web.controller.command import Running
from tests.support.certs import CA, make_ca
from tests.support.controller import Controllers, settle
from tests.support.fake_cluster import FakeCluster, owned_by, start_fake_cluster
from tests.support.images import PushedImage

pytestmark = [pytest.mark.registry]

TOKEN = "controller-" + uuid.uuid4().hex
UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
}


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("no-matching-node kube CA", tmp_path_factory.mktemp("nmn-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.3
        yield c


@pytest.fixture
def run_controller(cluster: FakeCluster, tmp_path: Path) -> Iterator[Callable[..., Running]]:
    controllers = Controllers(cluster, tmp_path, TOKEN)
    yield controllers
    controllers.stop()


def ready_node(name: str, arch: str, *, taints: tuple[str, ...] = (), is_ready: bool = True) -> dict[str, Any]:
    node = testing.node(name, arch, taints=taints)
    node["status"] = {"conditions": [{"type": "Ready", "status": "True" if is_ready else "False"}]}
    return node


def placed_pod(
    name: str, image: str, arch: list[str], *, condition: dict[str, str] | None = UNSCHEDULABLE, **kw: Any
) -> dict[str, Any]:
    """A Deployment's pod as the webhook admitted it (noe's terms in its spec), Pending with ``condition``."""
    submitted = testing.pod([image], name=name, namespace="apps", **kw)
    submitted["metadata"]["ownerReferences"] = owned_by("ReplicaSet", "web-5d8f")
    pod = testing.decide(submitted, testing.platforms({image: [f"linux/{a}" for a in arch]})).obj
    pod["status"] = {"phase": "Pending", "conditions": [condition] if condition else []}
    return pod


def gauge(running: Running) -> float | None:
    return running.controller.metrics.registry.get_sample_value("noe_controller_unsatisfiable_pods")


def written(running: Running) -> float | None:
    return running.controller.metrics.registry.get_sample_value("noe_controller_no_matching_node_total")


def test_an_empty_arm64_pool_gets_one_event_and_the_gauge_until_the_pod_is_bound(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    cluster.add("nodes", ready_node("x1", "amd64"))
    cluster.add("nodes", ready_node("x2", "amd64"))
    pod = placed_pod("web-5d8f-a", arm64_only, ["arm64"])
    assert pod["spec"]["affinity"]["nodeAffinity"]  # the webhook's terms: arm64 only
    cluster.add("pods", pod)
    running = run_controller()
    assert cluster.wait(lambda: cluster.events("NoMatchingNode"), 15)
    settle(cluster, running)
    events = cluster.events("NoMatchingNode")
    assert [(e["type"], e["involvedObject"]["name"]) for e in events] == [("Warning", "web-5d8f-a")]
    assert events[0]["message"].startswith("no Ready linux/arm64 node; images: ")
    assert f"{arm64_only} (linux/arm64)" in events[0]["message"]
    assert gauge(running) == 1.0 and written(running) == 1.0
    # the scheduler tries again and says so: still one Event
    cluster.update("pods", "apps", "web-5d8f-a", lambda p: p["status"]["conditions"][0].update(message="again"))
    settle(cluster, running)
    assert len(cluster.events("NoMatchingNode")) == 1 and written(running) == 1.0
    # an arm64 node arrives and the pod is bound: nothing waits any more
    cluster.add("nodes", ready_node("a1", "arm64"))
    cluster.update("pods", "apps", "web-5d8f-a", lambda p: p["spec"].update(nodeName="a1"))
    assert cluster.wait(lambda: gauge(running) == 0.0, 10)
    assert not [w for w in cluster.writes() if w[0] in ("DELETE", "POST") and "eviction" in w[1]]


def test_a_tainted_arm64_pool_is_named_with_its_taint(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    for i in range(3):
        cluster.add("nodes", ready_node(f"a{i}", "arm64", taints=("arch=arm64:NoSchedule",)))
    cluster.add("nodes", ready_node("x1", "amd64"))
    cluster.add("pods", placed_pod("web-5d8f-b", arm64_only, ["arm64"]))
    running = run_controller()
    assert cluster.wait(lambda: cluster.events("NoMatchingNode"), 15)
    settle(cluster, running)
    [event] = cluster.events("NoMatchingNode")
    assert event["message"].startswith(
        "no Ready linux/arm64 node; 3 arm64 nodes are tainted arch=arm64:NoSchedule; images: "
    )
    assert gauge(running) == 1.0


def test_no_event_for_a_pod_pending_for_any_other_reason(
    cluster: FakeCluster, run_controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    multi = pushed_images["docker-manifest-list"].reference
    cluster.add("nodes", ready_node("a1", "arm64", taints=("arch=arm64:NoSchedule",)))
    cluster.add("nodes", ready_node("a2", "arm64", is_ready=False))
    cluster.add("nodes", ready_node("x1", "amd64"))
    tolerating = [{"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]
    # noe's terms are satisfiable (the pod tolerates the taint): the scheduler blocks on something else
    cpu = {**UNSCHEDULABLE, "message": "0/3 nodes are available: 3 Insufficient cpu."}
    cluster.add("pods", placed_pod("web-5d8f-c", arm64_only, ["arm64"], condition=cpu, tolerations=tolerating))
    # just created: the scheduler has said nothing yet
    cluster.add("pods", placed_pod("web-5d8f-d", arm64_only, ["arm64"], condition=None))
    # the image runs on either: noe's terms match the amd64 node
    cluster.add("pods", placed_pod("web-5d8f-e", multi, ["amd64", "arm64"]))
    # the user pinned s390x: not noe's terms, not noe's business
    cluster.add(
        "pods",
        placed_pod("web-5d8f-f", arm64_only, ["arm64"], node_selector={"kubernetes.io/arch": "s390x"}),
    )
    # going away already
    terminating = placed_pod("web-5d8f-g", arm64_only, ["arm64"], tolerations=[])
    terminating["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    terminating["spec"].pop("tolerations", None)
    cluster.add("pods", terminating)
    running = run_controller()
    settle(cluster, running, seconds=1.5)
    assert running.controller.examined >= 5
    assert cluster.events("NoMatchingNode") == []
    assert gauge(running) == 0.0 and written(running) in (None, 0.0)
