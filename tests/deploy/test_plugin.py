"""deploy/plugin/build_zipapp.py: kubectl-noe as one file, its krew archive and manifest.

The build runs as the release runs it (a subprocess, pip downloading the pinned
wheels). The file is then run by every Python ≥ 3.11 on the machine with
``-I -S`` — no site-packages, no environment — and what it prints is compared
with the ``noe`` of this checkout; which modules it loaded, and from where, is
read from the interpreter itself. The krew manifest is checked with krew's own
rules (its ``pkg/index/validation`` and ``validate-krew-manifest``) and its
archive installed as krew installs it.
"""

from __future__ import annotations

import configparser
import fnmatch
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.images import PushedImage
from tests.support.kubectl import kubectl_path, run_kubectl
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.deploy

BUILD = ROOT / "deploy" / "plugin" / "build_zipapp.py"
VERSION = configparser.ConfigParser()
VERSION.read(ROOT / "setup.cfg")
SETUP_VERSION = VERSION["metadata"]["version"]
EPOCH = 1767225600  # 2026-01-01T00:00:00Z
PURE_TOP_LEVEL = {
    "__main__.py",
    "noe_core",
    "noe_web",
    "requests",
    "urllib3",
    "idna",
    "certifi",
    "charset_normalizer",
    "jsonpatch.py",
    "jsonpointer.py",
    "yaml",
    "tqdm",
}
OFFLINE = ["-f", "examples/pod.yaml", "--platforms", "examples/platforms.json"]


@dataclass(frozen=True)
class Build:
    output: Path
    stdout: str

    @property
    def pyz(self) -> Path:
        return self.output / "kubectl-noe.pyz"

    @property
    def archive(self) -> Path:
        return self.output / f"kubectl-noe-{SETUP_VERSION}.tar.gz"

    @property
    def manifest(self) -> Path:
        return self.output / "krew" / "noe.yaml"

    def files(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.output)): p.read_bytes() for p in sorted(self.output.rglob("*")) if p.is_file()}


