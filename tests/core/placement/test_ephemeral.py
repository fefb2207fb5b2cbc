"""Rule 18: ``kubectl debug``'s new ephemeral containers against the pod's node, through ``admit``."""

from __future__ import annotations

import copy
from typing import Any

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import ImagePlatforms, LookupRequest, LookupResult, fixed
from noe_core.image.node_platform import NodePlatform
from noe_core.k8s.workload import read_workload
from noe_core.placement.ephemeral import NodeFailure, acts_on_debug, new_debug_images, pinned_platform
from noe_core.policies.settings import PolicySettings

LOOKUPS = {
    **testing.platforms(
        {
            "app:1": ["linux/amd64", "linux/arm64"],
            "busybox:amd64": ["linux/amd64"],
            "busybox:multi": ["linux/amd64", "linux/arm64/v8"],
            "fast:1": ["linux/amd64/v3"],
            "netshoot:broken": "registry answered 503",
        }
    ),
    "chart:1": ImagePlatforms.artifact("application/vnd.cncf.helm.config.v1+json"),
}
ARM_NODE = NodePlatform("linux", "arm64")


class Nodes:
    """A stand-in for the webhook's Node cache: answers from a dict, counts reads."""

    def __init__(self, **nodes: NodePlatform | NodeFailure) -> None:
        self.nodes = nodes
        self.reads: list[str] = []

    def __call__(self, name: str) -> NodePlatform | NodeFailure:
        self.reads.append(name)
        return self.nodes.get(name, NodeFailure('nodes "x" not found'))


def _debug(
    pod: dict[str, Any],
    *images: str,
    nodes: Nodes | None = None,
    settings: PolicySettings | None = None,
    ns: str = "default",
    policies: Any = None,
) -> Any:
    before = copy.deepcopy(pod)
    after = copy.deepcopy(pod)
    after["spec"].setdefault("ephemeralContainers", []).extend(
        {"name": f"debugger-{len(before['spec'].get('ephemeralContainers', [])) + i}", "image": image}
        for i, image in enumerate(images)
    )
    review = testing.admission_review(
        after, "UPDATE", old_object=before, sub_resource="ephemeralcontainers", namespace=ns
    )
    asked: list[tuple[str, ...]] = []

    def inspect(request: LookupRequest) -> LookupResult:
        asked.append(request.images)
        return fixed(LOOKUPS)(request)

    review_request = parse_admission_review(review)
    admission = admit(review_request, settings or PolicySettings(), inspect, nodes=nodes, policies=policies)
    return admission, asked


RUNNING = testing.pod(images=["app:1"], node_name="node-a")


def test_only_pods_ephemeralcontainers_updates() -> None:
    assert acts_on_debug("Pod", "UPDATE", "ephemeralcontainers")
    assert not acts_on_debug("Pod", "UPDATE", "")
    assert not acts_on_debug("Pod", "CREATE", "ephemeralcontainers")
    assert not acts_on_debug("DaemonSet", "UPDATE", "ephemeralcontainers")


def test_an_amd64_only_debug_image_on_an_arm64_node_is_warned() -> None:
    nodes = Nodes(**{"node-a": ARM_NODE})
    admission, asked = _debug(RUNNING, "busybox:amd64", nodes=nodes)
    response = admission.response["response"]
    assert response["allowed"] and "patch" not in response
    assert response["warnings"] == ["busybox:amd64 cannot run on node node-a (linux/arm64): no linux/arm64 entry"]
    assert asked == [("busybox:amd64",)] and nodes.reads == ["node-a"]
    assert admission.label == "allowed"


def test_a_multi_arch_debug_image_passes_quietly() -> None:
    admission, _ = _debug(RUNNING, "busybox:multi", nodes=Nodes(**{"node-a": ARM_NODE}))
    assert admission.response["response"] == {"uid": admission.request.uid, "allowed": True}


def test_a_strict_namespace_denies() -> None:
    strict = PolicySettings(strict_namespaces={"prod"})
    admission, _ = _debug(RUNNING, "busybox:amd64", nodes=Nodes(**{"node-a": ARM_NODE}), settings=strict, ns="prod")
    response = admission.response["response"]
    assert not response["allowed"] and response["status"]["code"] == 403
    assert "image busybox:amd64 cannot run on node node-a (linux/arm64)" in response["status"]["message"]
    broken, _ = _debug(RUNNING, "netshoot:broken", nodes=Nodes(), settings=strict, ns="prod")
    assert "could not be inspected: registry answered 503" in broken.response["response"]["status"]["message"]


