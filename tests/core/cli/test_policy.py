"""``noe policy check`` and ``noe policy explain``, and ``noe mutate --policy``: policy files offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from noe_core import testing
from noe_core.policies.trail import POLICIES_ANNOTATION
from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES

POLICY_FILES = sorted(str(p) for p in (EXAMPLES / "policies").glob("*.yaml"))
PLATFORMS = str(EXAMPLES / "platforms.json")
NODES = [testing.node(a, a) for a in ("amd64", "arm64", "arm", "386")]


def write(tmp_path: Path, name: str, *docs: Any) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return str(path)


def allowed(obj: dict[str, Any]) -> set[str]:
    return {n["metadata"]["name"] for n in NODES if testing.schedulable(obj, n)}


def test_check_accepts_the_examples() -> None:
    status, out, err = run_cli("policy", "check", *POLICY_FILES)
    assert status == 0, err
    assert out.splitlines() == [
        "ClusterPlacementPolicy/default: Accepted",
        "ClusterPlacementPolicy/critical-is-strict: Accepted",
        "PlacementPolicy/payments/stay-on-amd64: Accepted",
        "PlacementPolicy/payments/batch-amd64-only: Accepted",
    ]


def test_check_prints_the_status_reason_and_message_and_exits_1(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        testing.cluster_policy("good"),
        testing.cluster_policy("bad", preferredArchitectures=[{"architecture": "m68k", "weight": 5}]),
    )
    status, out, err = run_cli("policy", "check", path)
    assert status == 1
    assert out.splitlines() == [
        "ClusterPlacementPolicy/good: Accepted",
        "ClusterPlacementPolicy/bad: InvalidArchitecture: spec.preferredArchitectures[0].architecture: 'm68k' is "
        "not a Go GOARCH architecture (386, amd64, arm, arm64, loong64, mips, mips64, mips64le, mipsle, ppc64, "
        f"ppc64le, riscv64, s390x, wasm) ({path} document 2)",
    ]
    assert err.strip() == "noe policy check: 1 policy(ies) invalid: ignored whole by noe"


def test_check_refuses_unreadable_files_and_other_kinds(tmp_path: Path) -> None:
    status, _, err = run_cli("policy", "check", str(tmp_path / "missing.yaml"))
    assert status == 2 and "cannot read policy file" in err and "Traceback" not in err
    pod = write(tmp_path, "pod.yaml", testing.pod())
    status, _, err = run_cli("policy", "check", pod)
    assert status == 2 and "kind 'Pod' is not a ClusterPlacementPolicy" in err
    deep = tmp_path / "deep.yaml"
    deep.write_text("spec: " + "[" * 200 + "]" * 200)
    status, _, err = run_cli("policy", "check", str(deep))
    assert status == 2 and "nested deeper" in err


def test_explain_lists_the_matching_policies_in_order_and_where_each_setting_came_from(tmp_path: Path) -> None:
    pod = write(tmp_path, "pod.yaml", testing.pod(["app:1"], namespace="payments", labels={"workload": "batch"}))
    status, out, err = run_cli(
        "policy", "explain", "-f", pod, *(a for f in POLICY_FILES for a in ("--policy", f)), "-o", "json"
    )
    assert status == 0, err
    explained = json.loads(out)
    assert explained["namespaceLabels"] == {"tier": "critical", "kubernetes.io/metadata.name": "payments"}
    assert explained["policies"] == [
        "ClusterPlacementPolicy/default",
        "ClusterPlacementPolicy/critical-is-strict",
        "PlacementPolicy/payments/stay-on-amd64",
        "PlacementPolicy/payments/batch-amd64-only",
    ]
    settings = explained["settings"]
    assert settings["preferredArchitectures"] == {
        "value": [{"architecture": "amd64", "weight": 100}],
        "from": ["PlacementPolicy/payments/stay-on-amd64"],
    }
    assert settings["strict"] == {"value": True, "from": ["ClusterPlacementPolicy/critical-is-strict"]}
    assert settings["onLookupFailure"]["value"] == "gate"
    assert settings["schedulableArchitectures"] == {
        "value": ["amd64"],
        "from": ["--cluster-schedulable-archs", "PlacementPolicy/payments/batch-amd64-only"],
    }
    assert settings["preferenceMode"] == {"value": "soft", "from": ["--preference-mode"]}
    assert settings["architectureTolerations"]["from"] == ["ClusterPlacementPolicy/default"]


def test_explain_of_a_workload_reads_its_template_labels_and_the_flags(tmp_path: Path) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
    }
    policies = write(
        tmp_path,
        "p.yaml",
        testing.placement_policy("web", "team-a", podSelector={"matchLabels": {"app": "web"}}, strict=True),
    )
    status, out, err = run_cli(
        "policy",
        "explain",
        "-f",
        write(tmp_path, "d.yaml", deployment),
        "--policy",
        policies,
        "--preferred-arch",
        "arm64",
        "--cluster-schedulable-archs",
        "amd64,arm64",
    )
    assert status == 0, err
    explained = yaml.safe_load(out)
    assert explained["policies"] == ["PlacementPolicy/team-a/web"]
    assert explained["settings"]["preferredArchitectures"] == {
        "value": [{"architecture": "arm64", "weight": 100}],
        "from": ["--preferred-arch"],
    }
    assert explained["settings"]["schedulableArchitectures"]["value"] == ["amd64", "arm64"]


def test_explain_shows_each_workloads_rollout_state(tmp_path: Path) -> None:
    def deployment(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": []}}},
        }

    policy = testing.cluster_policy("move", rollout={"architecture": "arm64", "percent": 25})
    # as `kubectl get clusterplacementpolicies -o yaml` prints it once noe controller rolled web back
    entry = {"namespace": "team-a", "workload": "Deployment/web", "architecture": "arm64", "reason": "r", "time": "t"}
    policy["status"] = {"rollout": {"observedGeneration": 1, "rolledBack": [entry]}}
    status, out, err = run_cli(
        "policy",
        "explain",
        "-f",
        write(tmp_path, "d.yaml", deployment("web"), deployment("api")),
        "--policy",
        write(tmp_path, "p.yaml", policy),
    )
    assert status == 0, err
    web, api = yaml.safe_load(out)
    assert web["rollout"] == {
        "workload": "Deployment/web",
        "policy": "ClusterPlacementPolicy/move",
        "architecture": "arm64",
        "percent": 25,
        "state": "rolled back",
        "effectivePercent": 0,
    }
    assert api["rollout"]["state"] == "rolling out" and api["rollout"]["effectivePercent"] == 25


def test_mutate_with_policy_files_gives_the_webhook_answer(tmp_path: Path) -> None:
    pod = write(tmp_path, "pod.yaml", testing.pod(["nginx:1.27"], namespace="payments"))
    status, out, err = run_cli(
        "mutate", "-f", pod, "--platforms", PLATFORMS, *(a for f in POLICY_FILES for a in ("--policy", f))
    )
    assert status == 0, err
    mutated = yaml.safe_load(out)
    assert mutated["metadata"]["annotations"][POLICIES_ANNOTATION] == (
        "ClusterPlacementPolicy/default,ClusterPlacementPolicy/critical-is-strict,PlacementPolicy/payments/stay-on-amd64"
    )
    preferred = mutated["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [(t["preference"]["matchExpressions"][0]["values"], t["weight"]) for t in preferred] == [(["amd64"], 100)]
    # payments is strict (critical-is-strict): an image that cannot be inspected is denied
    unknown = write(tmp_path, "unknown.yaml", testing.pod(["not-declared:1"], namespace="payments"))
    status, _, err = run_cli("mutate", "-f", unknown, "--platforms", PLATFORMS, "--policy", POLICY_FILES[1])
    assert status == 3 and "namespace payments is strict" in err


def test_mutate_annotates_a_workload_template_without_metadata(tmp_path: Path) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
    }
    policies = write(tmp_path, "p.yaml", testing.cluster_policy("base", preferredArchitectures=[]))
    status, out, err = run_cli(
        "mutate", "-f", write(tmp_path, "d.yaml", deployment), "--platforms", PLATFORMS, "--policy", policies
    )
    assert status == 0, err
    template = yaml.safe_load(out)["spec"]["template"]
    assert template["metadata"] == {"annotations": {POLICIES_ANNOTATION: "ClusterPlacementPolicy/base"}}
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in template["spec"]["affinity"]["nodeAffinity"]
    assert allowed(template) == {"amd64", "arm64", "arm", "386"}


def test_mutate_says_which_policies_it_ignores(tmp_path: Path) -> None:
    policies = write(tmp_path, "p.yaml", testing.cluster_policy("bad", priority=-1))
    pod = write(tmp_path, "pod.yaml", testing.pod(["nginx:1.27"]))
    status, out, err = run_cli("mutate", "-f", pod, "--platforms", PLATFORMS, "--policy", policies)
    assert status == 0
    assert "noe mutate: policy ignored: ClusterPlacementPolicy/bad: PriorityOutOfRange" in err
    assert "annotations" not in yaml.safe_load(out)["metadata"]