def run_build(output: Path, wheels: Path, epoch: int = EPOCH, *extra: str) -> Build:
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    proc = subprocess.run(
        [sys.executable, str(BUILD), "--output", str(output), "--wheels", str(wheels), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Build(output, proc.stdout)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wheels")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Build:
    return run_build(tmp_path_factory.mktemp("plugin"), wheels)


def interpreters() -> Iterator[str]:
    """Every Python ≥ 3.11 found here: python3.11 must be one; the test's own runs with -I -S too."""
    seen: set[str] = set()
    candidates = ["/usr/bin/python3.11", shutil.which("python3.11") or "", sys.executable]
    for minor in range(12, 16):
        candidates.append(shutil.which(f"python3.{minor}") or "")
        candidates += sorted(str(p) for p in Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python3.{minor}"))
    for candidate in candidates:
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        proc = subprocess.run(
            [candidate, "-I", "-S", "-c", "import sys; print(sys.version_info >= (3, 11), sys.executable)"],
            capture_output=True,
            text=True,
            check=False,
        )
        ok, _, where = proc.stdout.strip().partition(" ")
        if proc.returncode == 0 and ok == "True" and where not in seen:
            seen.add(where)
            yield candidate


PYTHONS = list(interpreters())


def test_python_3_11_is_among_the_interpreters() -> None:
    versions = [
        subprocess.run(
            [p, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=False
        ).stdout
        for p in PYTHONS
    ]
    assert "(3, 11)\n" in versions, f"no python3.11 to run kubectl-noe.pyz with: {PYTHONS}"


# ------------------------------------------------------------------ what the file holds


def test_one_file_of_pure_python_with_a_shebang(built: Build) -> None:
    data = built.pyz.read_bytes()
    assert data.startswith(b"#!/usr/bin/env python3\n")
    assert (built.output / "kubectl-noe").read_bytes() == data
    assert os.access(built.output / "kubectl-noe", os.X_OK)
    with zipfile.ZipFile(built.pyz) as zf:
        names = zf.namelist()
    assert names == sorted(names)
    compiled = [n for n in names if n.endswith((".so", ".pyd", ".dylib", ".dll", ".pyc", ".pyo"))]
    assert compiled == []
    assert not any("__pycache__" in n for n in names)
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == PURE_TOP_LEVEL
    assert "_yaml" not in tops and "yaml/cyaml.py" in names  # PyYAML without its extension
    assert "noe_web/commands/kubectl.py" in names and "noe_web/report/templates/report.html.j2" in names
    assert len(data) < 3_000_000, len(data)


def _pins() -> dict[str, str]:
    found = {}
    for path in (ROOT / "deploy" / "image" / "constraints.txt", ROOT / "deploy" / "plugin" / "constraints.txt"):
        for line in path.read_text().splitlines():
            if m := re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line.split("#")[0].strip()):
                found[re.sub(r"[-_.]+", "-", m[1]).lower()] = m[2]
    return found


def test_the_packed_versions_are_the_pinned_ones_and_carry_their_licences(built: Build) -> None:
    pins = _pins()
    with zipfile.ZipFile(built.pyz) as zf:
        infos = sorted({n.split("/", 1)[0] for n in zf.namelist() if ".dist-info/" in n})
        packed = {}
        for info in infos:
            meta = zf.read(f"{info}/METADATA").decode()
            name = re.search(r"^Name: (.+)$", meta, re.M)[1]  # type: ignore[index]
            version = re.search(r"^Version: (.+)$", meta, re.M)[1]  # type: ignore[index]
            packed[re.sub(r"[-_.]+", "-", name).lower()] = version
            licences = [n for n in zf.namelist() if n.startswith(f"{info}/") and "LICEN" in n.upper()]
            assert licences, f"{info} carries no licence file"
    assert packed.pop("noe-webhook") == SETUP_VERSION
    assert set(packed) == {
        "requests", "urllib3", "idna", "certifi", "charset-normalizer", "jsonpatch", "jsonpointer", "pyyaml", "tqdm",
    }  # fmt: skip
    assert packed == {name: pins[name] for name in packed}
    assert all(f"=={v}" in built.stdout for v in packed.values()), built.stdout


def test_two_builds_give_the_same_bytes_and_the_epoch_is_every_time(built: Build, wheels: Path, tmp_path: Path) -> None:
    again = run_build(tmp_path / "again", wheels)
    assert again.files() == built.files()
    later = run_build(tmp_path / "later", wheels, EPOCH + 86400)
    assert later.pyz.read_bytes() != built.pyz.read_bytes()
    with zipfile.ZipFile(built.pyz) as zf:
        assert {i.date_time for i in zf.infolist()} == {time.gmtime(EPOCH)[:6]}
        assert {i.external_attr >> 16 for i in zf.infolist()} == {0o100644}
    with tarfile.open(built.archive) as tar:
        members = tar.getmembers()
    assert [(m.name, m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members] == [
        ("LICENSE", 0o644, EPOCH, 0, 0, "", ""),
        ("kubectl-noe", 0o755, EPOCH, 0, 0, "", ""),
    ]
    with gzip.open(built.archive) as gz:
        gz.read()
    assert int.from_bytes(built.archive.read_bytes()[4:8], "little") == EPOCH  # the gzip header's time


def test_a_compiled_file_stops_the_build(tmp_path: Path) -> None:
    sys.path.insert(0, str(BUILD.parent))
    try:
        import build_zipapp  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BUILD.parent))
    with pytest.raises(build_zipapp.BuildError, match=r"refusing compiled files in the zipapp: x/_speedups\.so"):
        build_zipapp.write_zipapp(tmp_path / "x.pyz", {"x/__init__.py": b"", "x/_speedups.so": b"\x7fELF"}, EPOCH)


# ------------------------------------------------------------------ running it, isolated

DRIVER = """
import json, runpy, sys
pyz, out = sys.argv[1], sys.argv[2]
sys.argv = [pyz, *sys.argv[3:]]
code = 0
try:
    runpy.run_path(pyz, run_name="__main__")
except SystemExit as exc:
    code = exc.code
finally:
    import yaml
    loaded = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}
    with open(out, "w") as f:
        json.dump({"code": code, "files": loaded, "libyaml": yaml.__with_libyaml__, "path": sys.path}, f)
"""


def isolated(python: str, pyz: Path, *args: str, record: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -I -S kubectl-noe.pyz ARGS`` in a bare environment; with ``record``, through the driver."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(record.parent if record else ROOT)}
    command = [python, "-I", "-S", str(pyz), *args]
    if record is not None:
        command = [python, "-I", "-S", "-c", DRIVER, str(pyz), str(record), *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("python", PYTHONS)
def test_the_file_runs_alone_and_prints_what_noe_prints(python: str, built: Build, tmp_path: Path) -> None:
    helped = isolated(python, built.pyz, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: kubectl noe "), helped.stderr
    version = isolated(python, built.pyz, "--version")
    assert (version.returncode, version.stdout) == (0, f"noe {SETUP_VERSION}\n"), version.stderr
    for args in (
        ["report", *OFFLINE, "-o", "json"],
        ["report", *OFFLINE, "-o", "yaml"],
        ["report", *OFFLINE],
        ["mutate", *OFFLINE, "--patch", "-o", "json"],
        ["policy", "explain", "-f", "examples/pod.yaml", "--policy", "examples/policies/cluster-default.yaml"],
    ):
        single = isolated(python, built.pyz, *args)
        code, out, err = run_cli(*args)
        assert (single.returncode, single.stdout) == (code, out), (args, single.stderr, err)
    bad = isolated(python, built.pyz, "report", "--kubeconfig", "/nonexistent")
    assert bad.returncode == 2 and bad.stderr.startswith("noe report: argument --kubeconfig: '/nonexistent'"), (
        bad.stderr
    )


@pytest.mark.parametrize("python", PYTHONS)
def test_the_file_imports_only_itself_and_the_standard_library(python: str, built: Build, tmp_path: Path) -> None:
    record = tmp_path / "modules.json"
    proc = isolated(python, built.pyz, "report", *OFFLINE, "-o", "json", record=record)
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(record.read_text())
    info = subprocess.run(
        [python, "-I", "-S", "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"],
        capture_output=True,
        text=True,
        check=True,
    )
    stdlib = {json.loads(info.stdout)[key] for key in ("stdlib", "platstdlib")}
    outside = {
        name: where
        for name, where in seen["files"].items()
        if where and not where.startswith(str(built.pyz)) and not any(where.startswith(s) for s in stdlib)
    }
    assert outside == {}, outside
    assert not any("site-packages" in str(entry) or "venv" in str(entry) for entry in seen["path"]), seen["path"]
    from_pyz = {name for name, where in seen["files"].items() if where and where.startswith(str(built.pyz))}
    assert {"noe_web.report.command", "yaml", "jsonpatch", "noe_core.placement.rules"} <= from_pyz
    assert seen["libyaml"] is False  # PyYAML's pure-Python parser
    assert "orjson" not in seen["files"] and "flask" not in seen["files"]
    assert sysconfig.get_paths()["purelib"] not in str(seen["path"])


def test_inspect_reads_the_registry_from_the_single_file(
    built: Build, registry: RegistryServer, pushed_images: dict[str, PushedImage], tmp_path: Path
) -> None:
    image = pushed_images["oci-index-attestations"]
    args = ["inspect", image.reference, "--insecure-registries", "127.0.0.1:*", "-o", "json"]
    record = tmp_path / "modules.json"
    single = isolated(PYTHONS[0], built.pyz, *args, record=record)
    assert single.returncode == 0, single.stderr
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert json.loads(single.stdout) == json.loads(out)
    files = json.loads(record.read_text())["files"]
    assert all(str(files[name]).startswith(str(built.pyz)) for name in ("requests", "urllib3", "idna", "certifi"))


@pytest.mark.kubectl
def test_kubectl_runs_the_single_file_from_path(built: Build, tmp_path: Path) -> None:
    plugins = tmp_path / "bin"
    plugins.mkdir()
    shutil.copy2(built.output / "kubectl-noe", plugins / "kubectl-noe")
    (plugins / "python3").symlink_to(PYTHONS[0])  # the shebang's python3: the oldest supported
    kubectl = kubectl_path("path")
    listed = run_kubectl(kubectl, ["plugin", "list"], plugins=plugins, home=tmp_path)
    assert str(plugins / "kubectl-noe") in listed.stdout.splitlines(), listed.stdout + listed.stderr
    proc = run_kubectl(kubectl, ["noe", "report", *OFFLINE, "-o", "json"], plugins=plugins, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(run_cli("report", *OFFLINE, "-o", "json")[1])


# ------------------------------------------------------------------ the krew manifest and archive

KREW_NAME = re.compile(r"^[\w-]+$")
WINDOWS_FORBIDDEN = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}
SEMVER = re.compile(
    r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-.]+)?$"
)
KREW_PLATFORMS = {
    (os_name, arch) for os_name in ("linux", "darwin", "windows") for arch in ("386", "amd64", "arm", "arm64")
}


def _selects(selector: dict[str, Any], os_name: str, arch: str) -> bool:
    labels = {"os": os_name, "arch": arch}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, values = labels.get(expr["key"]), expr.get("values") or []
        if (expr["operator"] == "In") != (value in values):
            return False
    return True


def test_the_manifest_passes_krews_checks(built: Build) -> None:
    """krew's pkg/index/validation.ValidatePlugin and validate-krew-manifest's offline checks."""
    plugin = yaml.safe_load(built.manifest.read_text())
    assert plugin["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert plugin["kind"] == "Plugin"
    name = plugin["metadata"]["name"]
    assert KREW_NAME.match(name) and name.lower() not in WINDOWS_FORBIDDEN
    assert name == built.manifest.stem == "noe"  # the file is named after the plugin (plugins/noe.yaml)
    spec = plugin["spec"]
    assert spec["version"] == f"v{SETUP_VERSION}" and SEMVER.match(spec["version"])
    assert spec["homepage"].startswith("https://")
    assert spec["shortDescription"] and "\n" not in spec["shortDescription"]
    for field, width in (("shortDescription", 70), ("description", 80), ("caveats", 80)):
        assert all(len(line) <= width for line in spec[field].splitlines()), field
    assert "python3" in spec["caveats"] and "3.11" in spec["caveats"]
    assert spec["platforms"]
    matched: dict[tuple[str, str], int] = {}
    for index, platform in enumerate(spec["platforms"]):
        assert platform["uri"] and platform["bin"] and platform["files"]
        assert re.fullmatch(r"[a-f0-9]{64}", platform["sha256"])
        selector = platform["selector"]
        keys = {*(selector.get("matchLabels") or {}), *(e["key"] for e in selector.get("matchExpressions") or [])}
        assert keys and keys <= {"os", "arch"}
        hits = [pair for pair in sorted(KREW_PLATFORMS) if _selects(selector, *pair)]
        assert hits, f"platform {index} selects no platform krew supports"
        for pair in hits:
            assert pair not in matched, f"platforms {matched[pair]} and {index} both select {pair}"
            matched[pair] = index
    assert set(matched) == {("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"), ("darwin", "arm64")}


def test_the_manifest_points_at_the_archive_it_was_built_with(built: Build, wheels: Path, tmp_path: Path) -> None:
    digest = hashlib.sha256(built.archive.read_bytes()).hexdigest()
    spec = yaml.safe_load(built.manifest.read_text())["spec"]
    default = f"https://github.com/noe-webhook/noe-webhook/releases/download/v{SETUP_VERSION}/{built.archive.name}"
    assert {(p["uri"], p["sha256"]) for p in spec["platforms"]} == {(default, digest)}
    assert f"archive {built.archive} sha256:{digest}" in built.stdout
    mirrored = run_build(tmp_path / "mirror", wheels, EPOCH, "--release-url", "https://downloads.example/noe/v1/")
    spec = yaml.safe_load(mirrored.manifest.read_text())["spec"]
    assert {p["uri"] for p in spec["platforms"]} == {f"https://downloads.example/noe/v1/{built.archive.name}"}


def test_the_archive_installs_as_krew_installs_it(built: Build, tmp_path: Path) -> None:
    """Unpack, copy each `files` entry (a glob) to `to`, then run `bin` — krew's install steps."""
    platform = yaml.safe_load(built.manifest.read_text())["spec"]["platforms"][0]
    unpacked, installed = tmp_path / "download", tmp_path / "store" / "noe" / f"v{SETUP_VERSION}"
    with tarfile.open(built.archive) as tar:
        tar.extractall(unpacked, filter="data")
    for operation in platform["files"]:
        matches = [p for p in unpacked.rglob("*") if fnmatch.fnmatch(str(p.relative_to(unpacked)), operation["from"])]
        assert matches, f"files.from {operation['from']!r} matches nothing in the archive"
        for match in matches:
            (installed / operation["to"]).mkdir(parents=True, exist_ok=True)
            shutil.copy2(match, installed / operation["to"] / match.name)
    binary = installed / platform["bin"]
    assert binary.is_file() and os.access(binary, os.X_OK)
    assert (installed / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert binary.read_bytes() == built.pyz.read_bytes()
    proc = subprocess.run(
        [PYTHONS[0], "-I", "-S", str(binary), "--version"], capture_output=True, text=True, check=False
    )
    assert proc.stdout == f"noe {SETUP_VERSION}\n", proc.stderr
