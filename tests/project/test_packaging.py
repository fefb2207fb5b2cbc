"""The distribution users install: its licence and project links travel with the wheel."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.support.kubectl import kubectl_path, run_kubectl
from tests.support.paths import ROOT


def _tracked_copy(target: Path) -> Path:
    """A copy of the files git tracks (plus uncommitted ones), so the build sees no stale build/ or egg-info."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def test_wheel_ships_the_license_and_project_urls(tmp_path: Path) -> None:
    source = _tracked_copy(tmp_path / "src")
    # Built as users and the image build do: pip, in an isolated build environment (pyproject.toml).
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("noe_webhook-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        licences = [n for n in names if ".dist-info/" in n and n.rsplit("/", 1)[-1] == "LICENSE"]
        assert licences, f"no LICENSE in {wheel.name}: {[n for n in names if 'dist-info' in n]}"
        shipped = zf.read(licences[0]).decode()
        meta = Parser().parsestr(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    assert shipped == (ROOT / "LICENSE").read_text()
    assert "Apache License" in shipped and "Version 2.0" in shipped
    # The licence file and the metadata say the same thing.
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["license"] == "Apache-2.0"
    assert meta.get("License") == "Apache-2.0" or meta.get("License-Expression") == "Apache-2.0"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert urls.get("Source", "").startswith("https://github.com/"), urls
    assert "Issues" in urls and "Upstream (Go Noe)" in urls


@pytest.mark.kubectl
def test_the_wheel_installs_kubectl_noe_that_kubectl_runs(tmp_path: Path) -> None:
    """pip writes a ``kubectl-noe`` console script next to ``noe``; kubectl finds it on PATH and runs it."""
    source = _tracked_copy(tmp_path / "src")
    target = tmp_path / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-compile",
            "-q",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    scripts = target / "bin"
    assert {"noe", "kubectl-noe"} <= {p.name for p in scripts.iterdir()}
    # The script's interpreter has the dependencies; PYTHONPATH puts the installed package before any other noe.
    env = {"PYTHONPATH": str(target)}
    kubectl = kubectl_path("path")
    listed = run_kubectl(kubectl, ["plugin", "list"], plugins=scripts, home=tmp_path, env=env)
    assert str(scripts / "kubectl-noe") in listed.stdout.splitlines(), listed.stdout + listed.stderr
    shown = run_kubectl(kubectl, ["noe", "report", "--help"], plugins=scripts, home=tmp_path, env=env)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: kubectl noe report"), shown.stderr
    where = subprocess.run(
        [str(scripts / "kubectl-noe"), "--version"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert where.returncode == 0 and where.stdout.startswith("noe "), where.stderr
