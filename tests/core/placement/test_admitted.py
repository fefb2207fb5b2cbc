"""A live pod read back as noe admitted it: its platform terms split off, the user's kept, the nodes noe required."""

from __future__ import annotations

from typing import Any

from noe_core import testing
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.admitted import as_admitted, noe_terms
from noe_core.placement.scheduling import split_platform_terms


def expr(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    node_selector_terms = [{"matchExpressions": t} for t in terms]
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_selector_terms}}
    }


def test_the_users_terms_stay_and_noes_multiplied_terms_come_back_as_one() -> None:
    zone = expr("topology.kubernetes.io/zone", "a")
    spec = {
        "nodeSelector": {"kubernetes.io/os": "linux", "pool": "general"},
        "affinity": required(
            [zone, expr("kubernetes.io/os", "linux"), expr("kubernetes.io/arch", "amd64")],
            [zone, expr("kubernetes.io/os", "windows"), expr("kubernetes.io/arch", "amd64")],
        ),
        "tolerations": [{"key": "arch", "operator": "Exists"}],
    }
    rest, platform = split_platform_terms(spec)
    assert rest == {
        "nodeSelector": {"pool": "general"},
        "affinity": required([zone]),
        "tolerations": spec["tolerations"],
    }
    assert platform == {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": required(
            [expr("kubernetes.io/os", "linux"), expr("kubernetes.io/arch", "amd64")],
            [expr("kubernetes.io/os", "windows"), expr("kubernetes.io/arch", "amd64")],
        ),
    }
    assert spec["affinity"] == required(  # the pod's own spec is never touched
        [zone, expr("kubernetes.io/os", "linux"), expr("kubernetes.io/arch", "amd64")],
        [zone, expr("kubernetes.io/os", "windows"), expr("kubernetes.io/arch", "amd64")],
    )


def test_a_spec_of_platform_terms_alone_leaves_no_affinity_behind() -> None:
    rest, platform = split_platform_terms({"affinity": required([expr("kubernetes.io/arch", "arm64")])})
    assert rest == {} and platform == {"affinity": required([expr("kubernetes.io/arch", "arm64")])}


def test_a_bound_pod_is_read_back_unbound_and_without_noes_terms() -> None:
    submitted = testing.pod(["arm:1"])
    lookups = testing.platforms({"arm:1": ["linux/arm64"]})
    placed = testing.decide(submitted, lookups)
    live = placed.obj
    live["spec"]["nodeName"] = "n-arm64"
    before = as_admitted(read_workload(live, POD))
    assert before is not None and before.spec == submitted["spec"] and not before.node_name
    again = testing.decide(before.obj, lookups)
    assert noe_terms(again, read_workload(live, POD)) == placed.nodes


def test_terms_the_user_chose_are_not_noes() -> None:
    lookups = testing.platforms({"arm:1": ["linux/arm64"]})
    pinned = testing.pod(["arm:1"], node_selector={"kubernetes.io/arch": "s390x"})
    workload = read_workload(pinned, POD)
    before = as_admitted(workload)
    assert before is not None
    assert noe_terms(testing.decide(before.obj, lookups), workload) is None
    assert as_admitted(read_workload(testing.pod(["arm:1"]), POD)) is None  # nothing required at all
