"""PolicyReports (noe_core.report.policy_reports): one per namespace, one result per workload, valid for the CRD."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema

from noe_core import ImagePlatforms, LookupFailure, PolicySettings
from noe_core.k8s.owners import Owners
from noe_core.report.build import Report, build_report
from noe_core.report.plan import Upgrade
from noe_core.report.planner import with_plan
from noe_core.report.pods import read_pod
from noe_core.report.policy_reports import policy_reports, same_results
from noe_core.report.pricing import Prices, parse_prices
from tests.support.paths import ROOT

SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "crds" / "policyreport-v1alpha2.schema.json").read_text())
LOOKUPS = {
    "amd:1.0": ImagePlatforms.of("linux/amd64"),
    "multi": ImagePlatforms.of("linux/amd64", "linux/arm64"),
    "broken": LookupFailure("registry answered 503"),
}


def pod(namespace: str, name: str, images: list[str], owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    containers = [
        {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
        for i, image in enumerate(images)
    ]
    return {"metadata": meta, "spec": {"containers": containers}}


def build(prices: Prices | None = None) -> Report:
    owners = Owners()
    pods = [
        pod("shop", "web", ["multi"], ("StatefulSet", "web")),
        pod("shop", "api", ["amd:1.0", "broken"], ("Rollout", "api")),  # blocked, and an image not inspected
        pod("shop", "job", ["multi", "broken"], ("Job", "job")),
        pod("empty", "solo", ["amd:1.0"]),
    ]
    return with_plan(build_report([read_pod(p, owners) for p in pods], LOOKUPS, PolicySettings()), prices=prices)


def test_one_report_per_namespace_one_result_per_workload() -> None:
    docs = policy_reports(build(), "arm64", seconds=1_700_000_000)
    for doc in docs:
        jsonschema.validate(doc, SCHEMA)
    assert [(d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs] == [
        ("empty", "noe-arm64"),
        ("shop", "noe-arm64"),
    ]
    shop = docs[1]
    results = {r["resources"][0]["name"]: r for r in shop["results"]}
    assert results["web"]["result"] == "pass"
    assert results["web"]["resources"] == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "namespace": "shop"}
    ]
    # blocked by a known image, whatever the other one: fail, naming both the blocker and the failure
    assert results["api"]["result"] == "fail"
    assert results["api"]["message"] == ("blocked on arm64 by amd:1.0; cannot inspect broken: registry answered 503")
    assert results["api"]["properties"]["blocking_images"] == "amd:1.0"
    assert results["api"]["resources"] == [{"kind": "Rollout", "name": "api", "namespace": "shop"}]  # no known group
    assert results["job"]["result"] == "error"
    assert results["job"]["message"] == "cannot inspect broken: registry answered 503"
    assert results["job"]["resources"][0]["apiVersion"] == "batch/v1"
    assert shop["summary"] == {"pass": 1, "fail": 1, "warn": 0, "error": 1, "skip": 0}
    assert docs[0]["summary"] == {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    assert all(r["timestamp"] == {"seconds": 1_700_000_000, "nanos": 0} for r in shop["results"])
    assert results["web"]["properties"] == {"pods": "1", "cpu": "0.5", "memory_bytes": str(2**30)}
    # the same report on amd64: everything that could be inspected runs there
    amd = policy_reports(build(), "amd64", seconds=0)[1]
    assert amd["metadata"]["name"] == "noe-amd64"
    assert amd["summary"] == {"pass": 1, "fail": 0, "warn": 0, "error": 2, "skip": 0}


def test_prices_and_upgrades_ride_in_the_properties() -> None:
    report = build(Prices(parse_prices("amd64=0.04,arm64=0.03")))
    assert report.plan is not None
    hinted = report.plan.with_upgrades({"docker.io/library/amd:1.0": Upgrade("1.1", "docker.io/library/amd:1.1")})
    report = replace(report, plan=hinted)
    docs = policy_reports(report, "arm64", seconds=0)
    for doc in docs:
        jsonschema.validate(doc, SCHEMA)
    solo = docs[0]["results"][0]["properties"]
    assert solo["upgrades"] == "amd:1.0 → 1.1"
    assert solo["monthly_cost.amd64"] == "14.60"  # 0.5 core x 0.04 x 730 h
    assert solo["monthly_saving"] == "3.65"
    shop = {r["resources"][0]["name"]: r["properties"] for r in docs[1]["results"]}
    assert shop["web"]["monthly_cost.amd64"] == "14.60" and shop["web"]["monthly_cost.arm64"] == "10.95"
    assert "monthly_cost.amd64" not in shop["job"] and shop["job"]["monthly_saving"] == "0.00"  # not inspected


def test_same_results_ignores_only_the_timestamps() -> None:
    first = policy_reports(build(), "arm64", seconds=1)[1]
    later = policy_reports(build(), "arm64", seconds=2)[1]
    assert first != later and same_results(first, later)
    changed = json.loads(json.dumps(later))
    changed["results"][0]["result"] = "fail"
    assert not same_results(first, changed)
    assert not same_results({}, first)
