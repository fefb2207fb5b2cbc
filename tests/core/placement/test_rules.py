"""The placement contract, rule by rule, checked by meaning: which nodes the mutated pod may use.

Each test runs the result through ``testing.schedulable`` over a grid of nodes
and asserts the exact wire shape only where it matters to the API server or users.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from noe_core import testing
from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import ImagePlatforms, Lookup
from noe_core.image.platform import Platform
from noe_core.placement.pipeline import decide
from noe_core.placement.rules import MAX_WARNING, Decision, images_to_inspect
from noe_core.policies.settings import PREFERRED_ARCH_LABEL, PolicySettings, parse_arch_tolerations

NODES = [
    testing.node("amd64", "amd64"),
    testing.node("arm64", "arm64"),
    testing.node("arm", "arm/v7"),
    testing.node("ppc64le", "ppc64le"),
    testing.node("windows", "amd64", os="windows"),
    testing.node("amd64-z1-team-a", "amd64", labels={"zone": "z1", "team": "a"}),
    testing.node("arm64-z2-team-b", "arm64", labels={"zone": "z2", "team": "b"}),
    testing.node("arm64-tainted", "arm64", taints=["arch=arm64:NoSchedule"]),
    testing.node("arm-tainted", "arm/v7", taints=["arch=arm:NoSchedule"]),
]
ALL = {n["metadata"]["name"] for n in NODES}
AMD64 = {"amd64", "windows", "amd64-z1-team-a"}
ARM64_UNTAINTED = {"arm64", "arm64-z2-team-b"}

MULTI = {"multi:1": ["linux/amd64", "linux/arm64/v8", "linux/arm/v7", "unknown/unknown"]}
LOOKUPS = testing.platforms(
    {
        **MULTI,
        "amd-arm64:1": ["linux/amd64", "linux/arm64"],
        "amd64-only:1": ["linux/amd64"],
        "arm64-only:1": ["linux/arm64/v8", "unknown/unknown"],
        "windows-only:1": ["windows(10.0.17763)/amd64"],
        "mixed-os:1": ["linux/arm64", "windows/amd64"],
        "broken:1": "registry.corp answered 503",
        "denied:1": "401 Unauthorized and no credentials configured",
    }
)
TOLERATIONS = parse_arch_tolerations("arm64=arch=arm64:NoSchedule,arm=arch=arm:NoSchedule")
DEFAULT = PolicySettings()


def run(
    obj: Mapping[str, Any],
    settings: PolicySettings = DEFAULT,
    *,
    lookups: Mapping[str, Lookup] = LOOKUPS,
    kind: str = "Pod",
    operation: str = "CREATE",
    namespace: str = "default",
    **kwargs: Any,
) -> Decision:
    return decide(
        obj, kind=kind, operation=operation, namespace=namespace, lookups=lookups, settings=settings, **kwargs
    )


def admitted(obj: Mapping[str, Any]) -> set[str]:
    return {n["metadata"]["name"] for n in NODES if testing.schedulable(obj, n)}


def preferred_terms(obj: Mapping[str, Any]) -> list[Any]:
    spec = obj["spec"]["template"]["spec"] if obj.get("kind") == "DaemonSet" else obj["spec"]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])


# Rule 1 ---------------------------------------------------------------------------------------


def test_rule1_node_name_changes_nothing_at_all() -> None:
    pod = testing.pod(images=["arm64-only:1"], node_name="amd64", labels={"team": "a"})
    settings = PolicySettings(match_node_labels=("team",), arch_tolerations=TOLERATIONS)
    decision = run(pod, settings)
    assert decision.allowed and not decision.changed and decision.obj == pod
    assert decision.common is None
    assert images_to_inspect(pod, kind="Pod", operation="CREATE") == []


# Rule 2 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"node_selector": {"kubernetes.io/arch": "amd64"}},
        {"node_selector": {"beta.kubernetes.io/arch": "amd64"}},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
                        ]
                    }
                }
            }
        },
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["amd64"]}]}
                        ]
                    }
                }
            }
        },
    ],
)
def test_rule2_pod_that_selects_its_architecture_is_left_alone(kwargs: dict[str, Any]) -> None:
    pod = testing.pod(images=["arm64-only:1"], labels={"team": "a"}, **kwargs)
    settings = PolicySettings(match_node_labels=("team",), arch_tolerations=TOLERATIONS)
    assert images_to_inspect(pod, kind="Pod", operation="CREATE") == []
    decision = run(pod, settings, lookups={})
    assert decision.allowed and decision.common is None
    before = admitted(pod)
    # match-node-labels still apply, nothing else: no toleration, no architecture change
    assert admitted(decision.obj) == {n for n in before if n == "amd64-z1-team-a"}
    assert "tolerations" not in decision.obj["spec"]
    assert not preferred_terms(decision.obj)


# Rule 3 ---------------------------------------------------------------------------------------


def test_rule3_no_images_means_no_architecture_change() -> None:
    pod = testing.pod(images=[""], labels={"team": "b"})
    settings = PolicySettings(match_node_labels=("team",), arch_tolerations=TOLERATIONS)
    assert images_to_inspect(pod, kind="Pod", operation="CREATE") == []
    decision = run(pod, settings)
    assert decision.allowed and decision.common is None
    assert admitted(decision.obj) == {"arm64-z2-team-b"}
    assert "tolerations" not in decision.obj["spec"]


def test_rule3_images_are_containers_and_init_containers() -> None:
    pod = testing.pod(images=["multi:1", "multi:1"], init_images=["amd-arm64:1"])
    assert images_to_inspect(pod, kind="Pod", operation="CREATE") == ["multi:1", "amd-arm64:1"]
    assert run(pod).common == ("amd64", "arm64")
    init_only_arm = testing.pod(images=["multi:1"], init_images=["arm64-only:1"])
    assert admitted(run(init_only_arm).obj) == ARM64_UNTAINTED


# Rule 4 ---------------------------------------------------------------------------------------


def test_rule4_multi_arch_image_admits_its_architectures_on_the_system_os_only() -> None:
    decision = run(testing.pod(images=["multi:1"]))
    assert decision.common == ("amd64", "arm", "arm64")
    # windows node carries kubernetes.io/arch=amd64: only kube's own OS label would keep it out
    assert admitted(decision.obj) == AMD64 | ARM64_UNTAINTED | {"arm"}


def test_rule4_unknown_entries_are_ignored() -> None:
    decision = run(testing.pod(images=["arm64-only:1"]))
    assert decision.common == ("arm64",)
    assert admitted(decision.obj) == ARM64_UNTAINTED


def test_rule4_other_os_entries_are_dropped_and_an_entry_without_os_matches() -> None:
    assert run(testing.pod(images=["mixed-os:1"])).common == ("arm64",)
    no_os = {"plain:1": ImagePlatforms((Platform.of("", "x86_64"),))}
    assert run(testing.pod(images=["plain:1"]), lookups=no_os).common == ("amd64",)
    windows = run(testing.pod(images=["windows-only:1"]), PolicySettings(system_os="windows"))
    assert windows.common == ("amd64",)


def test_rule4_schedulable_list_filters_architectures() -> None:
    settings = PolicySettings(schedulable_archs=frozenset({"amd64", "arm64"}))
    decision = run(testing.pod(images=["multi:1"]), settings)
    assert decision.common == ("amd64", "arm64")
    assert "arm" not in admitted(decision.obj)


def test_rule4_aliases_are_normalised() -> None:
    lookups = {"a": ImagePlatforms((Platform.of("linux", "aarch64"), Platform.of("linux", "x86_64")))}
    assert run(testing.pod(images=["a"]), lookups=lookups).common == ("amd64", "arm64")


# Rule 5 ---------------------------------------------------------------------------------------


def test_rule5_failed_image_is_left_out_with_a_warning() -> None:
    decision = run(testing.pod(images=["amd-arm64:1", "broken:1"]))
    assert decision.allowed and decision.common == ("amd64", "arm64")
    assert decision.warnings == ("cannot inspect broken:1: registry.corp answered 503",)


def test_rule5_image_missing_from_lookups_counts_as_not_inspected() -> None:
    decision = run(testing.pod(images=["amd64-only:1", "elsewhere:1"]))
    assert decision.common == ("amd64",)
    assert any("elsewhere:1" in w for w in decision.warnings)


def test_rule5_nothing_inspected_means_no_architecture_change() -> None:
    pod = testing.pod(images=["broken:1", "denied:1"], labels={"team": "a"})
    settings = PolicySettings(match_node_labels=("team",), arch_tolerations=TOLERATIONS)
    decision = run(pod, settings)
    assert decision.allowed and decision.common is None
    assert len(decision.warnings) == 2
    assert admitted(decision.obj) == {"amd64-z1-team-a"}
    assert "tolerations" not in decision.obj["spec"]


def test_rule5_strict_namespace_denies_uninspectable_images() -> None:
    settings = PolicySettings(strict_namespaces=frozenset({"payments"}))
    pod = testing.pod(images=["amd64-only:1", "denied:1"])
    decision = run(pod, settings, namespace="payments")
    assert not decision.allowed and not decision.changed
    assert decision.message is not None and "denied:1" in decision.message and "401" in decision.message
    assert decision.obj == pod
    assert run(pod, settings, namespace="other").allowed


def test_rule5_strict_namespace_denies_platform_entries_without_os_or_architecture() -> None:
    settings = PolicySettings(strict_namespaces=frozenset({"payments"}))
    no_os = {"plain:1": ImagePlatforms((Platform.of("", "amd64"),))}
    decision = run(testing.pod(images=["plain:1"]), settings, namespace="payments", lookups=no_os)
    assert not decision.allowed and decision.message is not None and "without os or architecture" in decision.message
    # attestation placeholders are ignored, not counted as incomplete
    ok = run(testing.pod(images=["arm64-only:1"]), settings, namespace="payments")
    assert ok.allowed and ok.common == ("arm64",)


def test_rule5_manifest_with_only_unknown_entries_is_not_inspectable() -> None:
    lookups = testing.platforms({"att:1": ["unknown/unknown"], "amd64-only:1": ["linux/amd64"]})
    decision = run(testing.pod(images=["att:1", "amd64-only:1"]), lookups=lookups)
    assert decision.common == ("amd64",)
    assert decision.warnings == ("cannot inspect att:1: its manifest names no platform",)


def test_rule5_warnings_fit_the_api_server_limit() -> None:
    image = "registry.example.com/" + "very-long-team-name/" * 8 + "app@sha256:" + "a" * 64
    reason = "registry answered 500 " + "x" * 300
    decision = run(
        testing.pod(images=[image, "amd64-only:1"]),
        lookups={**LOOKUPS, image: testing.platforms({image: reason})[image]},
    )
    (warning,) = decision.warnings
    assert len(warning) <= MAX_WARNING
    assert warning.startswith("cannot inspect registry.example.com/") and "...aaaa" in warning


# Rule 6 ---------------------------------------------------------------------------------------


def test_rule6_empty_intersection_denies_listing_each_image() -> None:
    pod = testing.pod(images=["amd64-only:1", "arm64-only:1"])
    decision = run(pod)
    assert not decision.allowed and decision.common == ()
    assert decision.message is not None
    assert "amd64-only:1: amd64" in decision.message and "arm64-only:1: arm64" in decision.message
    assert decision.obj == pod and not decision.changed


def test_rule6_image_for_another_os_only_denies() -> None:
    decision = run(testing.pod(images=["windows-only:1"]))
    assert not decision.allowed
    assert decision.message is not None and "windows(10.0.17763)/amd64" in decision.message


def test_rule6_schedulable_list_can_empty_the_intersection() -> None:
    settings = PolicySettings(preferred_arch="", schedulable_archs=frozenset({"ppc64le"}))
    decision = run(testing.pod(images=["multi:1"]), settings)
    assert not decision.allowed and decision.message is not None and "ppc64le" in decision.message


# Rules 7 and 8 --------------------------------------------------------------------------------


def test_rule8_required_affinity_and_soft_preference_wire_shape() -> None:
    decision = run(testing.pod(images=["amd-arm64:1"]))
    assert decision.changed
    assert decision.obj["spec"]["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
                    },
                }
            ],
        }
    }
    assert admitted(decision.obj) == AMD64 | ARM64_UNTAINTED  # soft: arm64 still allowed


def test_rule8_requirement_is_anded_into_every_existing_term() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]},
                ]
            }
        }
    }
    pod = testing.pod(images=["amd64-only:1"], affinity=affinity)
    assert admitted(pod) == {"amd64-z1-team-a", "arm64-z2-team-b"}
    decision = run(pod)
    # Appending a term (the Go Noe) would have kept arm64-z2-team-b through the zone z2 term.
    assert admitted(decision.obj) == {"amd64-z1-team-a"}


def test_rule8_weight_setting() -> None:
    decision = run(testing.pod(images=["amd-arm64:1"]), PolicySettings(preferred_arch_weight=7))
    assert preferred_terms(decision.obj)[0]["weight"] == 7


def test_rule8_single_common_architecture_needs_no_preferred_term() -> None:
    decision = run(testing.pod(images=["amd64-only:1"]))
    assert decision.common == ("amd64",)
    assert preferred_terms(decision.obj) == []
    assert admitted(decision.obj) == AMD64


def test_rule8_preferred_not_common_adds_no_preference() -> None:
    decision = run(testing.pod(images=["multi:1"]), PolicySettings(preferred_arch="ppc64le"))
    assert preferred_terms(decision.obj) == []
    no_pref = run(testing.pod(images=["multi:1"]), PolicySettings(preferred_arch=""))
    assert preferred_terms(no_pref.obj) == []


def test_rule8_required_mode_pins_node_selector() -> None:
    settings = PolicySettings(preference_mode="required")
    decision = run(testing.pod(images=["amd-arm64:1"]), settings)
    assert decision.obj["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert preferred_terms(decision.obj) == []
    assert admitted(decision.obj) == AMD64
    # preferred not in common: nothing pinned, the requirement alone holds
    arm = run(testing.pod(images=["arm64-only:1"]), settings)
    assert "nodeSelector" not in arm.obj["spec"] and admitted(arm.obj) == ARM64_UNTAINTED


def test_rule7_pod_label_overrides_the_configured_preference() -> None:
    pod = testing.pod(images=["amd-arm64:1"], labels={PREFERRED_ARCH_LABEL: "arm64"})
    decision = run(pod)
    assert preferred_terms(decision.obj)[0]["preference"]["matchExpressions"][0]["values"] == ["arm64"]
    assert decision.warnings == ()
    required = run(pod, PolicySettings(preference_mode="required"))
    assert admitted(required.obj) == ARM64_UNTAINTED


def test_rule7_label_for_an_unschedulable_arch_is_ignored_with_a_warning() -> None:
    settings = PolicySettings(schedulable_archs=frozenset({"amd64", "arm64"}))
    pod = testing.pod(images=["multi:1"], labels={PREFERRED_ARCH_LABEL: "arm"})
    decision = run(pod, settings)
    assert decision.warnings == ("could not select preferred arch: arm",)
    assert preferred_terms(decision.obj)[0]["preference"]["matchExpressions"][0]["values"] == ["amd64"]


def test_rule7_label_for_an_arch_not_every_image_supports_warns_and_falls_back() -> None:
    pod = testing.pod(images=["amd-arm64:1"], labels={PREFERRED_ARCH_LABEL: "ppc64le"})
    decision = run(pod)
    assert decision.allowed and decision.warnings == ("could not select preferred arch: ppc64le",)
    assert preferred_terms(decision.obj)[0]["preference"]["matchExpressions"][0]["values"] == ["amd64"]
    assert admitted(decision.obj) == AMD64 | ARM64_UNTAINTED


def test_rule7_label_alias_is_normalised() -> None:
    pod = testing.pod(images=["amd-arm64:1"], labels={PREFERRED_ARCH_LABEL: "aarch64"})
    decision = run(pod)
    assert preferred_terms(decision.obj)[0]["preference"]["matchExpressions"][0]["values"] == ["arm64"]


# Rule 9 ---------------------------------------------------------------------------------------


def test_rule9_match_node_labels() -> None:
    settings = PolicySettings(match_node_labels=("team", "absent"))
    decision = run(testing.pod(images=["multi:1"], labels={"team": "b", "other": "x"}), settings)
    assert admitted(decision.obj) == {"arm64-z2-team-b"}


def test_rule9_label_already_in_node_selector_is_not_repeated() -> None:
    settings = PolicySettings(match_node_labels=("team",))
    pod = testing.pod(images=["multi:1"], labels={"team": "b"}, node_selector={"team": "b"})
    decision = run(pod, settings)
    terms = decision.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert all(e["key"] != "team" for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"])


def test_rule9_conflicting_node_selector_warns() -> None:
    settings = PolicySettings(match_node_labels=("team",))
    pod = testing.pod(images=["multi:1"], labels={"team": "b"}, node_selector={"team": "a"})
    decision = run(pod, settings)
    assert admitted(decision.obj) == set()
    assert any("conflicts" in w for w in decision.warnings)


# Rule 10 --------------------------------------------------------------------------------------


def test_rule10_tolerations_only_for_allowed_architectures() -> None:
    settings = PolicySettings(arch_tolerations=TOLERATIONS)
    arm64 = run(testing.pod(images=["arm64-only:1"]), settings)
    assert admitted(arm64.obj) == ARM64_UNTAINTED | {"arm64-tainted"}
    assert arm64.obj["spec"]["tolerations"] == [
        {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
    ]
    amd64 = run(testing.pod(images=["amd64-only:1"]), settings)
    assert "tolerations" not in amd64.obj["spec"]
    multi = run(testing.pod(images=["multi:1"]), settings)
    assert {"arm64-tainted", "arm-tainted"} <= admitted(multi.obj)


def test_rule10_required_mode_tolerates_only_the_pinned_architecture() -> None:
    settings = PolicySettings(arch_tolerations=TOLERATIONS, preference_mode="required")
    decision = run(testing.pod(images=["multi:1"]), settings)
    assert "tolerations" not in decision.obj["spec"]
    assert admitted(decision.obj) == AMD64


def test_rule10_existing_equivalent_toleration_is_not_duplicated() -> None:
    settings = PolicySettings(arch_tolerations=TOLERATIONS)
    pod = testing.pod(images=["arm64-only:1"], tolerations=[{"key": "arch", "operator": "Exists"}])
    decision = run(pod, settings)
    assert decision.obj["spec"]["tolerations"] == [{"key": "arch", "operator": "Exists"}]


# Rule 11 --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "operation"),
    [("Pod", "UPDATE"), ("Pod", "DELETE"), ("Deployment", "CREATE"), ("DaemonSet", "DELETE")],
)
def test_rule11_other_kinds_and_operations_are_unchanged(kind: str, operation: str) -> None:
    obj = testing.pod(images=["arm64-only:1"])
    decision = run(obj, kind=kind, operation=operation)
    assert decision.allowed and not decision.changed and decision.obj == obj
    assert images_to_inspect(obj, kind=kind, operation=operation) == []


def test_rule11_subresources_are_unchanged() -> None:
    ds = testing.daemonset(images=["arm64-only:1"])
    decision = run(ds, kind="DaemonSet", operation="UPDATE", sub_resource="status")
    assert not decision.changed
    assert images_to_inspect(ds, kind="DaemonSet", operation="UPDATE", sub_resource="status") == []


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_rule11_daemonset_template_is_mutated(operation: str) -> None:
    settings = PolicySettings(arch_tolerations=TOLERATIONS)
    ds = testing.daemonset(images=["arm64-only:1"])
    assert images_to_inspect(ds, kind="DaemonSet", operation=operation) == ["arm64-only:1"]
    decision = run(ds, settings, kind="DaemonSet", operation=operation)
    assert decision.changed and decision.common == ("arm64",)
    assert admitted(decision.obj) == ARM64_UNTAINTED | {"arm64-tainted"}
    # The controller then pins each pod with matchFields: the template requirement still applies.
    template = decision.obj["spec"]["template"]
    spec = template["spec"]
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchFields"
    ] = [{"key": "metadata.name", "operator": "In", "values": ["amd64"]}]
    assert admitted({"kind": "Pod", "spec": spec}) == set()


# Rule 12 and purity ---------------------------------------------------------------------------


def test_rule12_dry_run_gets_the_same_answer() -> None:
    pod = testing.pod(images=["amd-arm64:1"])
    assert run(pod, dry_run=True) == run(pod, dry_run=False)


def test_decide_never_mutates_its_input() -> None:
    pod = testing.pod(
        images=["multi:1"],
        labels={"team": "a"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
                }
            }
        },
    )
    snapshot = repr(pod)
    settings = PolicySettings(match_node_labels=("team",), arch_tolerations=TOLERATIONS)
    decision = run(pod, settings)
    assert repr(pod) == snapshot and decision.changed


def test_decision_is_frozen_and_explains_itself() -> None:
    decision = run(testing.pod(images=["amd-arm64:1", "broken:1"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.allowed = False  # type: ignore[misc]
    text = "\n".join(decision.reasons)
    assert "broken:1" in text and "kubernetes.io/arch in amd64, arm64" in text
    assert ALL  # the grid is not empty


@pytest.mark.parametrize(
    ("obj", "kind"),
    [({"metadata": {}}, "Pod"), ({"spec": None}, "Pod"), ({"spec": {"template": {}}}, "DaemonSet")],
)
def test_object_without_pod_spec_is_left_unchanged(obj: dict[str, Any], kind: str) -> None:
    decision = run(obj, kind=kind)
    assert decision.allowed and not decision.changed and decision.obj == obj


def test_too_deep_an_object_is_invalid_for_any_kind() -> None:
    deep: object = []
    for _ in range(2000):
        deep = [deep]
    for kind in ("Pod", "Deployment"):
        with pytest.raises(InvalidObject, match="nested more than"):
            decide(
                {"spec": {"deep": deep}},
                kind=kind,
                operation="CREATE",
                namespace="default",
                lookups={},
                settings=PolicySettings(),
            )
