"""examples/ci/where-will-it-land.sh: every kind `noe mutate` places is checked, nothing passes unseen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.ci_recipe import script_kinds
from tests.support.paths import ROOT

SCRIPT = ROOT / "examples" / "ci" / "where-will-it-land.sh"
PLATFORMS = {"x86:1": ["linux/amd64"], "arm:1": ["linux/arm64"], "multi:1": ["linux/amd64", "linux/arm64"]}


def workload(kind: str, images: list[str], name: str = "app") -> dict[str, Any]:
    """A manifest of *kind* whose pods run *images*, the pod spec where that kind keeps it."""
    pod_spec = {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    api = {"Pod": "v1", "ReplicationController": "v1", "Job": "batch/v1", "CronJob": "batch/v1"}.get(kind, "apps/v1")
    doc: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "team"}}
    if kind == "Pod":
        doc["spec"] = pod_spec
    elif kind == "CronJob":
        doc["spec"] = {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
    else:
        doc["spec"] = {"selector": {"matchLabels": {"app": name}}, "template": template}
    return doc


def run(directory: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    platforms = tmp_path / "platforms.json"
    platforms.write_text(json.dumps(PLATFORMS))
    env = {**os.environ, "NOE": f"{sys.executable} -m noe_core.cli"}
    return subprocess.run(
        ["sh", str(SCRIPT), str(directory), str(platforms)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def write(directory: Path, name: str, *docs: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(yaml.safe_dump_all(docs))


def test_a_denied_deployment_fails_the_check(tmp_path: Path) -> None:
    manifests = tmp_path / "k8s"
    write(
        manifests,
        "web.yaml",
        workload("Deployment", ["x86:1", "arm:1"], "web"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}},
    )
    write(manifests, "ok.yaml", workload("Deployment", ["multi:1"], "ok"))
    proc = run(manifests, tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"--- {manifests}/web.yaml: denied" in proc.stdout
    assert f"{manifests}/ok.yaml: denied" not in proc.stdout
    assert "checked 2 workload manifest(s)" in proc.stdout


@pytest.mark.parametrize("kind", script_kinds())
def test_every_listed_kind_is_really_checked(kind: str, tmp_path: Path) -> None:
    manifests = tmp_path / "k8s"
    write(manifests, "denied.yaml", workload(kind, ["x86:1", "arm:1"]))
    proc = run(manifests, tmp_path)
    assert proc.returncode == 3, f"{kind} with no common architecture passed:\n{proc.stdout}{proc.stderr}"
    write(manifests, "denied.yaml", workload(kind, ["multi:1"]))
    assert run(manifests, tmp_path).returncode == 0


def test_a_workload_kind_noe_cannot_check_fails_loudly(tmp_path: Path) -> None:
    manifests = tmp_path / "k8s"
    rollout = workload("Deployment", ["x86:1", "arm:1"], "canary")
    rollout.update(apiVersion="argoproj.io/v1alpha1", kind="Rollout")
    write(manifests, "rollout.yaml", rollout)
    write(manifests, "ok.yaml", workload("Deployment", ["multi:1"]))
    proc = run(manifests, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--- {manifests}/rollout.yaml: cannot check kind(s) Rollout" in proc.stdout
    # and noe mutate alone would indeed have let it through unseen
    single = subprocess.run(
        [
            sys.executable,
            "-m",
            "noe_core.cli",
            "mutate",
            "-f",
            str(manifests / "rollout.yaml"),
            "--platforms",
            str(tmp_path / "platforms.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=ROOT,
    )
    assert single.returncode == 0


def test_manifests_without_workloads_pass(tmp_path: Path) -> None:
    manifests = tmp_path / "k8s"
    write(
        manifests,
        "config.yaml",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"containers": "not a pod"}},
    )
    proc = run(manifests, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checked 0 workload manifest(s)" in proc.stdout
