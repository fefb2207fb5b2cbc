"""The scheduler predicate users rely on must agree with kube-scheduler, so it is tested itself."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure

AMD = testing.node("n-amd", "amd64", labels={"zone": "z1", "gen": "5"})
ARM = testing.node("n-arm", "arm64", labels={"zone": "z2"})


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def test_builders() -> None:
    pod = testing.pod(images=["a"], init_images=["b"], labels={"x": "1"}, node_name="n")
    assert pod["spec"]["containers"][0]["image"] == "a" and pod["spec"]["initContainers"][0]["image"] == "b"
    assert pod["metadata"]["labels"] == {"x": "1"} and pod["spec"]["nodeName"] == "n"
    ds = testing.daemonset(images=["a"], labels={"app": "agent"})
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
    assert AMD["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"
    assert testing.node("p", "arm/v7")["metadata"]["labels"]["kubernetes.io/arch"] == "arm"
    looked = testing.platforms({"img": ["linux/amd64"], "bad": "reason"})
    assert isinstance(looked["img"], ImagePlatforms) and looked["bad"] == LookupFailure("reason")
    review = testing.admission_review(ds, operation="UPDATE", api_version="admission.k8s.io/v1beta1")
    request = parse_admission_review(review)
    assert (request.kind, request.operation, request.api_version) == ("DaemonSet", "UPDATE", "admission.k8s.io/v1beta1")


def test_builders_do_not_share_state() -> None:
    selector = {"a": "b"}
    pod = testing.pod(node_selector=selector)
    pod["spec"]["nodeSelector"]["c"] = "d"
    assert selector == {"a": "b"}


@pytest.mark.parametrize(
    ("spec", "amd", "arm"),
    [
        ({}, True, True),
        ({"nodeName": "n-arm"}, False, True),
        ({"nodeSelector": {"kubernetes.io/arch": "arm64"}}, False, True),
        ({"nodeSelector": {"kubernetes.io/arch": "arm64", "zone": "z1"}}, False, False),
        ({"affinity": _affinity({"matchExpressions": [_expr("zone", "In", "z1")]})}, True, False),
        ({"affinity": _affinity({"matchExpressions": [_expr("zone", "NotIn", "z1")]})}, False, True),
        ({"affinity": _affinity({"matchExpressions": [_expr("gen", "Exists")]})}, True, False),
        ({"affinity": _affinity({"matchExpressions": [_expr("gen", "DoesNotExist")]})}, False, True),
        ({"affinity": _affinity({"matchExpressions": [_expr("gen", "Gt", "4")]})}, True, False),
        ({"affinity": _affinity({"matchExpressions": [_expr("gen", "Lt", "4")]})}, False, False),
        ({"affinity": _affinity({"matchExpressions": [_expr("zone", "Gt", "4")]})}, False, False),
        # terms are ORed, expressions inside one term ANDed
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [_expr("zone", "In", "z1")]}, {"matchExpressions": [_expr("zone", "In", "z2")]}
                )
            },
            True,
            True,
        ),
        (
            {
                "affinity": _affinity(
                    {"matchExpressions": [_expr("zone", "In", "z1"), _expr("kubernetes.io/arch", "In", "arm64")]}
                )
            },
            False,
            False,
        ),
        ({"affinity": _affinity({"matchFields": [_expr("metadata.name", "In", "n-arm")]})}, False, True),
        ({"affinity": _affinity({"matchFields": [_expr("metadata.name", "NotIn", "n-arm")]})}, True, False),
        ({"affinity": _affinity({})}, False, False),  # an empty term matches nothing
        ({"affinity": _affinity()}, False, False),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "preference": {"matchExpressions": [_expr("zone", "In", "z9")]}}
                        ]
                    }
                }
            },
            True,
            True,
        ),
    ],
)
def test_node_selection(spec: dict[str, Any], amd: bool, arm: bool) -> None:
    assert testing.schedulable({"spec": spec}, AMD) is amd
    assert testing.schedulable(spec | {"containers": []}, ARM) is arm


@pytest.mark.parametrize(
    ("taint", "tolerations", "expected"),
    [
        ("arch=arm64:NoSchedule", [], False),
        ("arch=arm64:NoExecute", [], False),
        ("arch=arm64:PreferNoSchedule", [], True),
        ("arch=arm64:NoSchedule", [{"key": "arch", "value": "arm64", "effect": "NoSchedule"}], True),
        ("arch=arm64:NoSchedule", [{"key": "arch", "value": "arm64"}], True),  # Equal by default, any effect
        ("arch=arm64:NoSchedule", [{"key": "arch", "operator": "Equal", "value": "arm"}], False),
        ("arch=arm64:NoSchedule", [{"key": "arch", "operator": "Exists", "effect": "NoExecute"}], False),
        ("arch=arm64:NoSchedule", [{"key": "arch", "operator": "Exists"}], True),
        ("arch=arm64:NoSchedule", [{"operator": "Exists"}], True),
        ("arch=arm64:NoSchedule", [{"operator": "Equal"}], False),
        ("dedicated:NoSchedule", [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], True),
        ("dedicated:NoSchedule", [{"key": "dedicated", "operator": "Equal", "value": ""}], True),
    ],
)
def test_taints(taint: str, tolerations: list[dict[str, Any]], expected: bool) -> None:
    tainted = testing.node("t", "arm64", taints=[taint])
    assert testing.schedulable(testing.pod(tolerations=tolerations), tainted) is expected


def test_daemonset_and_unknown_operator() -> None:
    ds = testing.daemonset(node_selector={"kubernetes.io/arch": "amd64"})
    assert testing.schedulable(ds, AMD) and not testing.schedulable(ds, ARM)
    with pytest.raises(ValueError, match="unknown node selector operator"):
        testing.schedulable({"spec": {"affinity": _affinity({"matchExpressions": [_expr("a", "Like")]})}}, AMD)
    with pytest.raises(ValueError, match="key"):
        testing.parse_taint("NoSchedule")


def test_policy_builders_are_judged_as_in_the_cluster() -> None:
    from noe_core.errors import InvalidPolicy
    from noe_core.policies.settings import PolicySettings

    policies = testing.policies(
        testing.cluster_policy("base", {"priority": 3}, strict=True),
        testing.placement_policy("team", "team-a", preferenceMode="required"),
        testing.namespace("team-a", {"env": "prod"}),
    )
    merged = policies.settings_for(PolicySettings(), namespace="team-a", pod_labels={})
    assert merged.annotation == "ClusterPlacementPolicy/base,PlacementPolicy/team-a/team"
    assert merged.settings.preference_mode == "required" and "team-a" in merged.settings.strict_namespaces
    assert policies.namespaces["team-a"] == {"env": "prod", "kubernetes.io/metadata.name": "team-a"}
    with pytest.raises(InvalidPolicy, match="PriorityOutOfRange"):
        testing.policies(testing.cluster_policy("bad", priority=5000))


def test_decide_is_the_webhooks_decision_policies_learned_and_gate_included() -> None:
    """``testing.decide`` runs the one pipeline: a policy's imagePlatforms answer, its trail annotation, a
    learned architecture left out, and gate mode, as the webhook does."""
    import json

    from noe_core.admission.admitting import admit
    from noe_core.admission.review import parse_admission_review
    from noe_core.image.image_platforms import fixed
    from noe_core.image.learned import LearnedPlatforms, read_learned
    from noe_core.policies.settings import PolicySettings

    digest = "sha256:" + "a" * 64
    lookups = {
        "app:1": ImagePlatforms.of("linux/amd64", "linux/arm64", digest=digest),
        "slow:1": LookupFailure("timed out after 5s", temporary=True),
    }
    policies = testing.policies(
        testing.cluster_policy("declares", imagePlatforms=[{"image": "db:*", "platforms": ["linux/arm64"]}])
    )
    learned = LearnedPlatforms(
        read_learned({"sha256-" + "a" * 64: json.dumps({"architectures": ["arm64"], "evidence": [], "time": "t"})})
    )
    pod = testing.pod(["app:1", "db:2"], namespace="team-a")
    decision = testing.decide(pod, lookups, policies=policies)
    assert decision.common == ("arm64",)  # db:2 answered by the policy, app:1 by the lookups
    assert (
        decision.obj["metadata"]["annotations"]["arch.noe.adevinta.com/policies"] == "ClusterPlacementPolicy/declares"
    )
    review = testing.admission_review(pod, uid="u")
    webhook = admit(parse_admission_review(review), PolicySettings(), fixed(lookups), policies=policies)
    assert decision.patch == webhook.decision.patch
    assert testing.decide(testing.pod(["app:1"]), lookups, learned=learned).common == ("amd64",)
    gated = testing.decide(testing.pod(["app:1", "slow:1"]), lookups, PolicySettings(on_lookup_failure="gate"))
    assert gated.gated == ("slow:1",) and gated.label == "gated"
