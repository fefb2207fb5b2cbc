"""The controller's misplaced check, judged once per distinct inputs (noe_web/controller/misplaced.py).

What it must never do: give one pod the verdict of other inputs. The property runs one check across every
generated example — policies, learned platforms and pods change under it as they do in a cluster — and
holds each verdict equal to the one pipeline's, worked out afresh. The other tests pin that replicas are
judged once per node platform, and that an answer, a learned architecture or a container state that
changed is seen at once.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings

from noe_core import testing
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.learned import LearnedPlatforms, data_key, read_learned
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.compatibility import unsupported_images
from noe_core.placement.decider import Decider
from noe_core.policies.documents import read_documents
from noe_core.policies.merge import MergedSettings, Policies
from noe_core.policies.settings import PolicySettings
from noe_core.registry.lookup_service import LookupService
from noe_core.util.deadline import Deadline
from noe_web.controller.misplaced import MisplacedCheck
from noe_web.controller.podview import SharedParts, slim_node, slim_pod
from tests.support.placement_cases import (
    NAMESPACES,
    NODES,
    SERVICE,
    learned_entries,
    pods,
    policy_docs,
)


@dataclass
class Current:
    """Policies and learned platforms that change under one Decider, as the controller's watches change."""

    policies: Policies = field(default_factory=Policies)
    learned: LearnedPlatforms = field(default_factory=LearnedPlatforms)

    def settings_for(self, base: PolicySettings, *, namespace: str, pod_labels: Any) -> MergedSettings:
        return self.policies.settings_for(base, namespace=namespace, pod_labels=pod_labels)

    def current(self) -> LearnedPlatforms:
        return self.learned


def learned_of(entries: dict[str, set[str]]) -> LearnedPlatforms:
    data = {
        data_key(digest): json.dumps({"architectures": sorted(archs), "evidence": ["x/y"], "time": "t"})
        for digest, archs in entries.items()
    }
    return LearnedPlatforms(read_learned(data))


CURRENT = Current()
FLAGS = PolicySettings()
CHECK = MisplacedCheck(Decider(FLAGS, SERVICE, CURRENT, CURRENT))
SHARED = SharedParts()
SLIM_NODES = [slim_node(node) for node in NODES]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=policy_docs(), pod=pods(), learned=learned_entries)
def test_a_remembered_verdict_is_always_the_one_the_pipeline_gives_now(
    docs: list[dict[str, Any]], pod: dict[str, Any], learned: dict[str, set[str]]
) -> None:
    namespace = pod["metadata"]["namespace"]
    documents = [*docs, *(testing.namespace(n, labels) for n, labels in NAMESPACES.items())]
    CURRENT.policies = read_documents(documents, "test").as_policies()
    CURRENT.learned = learned_of(learned)
    fresh = Decider(FLAGS, SERVICE, CURRENT.policies, CURRENT)
    for node in SLIM_NODES:
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node["metadata"]["name"]
        bound["status"] = {"conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": []}
        workload = read_workload(bound, POD)
        platform = CHECK.platform(node)
        expected = unsupported_images(
            workload.images, fresh.decide(workload, namespace, stage="running").lookups, node=platform
        )
        assert CHECK.unsupported(workload, namespace, platform) == expected
        assert CHECK.fine(slim_pod(bound, shared=SHARED), namespace, platform) == (not expected)


class SwappableResolver:
    """A registry cache whose answer for an image can change (a tag pushed again): each answer a new object."""

    def __init__(self, answers: dict[str, ImagePlatforms]) -> None:
        self.answers = answers

    def resolve(self, reference: str, *, deadline: Deadline, keychain: object = None) -> ImagePlatforms:
        return self.answers[reference]

    def cached(self, reference: str, *, keychain: object = None) -> ImagePlatforms | None:
        return self.answers.get(reference)


def replicas(count: int, image: str = "shop/web:1") -> list[dict[str, Any]]:
    """A Deployment's replicas as the controller's cache keeps them: one on each node in turn."""
    out = []
    shared = SharedParts()
    for index in range(count):
        pod = testing.pod([image], namespace="shop", labels={"app": "web", "pod-template-hash": "5d8f"})
        pod["metadata"]["name"] = f"web-5d8f-{index}"
        pod["spec"]["nodeName"] = SLIM_NODES[index % 2]["metadata"]["name"]  # amd64, then arm64
        pod["status"] = {
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "c0", "image": image, "imageID": "", "restartCount": 0, "state": {"running": {}}}
            ],
        }
        out.append(slim_pod(pod, shared=shared))
    return out


