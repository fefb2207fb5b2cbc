"""Rules 7 and 8 with several weighted preferences (placement policies' ``preferredArchitectures``).

With the flags alone there is one preference (``--preferred-arch`` at ``--preferred-arch-weight``):
tests/core/placement/test_rules.py holds that behaviour; here the list a policy gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noe_core import testing
from noe_core.placement.pipeline import decide
from noe_core.placement.rules import Decision
from noe_core.policies.settings import (
    PREFERRED_ARCH_LABEL,
    PolicySettings,
    WeightedArchitecture,
    parse_arch_tolerations,
)

LOOKUPS = testing.platforms(
    {
        "three:1": ["linux/amd64", "linux/arm64", "linux/ppc64le"],
        "amd-arm:1": ["linux/amd64", "linux/arm64"],
        "arm-only:1": ["linux/arm64"],
    }
)
NODES = [testing.node(arch, arch) for arch in ("amd64", "arm64", "ppc64le", "s390x")]


def prefs(*pairs: tuple[str, int], **settings: Any) -> PolicySettings:
    return PolicySettings(preferences=tuple(WeightedArchitecture(a, w) for a, w in pairs), **settings)


def run(images: list[str], settings: PolicySettings, labels: Mapping[str, str] | None = None) -> Decision:
    pod = testing.pod(images=images, labels=labels)
    return decide(pod, kind="Pod", operation="CREATE", namespace="default", lookups=LOOKUPS, settings=settings)


def terms(decision: Decision) -> list[tuple[str, int]]:
    """Each preferred term as (architecture, weight), in order."""
    affinity = decision.obj["spec"].get("affinity", {}).get("nodeAffinity", {})
    out = []
    for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", []):
        (expression,) = term["preference"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/arch" and expression["operator"] == "In"
        (arch,) = expression["values"]
        out.append((arch, term["weight"]))
    return out


def allowed(decision: Decision) -> set[str]:
    return {n["metadata"]["name"] for n in NODES if testing.schedulable(decision.obj, n)}


def test_each_preferred_architecture_in_common_gets_its_own_term_in_list_order() -> None:
    decision = run(["three:1"], prefs(("arm64", 80), ("s390x", 50), ("amd64", 20)))
    assert terms(decision) == [("arm64", 80), ("amd64", 20)]  # s390x is not in common: no term
    assert allowed(decision) == {"amd64", "arm64", "ppc64le"}  # soft: every common architecture stays allowed
    assert "preferred architecture s390x is not supported by every image" in decision.reasons


def test_an_empty_list_means_no_preference() -> None:
    decision = run(["three:1"], prefs())
    assert terms(decision) == [] and allowed(decision) == {"amd64", "arm64", "ppc64le"}


def test_one_common_architecture_needs_no_term() -> None:
    decision = run(["arm-only:1"], prefs(("arm64", 80), ("amd64", 20)))
    assert terms(decision) == [] and allowed(decision) == {"arm64"}


def test_required_mode_pins_the_highest_weight_architecture_in_common() -> None:
    settings = prefs(("s390x", 100), ("amd64", 30), ("arm64", 60), preference_mode="required")
    decision = run(["three:1"], settings)
    assert decision.obj["spec"]["nodeSelector"] == {"kubernetes.io/arch": "arm64"}
    assert terms(decision) == [] and allowed(decision) == {"arm64"}


def test_required_mode_ties_go_to_list_order() -> None:
    settings = prefs(("amd64", 50), ("arm64", 50), preference_mode="required")
    assert allowed(run(["three:1"], settings)) == {"amd64"}
    reversed_order = prefs(("arm64", 50), ("amd64", 50), preference_mode="required")
    assert allowed(run(["three:1"], reversed_order)) == {"arm64"}


def test_required_mode_tolerates_only_the_pinned_architecture() -> None:
    settings = prefs(
        ("arm64", 90),
        ("amd64", 10),
        preference_mode="required",
        arch_tolerations=parse_arch_tolerations("arm64=arch=arm64:NoSchedule,amd64=arch=amd64:NoSchedule"),
    )
    decision = run(["amd-arm:1"], settings)
    assert decision.obj["spec"]["tolerations"] == [
        {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
    ]


def test_the_pod_label_replaces_every_preference_at_the_highest_weight() -> None:
    decision = run(["three:1"], prefs(("arm64", 80), ("amd64", 20)), labels={PREFERRED_ARCH_LABEL: "ppc64le"})
    assert terms(decision) == [("ppc64le", 80)]
    assert decision.warnings == ()


def test_the_pod_label_without_configured_preferences_takes_the_flag_weight() -> None:
    decision = run(["three:1"], prefs(preferred_arch_weight=35), labels={PREFERRED_ARCH_LABEL: "arm64"})
    assert terms(decision) == [("arm64", 35)]


def test_a_label_that_cannot_be_honoured_warns_and_the_policies_preferences_apply() -> None:
    decision = run(["amd-arm:1"], prefs(("arm64", 80), ("amd64", 20)), labels={PREFERRED_ARCH_LABEL: "ppc64le"})
    assert decision.warnings == ("could not select preferred arch: ppc64le",)
    assert terms(decision) == [("arm64", 80), ("amd64", 20)]


def test_the_pod_label_pins_in_required_mode() -> None:
    settings = prefs(("arm64", 80), preference_mode="required")
    decision = run(["three:1"], settings, labels={PREFERRED_ARCH_LABEL: "amd64"})
    assert allowed(decision) == {"amd64"}


def test_mutating_a_mutated_pod_changes_nothing() -> None:
    settings = prefs(("arm64", 80), ("amd64", 20))
    first = run(["three:1"], settings)
    again = decide(first.obj, kind="Pod", operation="CREATE", namespace="default", lookups=LOOKUPS, settings=settings)
    assert again.patch == ()


def test_a_daemonset_update_withdraws_every_preferred_term_it_recorded() -> None:
    settings = prefs(("arm64", 80), ("amd64", 20))
    created = decide(
        testing.daemonset(images=["three:1"]),
        kind="DaemonSet",
        operation="CREATE",
        namespace="default",
        lookups=LOOKUPS,
        settings=settings,
    )
    assert terms_of_template(created.obj) == [("arm64", 80), ("amd64", 20)]
    narrowed = dict(created.obj)
    narrowed["spec"] = {**created.obj["spec"], "template": {**created.obj["spec"]["template"]}}
    narrowed["spec"]["template"]["spec"] = {**created.obj["spec"]["template"]["spec"], "containers": []}
    narrowed["spec"]["template"]["spec"]["containers"] = [{"name": "c0", "image": "arm-only:1"}]
    updated = decide(
        narrowed, kind="DaemonSet", operation="UPDATE", namespace="default", lookups=LOOKUPS, settings=settings
    )
    assert terms_of_template(updated.obj) == []  # arm64 alone is common: noe's earlier terms are gone
    assert all(testing.schedulable(updated.obj, n) == (n["metadata"]["name"] == "arm64") for n in NODES)


def terms_of_template(obj: Mapping[str, Any]) -> list[tuple[str, int]]:
    spec = obj["spec"]["template"]["spec"]
    preferred = (
        spec.get("affinity", {}).get("nodeAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
    )
    return [(t["preference"]["matchExpressions"][0]["values"][0], t["weight"]) for t in preferred]