def test_the_pods_placement_policies_apply_to_its_debug_containers_and_add_no_patch() -> None:
    strict = testing.policies(testing.placement_policy("strict", "prod", strict=True))
    nodes = Nodes(**{"node-a": ARM_NODE})
    admission, _ = _debug(RUNNING, "busybox:amd64", nodes=nodes, ns="prod", policies=strict)
    response = admission.response["response"]
    assert not response["allowed"] and response["status"]["code"] == 403
    assert "image busybox:amd64 cannot run on node node-a (linux/arm64)" in response["status"]["message"]
    # Another namespace's policy does not apply: a warning, as without policies.
    elsewhere, _ = _debug(RUNNING, "busybox:amd64", nodes=nodes, ns="dev", policies=strict)
    assert elsewhere.response["response"]["allowed"] and "patch" not in elsewhere.response["response"]
    # A policy's imagePlatforms reach the lookup of the debug image too (the lookup service answers from them
    # before the registry: tests/core/registry/test_lookup_service.py).
    declared = testing.policies(
        testing.placement_policy(
            "declared", "prod", imagePlatforms=[{"image": "busybox:*", "platforms": ["linux/arm64"]}]
        )
    )
    pod = copy.deepcopy(RUNNING)
    after = copy.deepcopy(pod)
    after["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox:amd64"}]
    review = testing.admission_review(
        after, "UPDATE", old_object=pod, sub_resource="ephemeralcontainers", namespace="prod"
    )
    sent: list[LookupRequest] = []

    def inspect(request: LookupRequest) -> LookupResult:
        sent.append(request)
        return fixed(LOOKUPS)(request)

    admit(parse_admission_review(review), PolicySettings(), inspect, nodes=nodes, policies=declared)
    assert [r.images for r in sent] == [("busybox:amd64",)]
    assert sent[0].declared is not None
    said = sent[0].declared.get("busybox:amd64")
    assert isinstance(said, ImagePlatforms) and [str(p) for p in said.platforms] == ["linux/arm64"]


def test_only_the_new_containers_are_checked() -> None:
    nodes = Nodes(**{"node-a": ARM_NODE})
    pod = testing.pod(images=["app:1"], node_name="node-a", debug_images=["busybox:amd64"])
    admission, asked = _debug(pod, "busybox:multi", nodes=nodes)
    assert asked == [("busybox:multi",)] and "warnings" not in admission.response["response"]
    workload = read_workload(pod, "Pod")
    assert new_debug_images(workload, pod) == () and new_debug_images(workload, None) == ("busybox:amd64",)


def test_a_node_that_cannot_be_read_allows_with_a_warning() -> None:
    nodes = Nodes(**{"node-a": NodeFailure("GET /api/v1/nodes/node-a: 403 Forbidden")})
    admission, _ = _debug(RUNNING, "busybox:amd64", nodes=nodes)
    assert admission.response["response"]["allowed"]
    assert admission.response["response"]["warnings"] == [
        "cannot read node node-a: GET /api/v1/nodes/node-a: 403 Forbidden; debug images not checked"
    ]
    no_api, _ = _debug(RUNNING, "busybox:amd64", nodes=None)
    assert "noe has no Kubernetes API access" in no_api.response["response"]["warnings"][0]


def test_a_pod_pinned_to_one_platform_needs_no_node_read() -> None:
    nodes = Nodes(**{"node-a": ARM_NODE})
    pinned = testing.pod(images=["app:1"], node_name="node-a", node_selector={"kubernetes.io/arch": "arm64"})
    admission, _ = _debug(pinned, "busybox:amd64", nodes=nodes)
    assert nodes.reads == []
    assert admission.response["response"]["warnings"] == [
        "busybox:amd64 cannot run on node node-a (linux/arm64): no linux/arm64 entry"
    ]
    # placed by noe: one required term naming one architecture
    terms = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
                ]
            }
        }
    }
    placed = testing.pod(images=["app:1"], node_name="node-a", affinity=terms)
    assert pinned_platform(read_workload(placed, "Pod"), PolicySettings()) == ("linux", "amd64")
    quiet, _ = _debug(placed, "busybox:amd64", nodes=nodes)
    assert nodes.reads == [] and "warnings" not in quiet.response["response"]
    # several OSes and no OS pinned: the Node is read
    assert pinned_platform(read_workload(placed, "Pod"), PolicySettings(system_os="linux,windows")) is None


def test_a_level_or_build_the_pin_does_not_tell_reads_the_node() -> None:
    nodes = Nodes(**{"node-a": NodePlatform("linux", "amd64", level=2)})
    pinned = testing.pod(images=["app:1"], node_name="node-a", node_selector={"kubernetes.io/arch": "amd64"})
    levels = PolicySettings(x86_64_levels="nfd")
    admission, _ = _debug(pinned, "fast:1", nodes=nodes, settings=levels)
    assert nodes.reads == ["node-a"]
    assert admission.response["response"]["warnings"] == [
        "fast:1 cannot run on node node-a (linux/amd64): no linux/amd64 entry"
    ]
    nodes.nodes["node-a"] = NodePlatform("linux", "amd64", level=3)
    fine, _ = _debug(pinned, "fast:1", nodes=nodes, settings=levels)
    assert "warnings" not in fine.response["response"]


def test_artifacts_and_failed_lookups_are_warned_not_checked() -> None:
    nodes = Nodes(**{"node-a": ARM_NODE})
    admission, _ = _debug(RUNNING, "chart:1", "netshoot:broken", nodes=nodes)
    assert admission.response["response"]["warnings"] == [
        "chart:1 is an artifact, not a container image: it cannot run",
        "cannot inspect netshoot:broken: registry answered 503",
    ]
    assert nodes.reads == []


def test_an_unbound_pod_and_other_updates() -> None:
    pending = testing.pod(images=["app:1"])
    admission, _ = _debug(pending, "busybox:amd64", nodes=Nodes())
    assert admission.response["response"] == {"uid": admission.request.uid, "allowed": True}
    plain_update = testing.admission_review(RUNNING, "UPDATE", old_object=RUNNING)
    skipped = admit(parse_admission_review(plain_update), PolicySettings(), fixed(LOOKUPS), nodes=Nodes())
    assert skipped.label == "skipped"
