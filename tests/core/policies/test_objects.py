"""Placement policy documents → validated values; every invalid one refused whole with a reason and the field."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core.errors import InvalidPolicy
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.policies.objects import MAX_PRIORITY, PolicyRef, read_policy, read_ref
from noe_core.policies.settings import ArchToleration, WeightedArchitecture


def cluster(spec: dict[str, Any] | None = None, name: str = "base", **meta: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "arch.noe.adevinta.com/v1alpha1",
        "kind": "ClusterPlacementPolicy",
        "metadata": {"name": name, **meta},
    }
    if spec is not None:
        doc["spec"] = spec
    return doc


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


def namespaced(spec: dict[str, Any] | None = None, name: str = "team", namespace: str = "team-a") -> dict[str, Any]:
    doc = cluster(spec, name, namespace=namespace)
    doc["kind"] = "PlacementPolicy"
    return doc


def test_every_field_is_read() -> None:
    policy = read_policy(
        cluster(
            {
                "priority": 10,
                "namespaceSelector": {"matchLabels": {"team": "a"}},
                "podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                "preferredArchitectures": [
                    {"architecture": "aarch64", "weight": 80},
                    {"architecture": "amd64", "weight": 20},
                ],
                "preferenceMode": "required",
                "schedulableArchitectures": ["amd64", "arm64"],
                "strict": True,
                "onLookupFailure": "gate",
                "matchNodeLabels": ["team", "team"],
                "architectureTolerations": [
                    {
                        "architecture": "arm64",
                        "key": "arch",
                        "operator": "Equal",
                        "value": "arm64",
                        "effect": "NoSchedule",
                    },
                    {"architecture": "amd64", "key": "dedicated", "operator": "Exists"},
                ],
                "imagePlatforms": [
                    {"image": "registry.corp/tool:1", "platforms": ["linux/arm64"]},
                    {"image": "registry.corp/legacy/*", "platforms": {"error": "no registry"}},
                ],
                "rollout": {"architecture": "arm64", "percent": 10},
            },
            generation=3,
        )
    )
    assert policy.ref == PolicyRef("ClusterPlacementPolicy", "base", "", 3)
    assert str(policy.ref) == "ClusterPlacementPolicy/base"
    assert policy.priority == 10
    assert policy.namespace_selector.matches({"team": "a"}) and not policy.namespace_selector.matches({})
    assert policy.pod_selector.matches({"app": "x"}) and not policy.pod_selector.matches({})
    assert policy.preferred_architectures == (WeightedArchitecture("arm64", 80), WeightedArchitecture("amd64", 20))
    assert policy.preference_mode == "required"
    assert policy.schedulable_architectures == {"amd64", "arm64"}
    assert policy.strict is True
    assert policy.on_lookup_failure == "gate"
    assert policy.match_node_labels == ("team",)
    assert policy.architecture_tolerations == (
        ArchToleration("arm64", "arch", "arm64", "NoSchedule"),
        ArchToleration("amd64", "dedicated", None, ""),
    )
    assert policy.image_platforms is not None
    assert policy.image_platforms.get("registry.corp/tool:1") == ImagePlatforms.of("linux/arm64")
    assert policy.image_platforms.get("registry.corp/legacy/x:2") == LookupFailure("no registry")
    assert policy.rollout is not None and (policy.rollout.architecture, policy.rollout.percent) == ("arm64", 10)


def test_an_empty_spec_sets_nothing() -> None:
    policy = read_policy(cluster())
    assert policy.priority == 0
    assert policy.namespace_selector.everything and policy.pod_selector.everything
    assert policy.preferred_architectures is None and policy.schedulable_architectures is None
    assert policy.strict is None and policy.image_platforms is None and policy.rollout is None


def test_an_empty_preference_list_means_no_preference() -> None:
    assert read_policy(cluster({"preferredArchitectures": []})).preferred_architectures == ()


def test_namespaced_policy_reads_its_namespace() -> None:
    policy = read_policy(namespaced({"priority": 1}))
    assert str(policy.ref) == "PlacementPolicy/team-a/team"


@pytest.mark.parametrize(
    ("doc", "reason", "message"),
    [
        (
            cluster({"priority": MAX_PRIORITY + 1}),
            "PriorityOutOfRange",
            "spec.priority: 1001 is not between 0 and 1000",
        ),
        (cluster({"priority": -1}), "PriorityOutOfRange", "spec.priority"),
        (cluster({"priority": "high"}), "InvalidField", "spec.priority"),
        (
            cluster({"preferredArchitectures": [{"architecture": "arm64", "weight": 0}]}),
            "WeightOutOfRange",
            r"spec.preferredArchitectures\[0\].weight: 0 is not between 1 and 100",
        ),
        (
            cluster({"preferredArchitectures": [{"architecture": "arm64", "weight": 101}]}),
            "WeightOutOfRange",
            "101",
        ),
        (
            cluster({"preferredArchitectures": [{"architecture": "arm64"}]}),
            "InvalidField",
            r"spec.preferredArchitectures\[0\].weight is missing",
        ),
        (
            cluster({"preferredArchitectures": [{"architecture": "m68k", "weight": 1}]}),
            "InvalidArchitecture",
            r"spec.preferredArchitectures\[0\].architecture: 'm68k' is not a Go GOARCH architecture",
        ),
        (
            cluster({"schedulableArchitectures": ["amd64", "arm 64"]}),
            "InvalidArchitecture",
            r"spec.schedulableArchitectures\[1\]: 'arm 64'",
        ),
        (cluster({"schedulableArchitectures": []}), "InvalidField", "at least one architecture"),
        (
            cluster(
                {
                    "schedulableArchitectures": ["amd64"],
                    "preferredArchitectures": [{"architecture": "arm64", "weight": 50}],
                }
            ),
            "PreferenceOutsideSchedulable",
            "spec.preferredArchitectures: arm64 is not in spec.schedulableArchitectures",
        ),
        (
            cluster(
                {
                    "preferredArchitectures": [
                        {"architecture": "arm64", "weight": 5},
                        {"architecture": "aarch64", "weight": 6},
                    ]
                }
            ),
            "DuplicateArchitecture",
            "arm64 is listed twice",
        ),
        (
            cluster({"preferenceMode": "hard"}),
            "InvalidField",
            "spec.preferenceMode: 'hard' is not one of soft, required",
        ),
        (cluster({"onLookupFailure": "deny"}), "InvalidField", "spec.onLookupFailure"),
        (cluster({"strict": "true"}), "InvalidField", "spec.strict"),
        (cluster({"podSelector": {"matchLabels": {"a": "b c"}}}), "InvalidSelector", "spec.podSelector.matchLabels"),
        (
            cluster({"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "In"}]}}),
            "InvalidSelector",
            "operator In needs at least one value",
        ),
        (namespaced({"namespaceSelector": {}}), "UnknownField", "spec.namespaceSelector"),
        (cluster({"preferedArchitectures": []}), "UnknownField", "spec.preferedArchitectures: unknown field"),
        (cluster({"matchNodeLabels": ["bad key!"]}), "InvalidField", r"spec.matchNodeLabels\[0\]"),
        (
            cluster({"architectureTolerations": [{"architecture": "arm64", "key": "arch", "effect": "Sometimes"}]}),
            "InvalidField",
            "effect: 'Sometimes'",
        ),
        (
            cluster(
                {"architectureTolerations": [{"architecture": "arm64", "key": "k", "operator": "Exists", "value": "v"}]}
            ),
            "InvalidField",
            "operator Exists takes no value",
        ),
        (
            cluster({"imagePlatforms": [{"image": "registry.corp/[tools", "platforms": ["linux/amd64"]}]}),
            "InvalidGlob",
            r"spec.imagePlatforms\[0\].image",
        ),
        (
            cluster({"imagePlatforms": [{"image": "registry.corp/Team App:1", "platforms": ["linux/amd64"]}]}),
            "InvalidImage",
            r"spec.imagePlatforms\[0\].image",
        ),
        (
            cluster({"imagePlatforms": [{"image": "a:1", "platforms": "linux/amd64"}]}),
            "InvalidPlatforms",
            "expected a list of platforms",
        ),
        (
            cluster({"imagePlatforms": [{"image": "a:1", "platforms": ["linux/"]}]}),
            "InvalidPlatforms",
            "invalid platform",
        ),
        (
            cluster({"imagePlatforms": [{"image": "a:1", "platforms": []}, {"image": "a:1", "platforms": []}]}),
            "DuplicateImage",
            "listed twice",
        ),
        (cluster({"rollout": {"architecture": "arm64", "percent": 101}}), "PercentOutOfRange", "spec.rollout.percent"),
        (cluster({"rollout": {"architecture": "arm64"}}), "InvalidField", "spec.rollout.percent is missing"),
        (cluster({"matchNodeLabels": [f"k{i}" for i in range(65)]}), "TooManyItems", "65 items; at most 64"),
        (
            cluster({"preferredArchitectures": [{"architecture": "amd64", "weight": 1}] * 17}),
            "TooManyItems",
            "at most 16",
        ),
        # exactly the CRD's enum: kubectl apply refuses these, so noe refuses them offline too
        (cluster({"schedulableArchitectures": ["AMD64"]}), "InvalidArchitecture", "'AMD64'"),
        (cluster({"schedulableArchitectures": ["arm64/v8"]}), "InvalidArchitecture", "'arm64/v8'"),
        (cluster({"schedulableArchitectures": ["i486"]}), "InvalidArchitecture", "'i486'"),
        (
            cluster({"imagePlatforms": [{"image": "r/" + "a" * 600, "platforms": ["linux/amd64"]}]}),
            "InvalidImage",
            "at most 512",
        ),
        (
            cluster({"imagePlatforms": [{"image": "a:1", "platforms": ["linux/amd64"] * 65}]}),
            "TooManyItems",
            r"spec.imagePlatforms\[0\].platforms: 65 items",
        ),
        (cluster({"imagePlatforms": [{"image": "a:1", "platforms": _nested(150)}]}), "TooComplex", "nested more"),
    ],
)
def test_invalid_policies_are_refused_whole(doc: dict[str, Any], reason: str, message: str) -> None:
    with pytest.raises(InvalidPolicy, match=message) as caught:
        read_policy(doc)
    assert caught.value.reason == reason
    assert caught.value.reason[0].isupper() and "_" not in caught.value.reason  # CamelCase, as conditions want


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be an object"),
        ({**cluster(), "kind": "Pod"}, "kind 'Pod'"),
        ({**cluster(), "apiVersion": "v1"}, "apiVersion 'v1'"),
        (cluster(name="Not_A_Name"), "not a DNS subdomain"),
        ({**namespaced(), "metadata": {"name": "x"}}, "metadata.namespace is missing"),
    ],
)
def test_unreadable_identity(doc: object, message: str) -> None:
    with pytest.raises(InvalidPolicy, match=message):
        read_ref(doc)


def test_the_cluster_kind_has_no_namespace_even_if_sent_one() -> None:
    assert read_ref(cluster(namespace="ignored")).namespace == ""
