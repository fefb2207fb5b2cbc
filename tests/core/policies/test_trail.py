"""admit() with placement policies: the merged settings place the pod, their imagePlatforms answer first,
and the pod carries the decision trail (arch.noe.adevinta.com/policies), through the same patch."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from noe_core import testing
from noe_core.admission.admitting import Admission, admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import LookupRequest, LookupResult, fixed
from noe_core.policies import PolicyRef
from noe_core.policies.settings import PolicySettings
from noe_core.policies.trail import MAX_VALUE, POLICIES_ANNOTATION, trail
from noe_core.registry.lookup_service import LookupService
from noe_core.util.deadline import Deadline

LOOKUPS = testing.platforms({"app:1": ["linux/amd64", "linux/arm64"], "broken:1": "503"})
NODES = [testing.node(a, a) for a in ("amd64", "arm64")]
POLICIES = testing.policies(
    testing.cluster_policy("base", preferredArchitectures=[{"architecture": "arm64", "weight": 80}]),
    testing.cluster_policy("prod-strict", namespaceSelector={"matchLabels": {"env": "prod"}}, strict=True, priority=5),
    testing.placement_policy(
        "amd-only", "team-a", podSelector={"matchLabels": {"app": "legacy"}}, schedulableArchitectures=["amd64"]
    ),
    testing.namespace("team-a", {"env": "prod"}),
)


def run(pod: dict[str, Any], settings: PolicySettings | None = None, **kwargs: Any) -> Admission:
    request = parse_admission_review(testing.admission_review(pod))
    return admit(request, settings or PolicySettings(), kwargs.pop("inspect", fixed(LOOKUPS)), **kwargs)


def patched(admission: Admission) -> dict[str, Any]:
    response = admission.response["response"]
    obj = admission.request.obj
    if "patch" not in response:
        return obj
    result: dict[str, Any] = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    return result


def allowed_on(obj: dict[str, Any]) -> set[str]:
    return {n["metadata"]["name"] for n in NODES if testing.schedulable(obj, n)}


def test_the_policies_that_matched_are_named_in_order_on_the_pod() -> None:
    admission = run(testing.pod(["app:1"], namespace="team-a", labels={"app": "legacy"}), policies=POLICIES)
    pod = patched(admission)
    assert pod["metadata"]["annotations"][POLICIES_ANNOTATION] == (
        "ClusterPlacementPolicy/base,ClusterPlacementPolicy/prod-strict,PlacementPolicy/team-a/amd-only"
    )
    assert allowed_on(pod) == {"amd64"}  # the namespace's policy narrowed the schedulable architectures
    assert admission.policies == tuple(pod["metadata"]["annotations"][POLICIES_ANNOTATION].split(","))
    assert admission.label == "mutated"


def test_existing_annotations_are_kept_and_a_stale_trail_replaced() -> None:
    pod = testing.pod(["app:1"], namespace="team-b")
    pod["metadata"]["annotations"] = {"keep": "me", POLICIES_ANNOTATION: "ClusterPlacementPolicy/old"}
    result = patched(run(pod, policies=POLICIES))
    assert result["metadata"]["annotations"] == {"keep": "me", POLICIES_ANNOTATION: "ClusterPlacementPolicy/base"}


def test_a_pod_that_selects_its_architecture_is_still_annotated() -> None:
    pod = testing.pod(["app:1"], namespace="team-b", node_selector={"kubernetes.io/arch": "amd64"})
    admission = run(pod, policies=POLICIES)
    assert patched(admission)["metadata"]["annotations"] == {POLICIES_ANNOTATION: "ClusterPlacementPolicy/base"}
    assert admission.label == "allowed"  # the trail alone is not a placement


def test_no_trail_without_a_matching_policy_for_a_bound_pod_or_a_denial() -> None:
    no_policy = testing.policies(testing.cluster_policy("prod", namespaceSelector={"matchLabels": {"env": "prod"}}))
    assert "annotations" not in patched(run(testing.pod(["app:1"], namespace="dev"), policies=no_policy))["metadata"]
    bound = run(testing.pod(["app:1"], node_name="n1"), policies=POLICIES)
    assert "patch" not in bound.response["response"]
    strict = run(testing.pod(["broken:1"], namespace="team-a"), policies=POLICIES)  # prod-strict: denied
    assert strict.label == "denied" and "patch" not in strict.response["response"]
    assert "namespace team-a is strict" in strict.decision.message  # type: ignore[operator]


def test_a_mutated_pod_mutated_again_changes_nothing() -> None:
    first = patched(run(testing.pod(["app:1"], namespace="team-a"), policies=POLICIES))
    again = run(first, policies=POLICIES)
    assert "patch" not in again.response["response"]


def test_without_policies_the_answer_is_the_flags_alone() -> None:
    request = parse_admission_review(testing.admission_review(testing.pod(["app:1"], namespace="team-a")))
    flags = admit(request, PolicySettings(), fixed(LOOKUPS))
    assert flags.response == admit(request, PolicySettings(), fixed(LOOKUPS), policies=testing.policies()).response
    assert flags.merged is not None and flags.merged.applied == ()


def test_daemonset_templates_get_the_settings_but_not_the_trail() -> None:
    admission = run(testing.daemonset(["app:1"], namespace="team-b"), policies=POLICIES)
    template = patched(admission)["spec"]["template"]
    assert POLICIES_ANNOTATION not in template["metadata"].get("annotations", {})
    assert admission.merged is not None and admission.policies == ("ClusterPlacementPolicy/base",)


def test_the_policies_image_platforms_answer_before_the_flag_file_and_the_registry() -> None:
    flag_file = StaticPlatforms.from_mapping({"tool:1": ["linux/amd64"], "corp/*": ["linux/amd64"]})
    service = LookupService(static=flag_file)  # no resolver: an undeclared image fails

    def inspect(request: LookupRequest) -> LookupResult:
        return service.inspect(request, deadline=Deadline.after(5)).result

    policies = testing.policies(
        testing.placement_policy(
            "declared",
            "team-a",
            imagePlatforms=[
                {"image": "tool:1", "platforms": ["linux/arm64"]},
                {"image": "corp/*", "platforms": ["linux/arm64"]},
            ],
        )
    )
    on_team_a = patched(
        run(testing.pod(["tool:1", "corp/x:2"], namespace="team-a"), policies=policies, inspect=inspect)
    )
    assert allowed_on(on_team_a) == {"arm64"}
    elsewhere = patched(
        run(testing.pod(["tool:1", "corp/x:2"], namespace="team-b"), policies=policies, inspect=inspect)
    )
    assert allowed_on(elsewhere) == {"amd64"}  # the flag's file: another namespace's policy does not apply


def test_a_policy_turns_gate_mode_on_for_the_pods_it_matches() -> None:
    temporary = {"app:1": LOOKUPS["app:1"], "slow:1": testing.platforms({"x": "t"})["x"]}
    temporary["slow:1"] = type(temporary["slow:1"])("timed out after 5s", temporary=True)
    policies = testing.policies(testing.placement_policy("gate", "team-a", onLookupFailure="gate"))
    gated = run(testing.pod(["app:1", "slow:1"], namespace="team-a"), policies=policies, inspect=fixed(temporary))
    assert gated.label == "gated"
    assert patched(gated)["metadata"]["annotations"] == {POLICIES_ANNOTATION: "PlacementPolicy/team-a/gate"}
    other = run(testing.pod(["app:1", "slow:1"], namespace="team-b"), policies=policies, inspect=fixed(temporary))
    assert other.label == "mutated"  # the flag says allow


def test_the_trail_is_bounded() -> None:
    refs = [PolicyRef("ClusterPlacementPolicy", f"policy-number-{i:04d}") for i in range(1000)]
    value = trail(refs)
    assert len(value) <= MAX_VALUE
    assert value.startswith("ClusterPlacementPolicy/policy-number-0000,")
    kept = value.split(",")[:-1]
    assert value.endswith(f",+{1000 - len(kept)} more")
    assert trail(refs[:3]) == ",".join(str(r) for r in refs[:3])
