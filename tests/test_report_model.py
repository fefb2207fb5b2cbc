"""The report model (noe_core.report): verdicts, totals and rankings from pods and lookups, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core import ImagePlatforms, LookupFailure, PolicySettings
from noe_core.errors import InvalidObject
from noe_core.owners import Owners, Workload
from noe_core.policy import image_architectures
from noe_core.report import Figures, build_report, read_pod

LOOKUPS = {
    "multi": ImagePlatforms.of("linux/amd64", "linux/arm64/v8", "unknown/unknown"),
    "amd": ImagePlatforms.of("linux/amd64", "windows/arm64"),
    "arm": ImagePlatforms.of("linux/aarch64"),
    "broken": LookupFailure("registry answered 500"),
    "empty": ImagePlatforms(()),
}


def pod(
    name: str,
    images: list[str],
    cpu: str = "1",
    *,
    namespace: str = "ns",
    phase: str = "Running",
    owner: tuple[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    containers = [
        {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": cpu, "memory": "1Mi"}}}
        for i, image in enumerate(images)
    ]
    return {"metadata": meta, "spec": {"containers": containers}, "status": {"phase": phase}}


def report(*pods: dict[str, Any], settings: PolicySettings | None = None) -> Any:
    owners = Owners()
    return build_report([read_pod(p, owners) for p in pods], LOOKUPS, settings or PolicySettings())


def test_image_architectures_is_rule_4() -> None:
    settings = PolicySettings(schedulable_archs=frozenset({"amd64", "arm64"}))
    assert image_architectures("multi", LOOKUPS, settings) == frozenset({"amd64", "arm64"})
    assert image_architectures("amd", LOOKUPS, settings) == frozenset({"amd64"})  # windows/arm64: another OS
    assert image_architectures("arm", LOOKUPS, settings) == frozenset({"arm64"})
    assert image_architectures("broken", LOOKUPS, settings) == LookupFailure("registry answered 500")
    assert image_architectures("absent", LOOKUPS, settings) == LookupFailure("not inspected")
    assert image_architectures("empty", LOOKUPS, settings) == LookupFailure("its manifest names no platform")


def test_statuses_blocking_and_unknown() -> None:
    result = report(
        pod("a", ["multi", "amd"], owner=("StatefulSet", "db")),
        pod("b", ["amd", "broken"]),
        pod("c", ["arm", "broken"]),
        pod("d", ["multi"]),
    )
    rows = {w.workload.name: w for w in result.workloads}
    assert rows["db"].status("amd64") == "runnable" and rows["db"].status("arm64") == "blocked"
    assert rows["db"].blocking == {"amd64": (), "arm64": ("amd",)}
    assert rows["db"].architectures == ("amd64",)
    # an uninspectable image: unknown where nothing else blocks, blocked where a known image does
    assert rows["b"].status("amd64") == "unknown" and rows["b"].status("arm64") == "blocked"
    assert rows["b"].architectures is None and rows["b"].error == "cannot inspect broken: registry answered 500"
    assert rows["c"].status("amd64") == "blocked" and rows["c"].status("arm64") == "unknown"
    totals = result.totals
    # one core and 1Mi per container: db and b, c have two containers, d one
    assert totals.runnable["amd64"] == Figures(2, 2, 3000, 3 * 2**20)  # db, d
    assert totals.runnable["arm64"] == Figures(1, 1, 1000, 2**20)  # d
    assert totals.blocked["arm64"] == Figures(2, 2, 4000, 4 * 2**20)  # db, b
    assert totals.blocked["amd64"] == Figures(1, 1, 2000, 2 * 2**20)  # c
    assert totals.unknown == Figures(2, 2, 4000, 4 * 2**20)  # b, c
    assert not [w for w in result.workloads if w.status("arm64") == "runnable" and w.failures]


def test_finished_pods_keep_their_workload_but_hold_nothing() -> None:
    result = report(
        pod("job-1", ["multi"], phase="Succeeded", owner=("Job", "j")),
        pod("job-2", ["multi"], phase="Failed", owner=("Job", "j")),
    )
    (only,) = result.workloads
    assert only.workload == Workload("ns", "Job", "j") and only.pods == 0
    assert result.totals.all == Figures(1, 0, 0, 0)


def test_a_workload_without_images_runs_anywhere() -> None:
    result = report({"metadata": {"name": "empty", "namespace": "ns"}, "spec": {"containers": []}})
    assert result.workloads[0].architectures == ("amd64", "arm64")
    assert result.totals.runnable["arm64"].workloads == 1


def test_blockers_ranked_by_cpu_then_pods_then_name() -> None:
    lookups = {**LOOKUPS, "amd2": LOOKUPS["amd"], "amd3": LOOKUPS["amd"]}
    owners = Owners()
    # amd and amd2 both keep 4 cores from arm64; amd over 2 pods, amd2 over 2 as well: the name decides
    pods = [
        read_pod(p, owners)
        for p in (
            pod("x", ["amd"], "3"),
            pod("y", ["amd"], "1"),
            pod("w", ["amd2"], "2"),
            pod("v", ["amd2"], "2"),
            pod("u", ["amd3"], "5"),
            pod("t", ["broken"], "9"),
        )
    ]
    ranked = build_report(pods, lookups, PolicySettings()).top_blockers("arm64")
    assert [i.image for i in ranked] == ["amd3", "amd", "amd2"]
    assert ranked[1].blocking["arm64"] == Figures(2, 2, 4000, 2 * 2**20)


def test_json_shape_is_stable() -> None:
    data = report(pod("a", ["multi", "broken"]), pod("b", ["arm"])).to_json()
    assert list(data) == ["architectures", "system_os", "totals", "namespaces", "workloads", "images"]
    assert list(data["totals"]) == ["workloads", "pods", "cpu_cores", "memory_bytes", "runnable", "blocked", "unknown"]
    assert list(data["workloads"][0]) == [
        "namespace",
        "kind",
        "name",
        "pods",
        "images",
        "architectures",
        "status",
        "blocking",
        "cpu_cores",
        "memory_bytes",
        "error",
    ]
    assert data["images"][0] == {
        "image": "arm",
        "architectures": ["arm64"],
        "workloads": [{"namespace": "ns", "kind": "Pod", "name": "b"}],
        "blocking": {"amd64": {"workloads": 1, "pods": 1, "cpu_cores": 1, "memory_bytes": 2**20}},
    }
    assert data["images"][1]["error"] == "registry answered 500" and "architectures" not in data["images"][1]


def test_read_pod_names_the_pod() -> None:
    bad = pod("p", ["multi"], "lots")
    with pytest.raises(InvalidObject, match=r"^Pod ns/p: spec\.containers\[0\]\.resources\.requests\.cpu"):
        read_pod(bad, Owners())
    entry = read_pod(
        pod("q", ["multi"])
        | {"spec": {"containers": [{"image": "multi"}], "imagePullSecrets": [{"name": "r"}, {"name": "r"}, {}]}},
        Owners(),
    )
    assert entry.pull_secrets == ("r",)
