"""DaemonSet UPDATE: a template noe placed at CREATE is decided afresh, not mistaken for the user's choice.

The contract (rule 11) acts on DaemonSet templates at UPDATE, but rule 2 would
skip any template that already selects an architecture — including one whose
selection noe itself added at CREATE. Without a record of what noe added, a
DaemonSet whose images change would keep a stale requirement and never run on
the architectures its new images support (or crash on those they dropped).
"""

from __future__ import annotations

import copy
from typing import Any

from noe_core import testing
from noe_core.placement.pipeline import decide
from noe_core.placement.rules import PLACEMENT_ANNOTATION, images_to_inspect
from noe_core.policies.settings import ArchToleration, PolicySettings

NODES = [testing.node(f"{arch}-node", arch) for arch in ("amd64", "arm64", "arm", "ppc64le")]
TAINTED_ARM = testing.node("arm64-tainted", "arm64", taints=["arch=arm64:NoSchedule"])
LOOKUPS = testing.platforms(
    {
        "app:1": ["linux/amd64"],
        "app:2": ["linux/amd64", "linux/arm64/v8"],
        "sidecar:1": ["linux/amd64", "linux/arm64/v8", "linux/arm/v7"],
    }
)
SETTINGS = PolicySettings(arch_tolerations=(ArchToleration("arm64", "arch", "arm64", "NoSchedule"),))


def archs(ds: dict[str, Any]) -> set[str]:
    template = ds["spec"]["template"]
    return {n["metadata"]["labels"]["kubernetes.io/arch"] for n in NODES if testing.schedulable(template, n)}


def decide_ds(ds: dict[str, Any], operation: str, settings: PolicySettings = SETTINGS) -> Any:
    return decide(ds, kind="DaemonSet", operation=operation, namespace="default", lookups=LOOKUPS, settings=settings)


def test_update_with_new_images_widens_the_placement() -> None:
    created = decide_ds(testing.daemonset(images=["app:1", "sidecar:1"]), "CREATE")
    assert archs(created.obj) == {"amd64"}
    assert PLACEMENT_ANNOTATION in created.obj["spec"]["template"]["metadata"]["annotations"]

    updated_input = copy.deepcopy(created.obj)
    updated_input["spec"]["template"]["spec"]["containers"][0]["image"] = "app:2"
    assert images_to_inspect(updated_input, kind="DaemonSet", operation="UPDATE") == ["app:2", "sidecar:1"]
    updated = decide_ds(updated_input, "UPDATE")
    assert updated.allowed and updated.changed
    assert archs(updated.obj) == {"amd64", "arm64"}
    assert updated.common == ("amd64", "arm64")
    # the arm64 taint toleration now applies, since the pods may run on arm64
    assert testing.schedulable(updated.obj["spec"]["template"], TAINTED_ARM)


def test_update_with_narrower_images_drops_the_old_toleration() -> None:
    created = decide_ds(testing.daemonset(images=["app:2"]), "CREATE")
    assert testing.schedulable(created.obj["spec"]["template"], TAINTED_ARM)
    narrowed = copy.deepcopy(created.obj)
    narrowed["spec"]["template"]["spec"]["containers"][0]["image"] = "app:1"
    updated = decide_ds(narrowed, "UPDATE")
    assert archs(updated.obj) == {"amd64"}
    assert not updated.obj["spec"]["template"]["spec"].get("tolerations")


def test_unchanged_update_is_a_no_op_and_user_terms_survive() -> None:
    user_affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["general"]}]},
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]},
                ]
            }
        }
    }
    original = testing.daemonset(images=["app:2"], affinity=user_affinity)
    created = decide_ds(original, "CREATE")
    again = decide_ds(created.obj, "UPDATE")
    assert not again.changed
    assert again.obj == created.obj
    # withdrawing noe's record gives back exactly the user's template
    edited = copy.deepcopy(created.obj)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "app:1"
    updated = decide_ds(edited, "UPDATE")
    terms = updated.obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["general"], ["batch"]]
    assert all(
        t["matchExpressions"][1] == {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]} for t in terms
    )


def test_registry_outage_at_update_keeps_the_earlier_placement() -> None:
    created = decide_ds(testing.daemonset(images=["app:1"]), "CREATE")
    broken = testing.platforms({"app:1": "registry unavailable"})
    updated = decide(
        created.obj, kind="DaemonSet", operation="UPDATE", namespace="default", lookups=broken, settings=SETTINGS
    )
    assert updated.allowed and not updated.changed
    assert archs(updated.obj) == {"amd64"}
    assert updated.warnings


def test_user_taking_over_the_architecture_is_respected() -> None:
    created = decide_ds(testing.daemonset(images=["app:2"]), "CREATE")
    edited = copy.deepcopy(created.obj)
    edited["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    updated = decide_ds(edited, "UPDATE")
    assert archs(updated.obj) == {"arm64"}
    assert PLACEMENT_ANNOTATION not in (updated.obj["spec"]["template"]["metadata"].get("annotations") or {})


def test_pods_never_carry_the_record() -> None:
    decision = decide(
        testing.pod(images=["app:2"]),
        kind="Pod",
        operation="CREATE",
        namespace="default",
        lookups=LOOKUPS,
        settings=SETTINGS,
    )
    assert PLACEMENT_ANNOTATION not in (decision.obj["metadata"].get("annotations") or {})
