"""``noe why POD`` against the Kubernetes API stand-in and the real registry: a pod of each verdict, the allowed
set the webhook's Decision computed, the node counts, and the exit status (issue 31, item 1).

Each pod is the pod the webhook admitted: the one pipeline (:func:`noe_core.testing.decide`) on the pod as
submitted, with the platforms its image really has in the registry; ``noe why`` reads it back live.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core import testing
from noe_core.image.offer import allowed_nodes
from tests.support.certs import CA, make_ca
from tests.support.cli import run_cli
from tests.support.fake_cluster import FakeCluster, owned_by, start_fake_cluster
from tests.support.images import PushedImage

pytestmark = [pytest.mark.registry]

TOKEN = "why-" + uuid.uuid4().hex
ARM64 = ["linux/arm64"]
WHY = ("--insecure-registries", "127.0.0.1:*", "--negative-cache-ttl", "0", "--kubeconfig")
"""The registry flags noe serve would run with here, then the kubeconfig."""
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("why kube CA", tmp_path_factory.mktemp("why-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        yield c


@pytest.fixture
def kubeconfig(cluster: FakeCluster, tmp_path: Path) -> Path:
    return cluster.api.write_kubeconfig(tmp_path / "kubeconfig", token=TOKEN)


def ready_node(name: str, arch: str, *, taints: tuple[str, ...] = ()) -> dict[str, Any]:
    node = testing.node(name, arch, taints=taints)
    node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return node


def admitted(
    name: str, image: str, platforms: list[str], *, node: str = "", message: str | None = None, **kw: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The pod as the webhook admitted it, and the allowed set its Decision computed."""
    submitted = testing.pod([image], name=name, namespace="shop", labels={"app": name}, **kw)
    submitted["metadata"]["ownerReferences"] = owned_by("ReplicaSet", f"{name}-5d8f")
    submitted["metadata"]["uid"] = str(uuid.uuid4())
    decision = testing.decide(submitted, testing.platforms({image: platforms}))
    pod = decision.obj
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    else:
        said = [{**UNSCHEDULABLE, "message": message}] if message is not None else []
        pod["status"] = {"phase": "Pending", "conditions": said}
    return pod, allowed_nodes(decision.nodes) if decision.nodes is not None else []


def why(kubeconfig: Path, *args: str, output: str = "json") -> dict[str, Any]:
    status, out, err = run_cli("why", *WHY, str(kubeconfig), "-n", "shop", *args, "-o", output)
    assert status == 0, err
    assert "Traceback" not in err
    return json.loads(out) if output == "json" else yaml.safe_load(out)


