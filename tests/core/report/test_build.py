"""The report model (noe_core.report.build): verdicts, totals and rankings from pods and lookups, no I/O."""

from __future__ import annotations

from typing import Any

from noe_core import ImagePlatforms, LookupFailure, PolicySettings
from noe_core.k8s.owners import Owners, TopOwner
from noe_core.placement.rules import image_architectures
from noe_core.policies.rollout import ROLLOUT_LABEL
from noe_core.report.build import Figures, build_report
from noe_core.report.pods import read_pod

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
    assert only.workload == TopOwner("ns", "Job", "j") and only.pods == 0
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
    # build_report alone carries no prices and no plan: noe_core.report.planner.with_plan adds them
    assert list(data) == [
        "architectures",
        "system_os",
        "totals",
        "namespaces",
        "workloads",
        "images",
        "savings",
        "plan",
    ]
    assert data["savings"] is None and data["plan"] is None
    assert list(data["totals"]) == [
        "workloads",
        "pods",
        "cpu_cores",
        "memory_bytes",
        "runnable",
        "blocked",
        "unknown",
        "limited",
    ]
    assert list(data["workloads"][0]) == [
        "namespace",
        "kind",
        "name",
        "pods",
        "images",
        "architectures",
        "status",
        "needs",
        "blocking",
        "cpu_cores",
        "memory_bytes",
        "monthly_cost",
        "monthly_saving",
        "error",
    ]
    assert data["workloads"][0]["monthly_cost"] == {} and data["workloads"][0]["monthly_saving"] is None
    assert data["images"][0] == {
        "image": "arm",
        "architectures": ["arm64"],
        "workloads": [{"namespace": "ns", "kind": "Pod", "name": "b"}],
        "blocking": {"amd64": {"workloads": 1, "pods": 1, "cpu_cores": 1, "memory_bytes": 2**20}},
    }
    assert data["images"][1]["error"] == "registry answered 500" and "architectures" not in data["images"][1]


PLATFORM_LOOKUPS = {
    "v3": ImagePlatforms.of("linux/amd64/v3", "linux/arm64"),
    "v1v3": ImagePlatforms.of("linux/amd64", "linux/amd64/v3", "linux/arm64"),
    "iis": ImagePlatforms.of("windows(10.0.17763.1)/amd64", "windows(10.0.20348.1)/amd64"),
    "win2022": ImagePlatforms.of("windows(10.0.20348.9)/amd64"),
    "linux": ImagePlatforms.of("linux/amd64"),
    "model": ImagePlatforms.artifact("application/vnd.example.model.v1"),
}


def platform_report(*pods: dict[str, Any], settings: PolicySettings) -> Any:
    owners = Owners()
    return build_report([read_pod(p, owners) for p in pods], PLATFORM_LOOKUPS, settings)


def test_an_amd64_v3_only_workload_is_limited_on_amd64_and_shows_the_level() -> None:
    # whatever --x86-64-levels says: the report tells where the images would run
    for levels in ("off", "nfd"):
        result = platform_report(
            pod("fast", ["v3"]), pod("any", ["v1v3"]), settings=PolicySettings(x86_64_levels=levels)
        )
        other, fast = result.workloads  # sorted by name
        assert fast.status("amd64") == "limited" and fast.needs["amd64"].text == "linux/amd64 v3+"
        assert fast.needs["amd64"].short == "v3+" and fast.status("arm64") == "runnable"
        assert other.status("amd64") == "runnable" and not other.needs
        assert result.totals.runnable["amd64"].workloads == 1 and result.totals.limited["amd64"].workloads == 1
        assert fast.runnable_on(("amd64", "arm64")) == ["arm64"]  # prices and savings count it on arm64 only
        assert fast.to_json(("amd64", "arm64"))["needs"] == {"amd64": "linux/amd64 v3+"}


def test_windows_workloads_in_a_mixed_cluster() -> None:
    mixed = PolicySettings(system_os="linux,windows")
    result = platform_report(
        pod("web", ["iis", "win2022"]), pod("clash", ["iis", "linux"]), pod("plain", ["linux"]), settings=mixed
    )
    clash, plain, web = result.workloads
    assert web.status("amd64") == "limited" and web.needs["amd64"].text == "windows/amd64 build 10.0.20348"
    assert web.needs["amd64"].short == "builds" and web.status("arm64") == "blocked"
    # both images offer amd64, but one for Windows and one for Linux: they run nowhere together
    assert clash.status("amd64") == "blocked" and clash.blocking["amd64"] == ("iis", "linux")
    assert clash.architectures == ()
    assert plain.status("amd64") == "runnable"
    # with Linux only, Windows entries are dropped as the webhook drops them
    linux_only = platform_report(pod("web", ["iis"]), settings=PolicySettings())
    assert linux_only.workloads[0].status("amd64") == "blocked"


def test_an_artifact_constrains_nothing() -> None:
    result = platform_report(pod("p", ["linux", "model"]), settings=PolicySettings())
    (item,) = result.workloads
    assert item.status("amd64") == "runnable" and not item.failures
    assert result.to_json()["images"][1] == {
        "image": "model",
        "artifact": "application/vnd.example.model.v1",
        "workloads": [{"namespace": "ns", "kind": "Pod", "name": "p"}],
        "blocking": {},
    }


def test_each_workloads_rollout_state_from_its_pods_labels() -> None:
    def in_rollout(name: str, group: str, phase: str = "Running") -> dict[str, Any]:
        doc = pod(name, ["multi"], owner=("ReplicaSet", "web-5d8f"), phase=phase)
        doc["metadata"]["labels"] = {"pod-template-hash": "5d8f", ROLLOUT_LABEL: group}
        return doc

    result = report(
        in_rollout("w1", "arm64"),
        in_rollout("w2", "control"),
        in_rollout("w3", "control"),
        in_rollout("w4", "arm64", phase="Succeeded"),  # finished: not counted
        pod("other", ["multi"], owner=("ReplicaSet", "api-1")),
    )
    web = next(w for w in result.workloads if w.workload.name == "web")
    api = next(w for w in result.workloads if w.workload.name == "api-1")
    assert web.to_json(result.architectures)["rollout"] == {"architecture": "arm64", "cohort": 1, "control": 2}
    assert "rollout" not in api.to_json(result.architectures)
