"""The release automation, without building: what deploy/release.sh refuses, and what the GitHub workflows promise.

The release itself (image index, chart, SBOMs in a real registry) runs in tests/deploy/test_image_release.py;
``actionlint`` and ``shellcheck`` check the workflows and scripts in the lint env (tox -e lint).
"""

from __future__ import annotations

import configparser
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.image_release import fresh_clone
from tests.support.paths import ROOT

pytestmark = pytest.mark.deploy

WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = ROOT / "deploy" / "release.sh"


def setup_cfg_version() -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]["version"]


def workflow(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def run_steps(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_pull_requests_run_the_suite_as_ci_does() -> None:
    ci = workflow("ci.yml")
    assert {"pull_request", "workflow_call"} <= set(ci["on"])
    [job] = ci["jobs"].values()
    assert "bash .ci/run" in run_steps(job)
    assert job["container"]["image"].startswith("debian:"), "the Debian machine the suite expects"
    assert "--privileged" in job["container"]["options"], "buildah chroot builds and binfmt_misc"
    assert "tox -e py,lint" in (ROOT / ".ci" / "run").read_text()


def test_a_version_tag_tests_then_releases_both_platforms_and_attaches_the_sboms() -> None:
    release = workflow("release.yml")
    assert release["on"] == {"push": {"tags": ["v*"]}}
    jobs = release["jobs"]
    assert jobs["test"]["uses"] == "./.github/workflows/ci.yml"
    job = jobs["release"]
    assert job["needs"] == "test"
    assert job["permissions"] == {"contents": "write", "packages": "write"}
    script = run_steps(job)
    assert "deploy/release.sh --registry" in script and "--platform linux/amd64,linux/arm64" in script
    assert '"$GITHUB_REF_NAME" != "v$version"' in script, "the tag must name setup.cfg's version"
    assert "gh release create" in script and "build/release/*.sbom.cdx.json" in script
    assert "qemu-user-static" in script and "buildah" in script
    env = next(step["env"] for step in job["steps"] if "deploy/release.sh" in step.get("run", ""))
    assert env["REGISTRY_PASSWORD"] == "${{ secrets.GITHUB_TOKEN }}"


def test_release_refuses_a_chart_version_other_than_setup_cfg(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    chart = clone / "deploy" / "helm" / "noe" / "Chart.yaml"
    chart.write_text(chart.read_text().replace(f"\nversion: {setup_cfg_version()}\n", "\nversion: 9.9.9\n", 1))
    proc = subprocess.run(
        [str(clone / "deploy" / "release.sh"), "--registry", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HELM": "true"},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        f"release.sh: deploy/helm/noe/Chart.yaml: version '9.9.9' and appVersion '{setup_cfg_version()}' "
        f"must both be setup.cfg's '{setup_cfg_version()}'"
    )


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {}, "--registry REGISTRY[/PATH] is required (e.g. ghcr.io/noe-webhook)"),
        (["--registry", "r.example", "--bogus"], {}, "unknown argument '--bogus' (see --help)"),
        (["--registry", "r.example"], {"HELM": "/nonexistent/helm"}, "helm not found"),
        (
            ["--registry", "r.example"],
            {"HELM": "true", "REGISTRY_USERNAME": "robot"},
            "set both REGISTRY_USERNAME and REGISTRY_PASSWORD, or neither",
        ),
    ],
)
def test_release_refuses_a_wrong_call_in_one_line(argv: list[str], env: dict[str, str], message: str) -> None:
    proc = subprocess.run(
        [str(RELEASE), *argv], capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin", **env}
    )
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"release.sh: {message}"), line


STUB_BUILD = """#!/bin/sh
# deploy/image/build.sh stand-in: the version, or the pushed image and digest, without buildah
case "$1" in --print-version) echo "{version}" ;; *) echo "$4:{version} sha256:{digest}" ;; esac
"""
STUB_HELM = """#!/bin/sh
# helm stand-in: `package DIR --destination OUT` writes the package; `push` succeeds
if [ "$1" = package ]; then : > "$4/noe-{version}.tgz"; fi
"""


def test_release_ships_the_kubectl_plugin_and_says_its_sums(tmp_path: Path) -> None:
    """The image and chart steps stubbed (tests/deploy/test_image_release.py runs them for real): the plugin's."""
    version = setup_cfg_version()
    clone = fresh_clone(tmp_path / "clone")
    stub = clone / "deploy" / "image" / "build.sh"
    stub.write_text(STUB_BUILD.format(version=version, digest="a" * 64))
    helm = tmp_path / "helm"
    helm.write_text(STUB_HELM.format(version=version))
    helm.chmod(0o755)
    out = tmp_path / "out"
    args = ["--registry", "r.example/team", "--output", str(out), "--release-url", "https://downloads.example/noe/v1"]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HELM": str(helm), "SOURCE_DATE_EPOCH": "1767225600"}
    proc = subprocess.run(
        [str(clone / "deploy" / "release.sh"), *args], capture_output=True, text=True, check=False, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    archive = out / f"kubectl-noe-{version}.tar.gz"
    assert lines["plugin"] == f"{archive.name} sha256:{hashlib.sha256(archive.read_bytes()).hexdigest()}"
    pyz = out / "kubectl-noe.pyz"
    assert lines["pyz"] == f"kubectl-noe.pyz sha256:{hashlib.sha256(pyz.read_bytes()).hexdigest()}"
    assert lines["krew"] == "krew/noe.yaml"
    assert (out / "kubectl-noe").read_bytes() == pyz.read_bytes()
    assert lines["image"] == f"r.example/team/noe:{version}@sha256:{'a' * 64}"
    assert (out / "release.txt").read_text() == proc.stdout
    manifest = yaml.safe_load((out / "krew" / "noe.yaml").read_text())
    assert {p["uri"] for p in manifest["spec"]["platforms"]} == {f"https://downloads.example/noe/v1/{archive.name}"}


def test_the_release_workflow_attaches_the_plugin() -> None:
    job = workflow("release.yml")["jobs"]["release"]
    script = run_steps(job)
    shipped = ("kubectl-noe ", "kubectl-noe.pyz", "kubectl-noe-*.tar.gz", "krew/noe.yaml")
    for name in shipped:
        assert f"build/release/{name}" in script, name
    env = next(step["env"] for step in job["steps"] if "deploy/release.sh" in step.get("run", ""))
    assert env["PYTHON"] == "/opt/helm-wheel/bin/python"  # a venv: pip is there to download the wheels
