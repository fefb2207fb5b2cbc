"""Rule 13a: a fallback architecture for pods whose images could not all be inspected (``--fallback-arch``,
``fallbackArchitecture``). Meaning checked on a node grid, as the scheduler would judge the patched pod."""

from __future__ import annotations

from typing import Any

from noe_core.admission.admitting import Admission, admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure, fixed
from noe_core.placement.pipeline import FALLBACK_LABEL
from noe_core.policies.merge import Policies
from noe_core.policies.settings import ArchToleration, PolicySettings
from noe_core.policies.trail import POLICIES_ANNOTATION
from noe_core.testing import admission_review, cluster_policy, daemonset, node, pod, policies, schedulable

MULTI = ImagePlatforms.of("linux/amd64", "linux/arm64", "linux/s390x")
AMD_ARM = ImagePlatforms.of("linux/amd64", "linux/arm64")
AMD = ImagePlatforms.of("linux/amd64")
DOWN = LookupFailure("registry.corp answered 503", temporary=True)
GONE = LookupFailure("manifest unknown (404)")
TAINT = {"key": "arch", "value": "arm64", "effect": "NoSchedule"}
NODES = [node("n-amd64", "amd64"), node("n-arm64", "arm64", taints=[TAINT]), node("n-s390x", "s390x")]
FALLBACK = PolicySettings(preferred_arch="amd64", fallback_arch="arm64")


def run(
    obj: dict[str, Any],
    lookups: dict[str, Any],
    settings: PolicySettings = FALLBACK,
    *,
    mode: str | None = None,
    namespace: str = "apps",
    with_policies: Policies | None = None,
) -> Admission:
    request = parse_admission_review(admission_review(obj, namespace=namespace))
    return admit(request, settings, fixed(lookups), on_lookup_failure=mode, policies=with_policies)  # type: ignore[arg-type]


def where(admission: Admission) -> set[str]:
    return {n["metadata"]["name"] for n in NODES if schedulable(admission.decision.obj, n)}


def labels(admission: Admission) -> dict[str, str]:
    return dict(admission.decision.obj["metadata"].get("labels") or {})


def test_an_image_that_cannot_be_inspected_sends_the_pod_to_the_fallback_when_the_others_allow_it() -> None:
    admission = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN})
    decision = admission.decision
    assert decision.fallback == "arm64"
    # required onto arm64 only (the arm64 node's taint is not tolerated: --arch-tolerations names none)
    untainted = [node("n-amd64", "amd64"), node("n-arm64", "arm64"), node("n-s390x", "s390x")]
    assert {n["metadata"]["name"] for n in untainted if schedulable(decision.obj, n)} == {"n-arm64"}
    assert where(admission) == set()
    affinity = decision.obj["spec"]["affinity"]["nodeAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in affinity
    assert labels(admission)[FALLBACK_LABEL] == "true"
    assert decision.obj["metadata"]["annotations"][POLICIES_ANNOTATION] == "fallbackArchitecture=arm64"
    # rule 5's warning still names the image
    assert any("side:1" in w and "503" in w for w in decision.warnings)
    assert admission.label == "mutated"


def test_tolerations_follow_the_fallback_architecture() -> None:
    settings = PolicySettings(
        fallback_arch="arm64", arch_tolerations=(ArchToleration("arm64", "arch", "arm64", "NoSchedule"),)
    )
    admission = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": GONE}, settings)
    assert where(admission) == {"n-arm64"}


def test_nothing_inspected_falls_back_to_the_architecture_alone() -> None:
    admission = run(pod(["side:1"]), {"side:1": DOWN})
    assert admission.decision.fallback == "arm64"
    assert admission.decision.obj["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
        ]
    }


def test_a_fallback_the_inspected_images_do_not_offer_changes_nothing() -> None:
    without = run(pod(["app:1", "side:1"]), {"app:1": AMD, "side:1": DOWN}, PolicySettings(preferred_arch="amd64"))
    admission = run(pod(["app:1", "side:1"]), {"app:1": AMD, "side:1": DOWN})
    assert admission.decision.fallback == ""
    assert admission.decision.patch == without.decision.patch
    assert admission.decision.warnings == without.decision.warnings
    assert FALLBACK_LABEL not in labels(admission)


def test_a_fallback_outside_the_schedulable_set_changes_nothing() -> None:
    policy = policies(cluster_policy("narrow", schedulableArchitectures=["amd64", "s390x"]))
    admission = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN}, with_policies=policy)
    assert admission.decision.fallback == ""
    assert where(admission) == {"n-amd64", "n-s390x"}


def test_unset_it_changes_nothing_and_every_image_inspected_never_falls_back() -> None:
    plain = PolicySettings(preferred_arch="amd64")
    assert run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN}, plain).decision.fallback == ""
    inspected = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": AMD_ARM})
    assert inspected.decision.fallback == "" and where(inspected) == {"n-amd64"}  # arm64 tainted, untolerated


def test_a_strict_namespace_still_denies() -> None:
    settings = PolicySettings(fallback_arch="arm64", strict_namespaces=frozenset({"apps"}))
    admission = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN}, settings)
    assert not admission.decision.allowed and admission.decision.fallback == ""


def test_gate_mode_gates_at_admission_instead() -> None:
    admission = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN}, mode="gate")
    assert admission.label == "gated" and admission.decision.fallback == ""
    assert FALLBACK_LABEL not in labels(admission)


def test_a_policy_sets_it_and_an_empty_value_switches_the_flags_off() -> None:
    on = policies(cluster_policy("fallback", fallbackArchitecture="s390x"))
    admission = run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN}, with_policies=on)
    assert admission.decision.fallback == "s390x" and where(admission) == {"n-s390x"}
    assert admission.decision.obj["metadata"]["annotations"][POLICIES_ANNOTATION] == (
        "ClusterPlacementPolicy/fallback,fallbackArchitecture=s390x"
    )
    off = policies(cluster_policy("no-fallback", fallbackArchitecture=""))
    assert run(pod(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN}, with_policies=off).decision.fallback == ""


def test_daemonsets_never_fall_back() -> None:
    admission = run(daemonset(["app:1", "side:1"]), {"app:1": MULTI, "side:1": DOWN})
    assert admission.decision.fallback == ""