def test_replicas_are_judged_once_per_node_platform_and_a_new_answer_is_seen_at_once() -> None:
    resolver = SwappableResolver({"shop/web:1": ImagePlatforms.of("linux/amd64")})
    check = MisplacedCheck(Decider(FLAGS, LookupService(resolver=resolver)))
    pods_ = replicas(50)
    verdicts = [check.fine(pod, "shop", check.platform(SLIM_NODES[i % 2])) for i, pod in enumerate(pods_)]
    assert verdicts == [True, False] * 25  # amd64 only: every replica on the arm64 node is misplaced
    assert check.judged == 2  # 50 replicas, two node platforms

    resolver.answers["shop/web:1"] = ImagePlatforms.of("linux/amd64", "linux/arm64")  # the tag gained arm64
    assert all(check.fine(pod, "shop", check.platform(SLIM_NODES[i % 2])) for i, pod in enumerate(pods_))
    assert check.judged == 4


def test_a_learned_architecture_is_seen_at_once() -> None:
    digest = "sha256:" + "ab" * 32
    resolver = SwappableResolver({"shop/web:1": ImagePlatforms.of("linux/amd64", "linux/arm64", digest=digest)})
    current = Current()
    check = MisplacedCheck(Decider(FLAGS, LookupService(resolver=resolver), learned=current))
    arm_pod = replicas(2)[1]
    arm = check.platform(SLIM_NODES[1])
    assert check.fine(arm_pod, "shop", arm)
    current.learned = learned_of({digest: {"arm64"}})  # exec format error on arm64: the controller learned it
    assert not check.fine(arm_pod, "shop", arm)
    assert [u.image for u in check.unsupported(read_workload(arm_pod, POD), "shop", arm)] == ["shop/web:1"]


def test_a_container_that_says_or_may_say_exec_format_error_is_never_passed_over() -> None:
    resolver = SwappableResolver({"shop/web:1": ImagePlatforms.of("linux/amd64", "linux/arm64")})
    check = MisplacedCheck(Decider(FLAGS, LookupService(resolver=resolver)))
    quiet, failing, looping = replicas(3)
    amd = check.platform(SLIM_NODES[0])
    assert check.fine(quiet, "shop", amd)
    for pod, state in (
        (failing, {"terminated": {"reason": "Error", "message": "exec /app: Exec Format Error"}}),
        (looping, {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}),
    ):
        status = copy.deepcopy(pod["status"])  # a new status, as a watch event brings it
        status["containerStatuses"][0]["state"] = state
        changed = {**pod, "status": status}
        assert not check.fine(changed, "shop", amd)
    assert check.fine(quiet, "shop", amd)  # the replicas that did not change are still passed over


def test_an_unreadable_pod_is_left_to_the_full_examination() -> None:
    check = MisplacedCheck(Decider(FLAGS, SERVICE))
    pod = replicas(1)[0]
    broken = {**pod, "spec": {**pod["spec"], "containers": [{"name": "c0", "image": 7}]}}
    assert not check.fine(broken, "shop", check.platform(SLIM_NODES[0]))


def test_pods_that_share_nothing_are_judged_right_and_hold_no_more_than_the_bound() -> None:
    """A StatefulSet's pods carry their own name as a label: no two share a remembered Workload."""
    resolver = SwappableResolver({"shop/web:1": ImagePlatforms.of("linux/amd64")})
    check = MisplacedCheck(Decider(FLAGS, LookupService(resolver=resolver)), templates=8)
    shared = SharedParts()
    verdicts = []
    for index in range(50):
        pod = replicas(1)[0]
        unique = {**pod["metadata"], "labels": {"statefulset.kubernetes.io/pod-name": f"db-{index}"}}
        pod = slim_pod({**pod, "metadata": unique}, shared=shared)
        verdicts.append(check.fine(pod, "shop", check.platform(SLIM_NODES[index % 2])))
        assert len(check._workloads.items) <= 8
    assert verdicts == [True, False] * 25
    assert check.judged == 2  # the verdicts are still shared: the same lookups, two node platforms