def test_placed_and_misplaced_with_the_webhooks_allowed_set(
    cluster: FakeCluster, kubeconfig: Path, pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    cluster.add("nodes", ready_node("a1", "arm64"))
    cluster.add("nodes", ready_node("x1", "amd64"))
    placed, allowed = admitted("web", arm64_only, ARM64, node="a1")
    cluster.add("pods", placed)
    wrong, _ = admitted("api", arm64_only, ARM64, node="x1")
    cluster.add("pods", wrong)

    answer = why(kubeconfig, "web")
    assert set(answer) == {"pod", "policies", "images", "allowed", "nodes", "verdict", "message"}
    assert answer["pod"] == {"namespace": "shop", "name": "web", "node": "a1", "phase": "Running"}
    assert answer["verdict"] == "placed", answer
    assert (
        answer["allowed"] == allowed == [{"os": "linux", "architecture": "arm64", "windowsBuild": None, "level": None}]
    )
    assert answer["images"] == [{"image": arm64_only, "platforms": ARM64, "source": "registry", "error": None}]
    assert answer["nodes"] == {
        "total": 2,
        "matching": 1,
        "by_architecture": {
            "amd64": {"total": 1, "ready": 1, "matching": 0},
            "arm64": {"total": 1, "ready": 1, "matching": 1},
        },
    }
    assert answer["message"] == "node a1 is linux/arm64, which every image runs on"
    answer = why(kubeconfig, "pod/api", output="yaml")
    assert answer["verdict"] == "misplaced"
    assert answer["message"] == "node x1 is linux/amd64, outside what its images run on (linux/arm64)"


@pytest.mark.parametrize("pool", ["empty", "tainted"])
def test_pending_with_no_node_for_noes_terms(
    cluster: FakeCluster, kubeconfig: Path, pushed_images: dict[str, PushedImage], pool: str
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    cluster.add("nodes", ready_node("x1", "amd64"))
    if pool == "tainted":
        for i in range(3):
            cluster.add("nodes", ready_node(f"a{i}", "arm64", taints=("arch=arm64:NoSchedule",)))
    pod, allowed = admitted("web", arm64_only, ARM64, message="0/4 nodes are available: …")
    cluster.add("pods", pod)
    answer = why(kubeconfig, "web")
    assert answer["verdict"] == "pending-no-node"
    assert answer["allowed"] == allowed
    if pool == "empty":
        assert answer["message"] == "no Ready linux/arm64 node"
        assert answer["nodes"]["by_architecture"]["arm64"] == {"total": 0, "ready": 0, "matching": 0}
    else:
        assert answer["message"] == "no Ready linux/arm64 node; 3 arm64 nodes are tainted arch=arm64:NoSchedule"
        assert answer["nodes"]["by_architecture"]["arm64"] == {"total": 3, "ready": 3, "matching": 0}
    status, table, _ = run_cli("why", *WHY, str(kubeconfig), "-n", "shop", "web")
    assert status == 0
    assert table.splitlines()[1] == "Verdict:   pending-no-node"
    assert "Allowed:   linux/arm64" in table


def test_pending_for_another_reason_names_the_schedulers_words(
    cluster: FakeCluster, kubeconfig: Path, pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    cluster.add("nodes", ready_node("a1", "arm64"))
    pod, _ = admitted("web", arm64_only, ARM64, message="0/1 nodes are available: 1 Insufficient cpu.")
    cluster.add("pods", pod)
    answer = why(kubeconfig, "web")
    assert answer["verdict"] == "pending-other"
    assert answer["message"] == (
        "1 node(s) satisfy noe's terms; the scheduler says: 0/1 nodes are available: 1 Insufficient cpu."
    )


def test_not_placed_says_which_rule(
    cluster: FakeCluster, kubeconfig: Path, pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    cluster.add("nodes", ready_node("a1", "arm64"))
    pinned, allowed = admitted("pinned", arm64_only, ARM64, node="a1", node_selector={"kubernetes.io/arch": "arm64"})
    assert allowed == []  # the webhook left the user's choice alone
    cluster.add("pods", pinned)
    answer = why(kubeconfig, "pinned")
    assert (answer["verdict"], answer["allowed"]) == ("not-placed", [])
    assert answer["message"] == (
        "the pod's platform terms are its own, not the ones noe writes for it (linux/arm64): noe leaves a pod's own "
        "choice alone (or its images changed since it was admitted)"
    )
    # admitted while the webhook was down (failure policy Ignore): no terms at all
    bare = testing.pod([arm64_only], name="bare", namespace="shop")
    bare["metadata"]["uid"] = str(uuid.uuid4())
    cluster.add("pods", bare)
    answer = why(kubeconfig, "bare")
    assert answer["verdict"] == "not-placed"
    assert answer["message"].startswith("noe would require linux/arm64 now, but the pod carries no such terms")


def test_unknown_when_an_image_cannot_be_looked_up(
    cluster: FakeCluster, kubeconfig: Path, pushed_images: dict[str, PushedImage]
) -> None:
    gone = pushed_images["docker-single-arm64"].reference.rsplit(":", 1)[0] + ":no-such-tag"
    cluster.add("nodes", ready_node("a1", "arm64"))
    pod = testing.pod([gone], name="web", namespace="shop")
    pod["metadata"]["uid"] = str(uuid.uuid4())
    cluster.add("pods", pod)
    answer = why(kubeconfig, "web")
    assert answer["verdict"] == "unknown"
    [image] = answer["images"]
    assert image["platforms"] is None and image["error"] and image["source"] == "registry"
    assert answer["message"].startswith(f"image {gone} could not be looked up: ")


def test_policies_that_matched_and_those_that_did_not(
    cluster: FakeCluster, kubeconfig: Path, pushed_images: dict[str, PushedImage]
) -> None:
    arm64_only = pushed_images["docker-single-arm64"].reference
    cluster.add("nodes", ready_node("a1", "arm64"))
    cluster.add("nodes", ready_node("x1", "amd64"))
    policies = [
        testing.cluster_policy("base", {"preferredArchitectures": [{"architecture": "arm64", "weight": 10}]}),
        testing.cluster_policy("elsewhere", {"namespaceSelector": {"matchLabels": {"env": "prod"}}, "strict": True}),
        testing.placement_policy("other-app", "shop", {"podSelector": {"matchLabels": {"app": "db"}}, "strict": True}),
        testing.placement_policy(
            "web-first", "shop", {"preferredArchitectures": [{"architecture": "amd64", "weight": 50}]}
        ),
    ]
    for doc in policies:
        cluster.add("clusterplacementpolicies" if doc["kind"] == "ClusterPlacementPolicy" else "placementpolicies", doc)
    cluster.add("namespaces", testing.namespace("shop", {"env": "dev"}))
    pod = testing.pod([arm64_only], name="web", namespace="shop", labels={"app": "web"})
    pod["metadata"]["uid"] = str(uuid.uuid4())
    in_cluster = testing.policies(*policies, testing.namespace("shop", {"env": "dev"}))
    cluster.add("pods", testing.decide(pod, testing.platforms({arm64_only: ARM64}), policies=in_cluster).obj)
    answer = why(kubeconfig, "web")
    assert answer["policies"] == [
        {
            "kind": "ClusterPlacementPolicy",
            "namespace": "",
            "name": "base",
            "applied": False,
            "reason": "priority lost: preferredArchitectures taken over by a later policy (higher priority, or a "
            "namespaced one)",
        },
        {
            "kind": "ClusterPlacementPolicy",
            "namespace": "",
            "name": "elsewhere",
            "applied": False,
            "reason": "namespaceSelector does not select namespace shop",
        },
        {
            "kind": "PlacementPolicy",
            "namespace": "shop",
            "name": "other-app",
            "applied": False,
            "reason": "podSelector does not select the pod's labels",
        },
        {
            "kind": "PlacementPolicy",
            "namespace": "shop",
            "name": "web-first",
            "applied": True,
            "reason": "selects the pod (preferredArchitectures)",
        },
    ]
    assert (answer["verdict"], answer["message"]) == (
        "pending-other",
        "1 node(s) satisfy noe's terms; waiting for the scheduler",
    )


def test_exit_status_for_a_pod_that_cannot_be_read_and_for_usage(cluster: FakeCluster, kubeconfig: Path) -> None:
    status, out, err = run_cli("why", "--kubeconfig", str(kubeconfig), "-n", "shop", "nowhere")
    assert (status, out) == (1, "")
    assert err.startswith("noe why: pod shop/nowhere not read: ") and TOKEN not in err
    status, out, err = run_cli("why", "--kubeconfig", str(kubeconfig), "deployment/web")
    assert (status, out) == (2, "")
    assert err == "noe why: 'deployment/web': noe why explains pods (POD or pod/NAME), not deployment\n"
    status, _, err = run_cli("why", "--kubeconfig", str(kubeconfig), "web", "-o", "csv")
    assert (status, err.splitlines()[-1]) == (
        2,
        "noe why: argument -o/--output: 'csv' must be one of table, json, yaml",
    )
