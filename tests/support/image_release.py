"""Release builds for the image suites, made once per test run (pytest plugin, loaded by tests/conftest.py).

The image tests run last (the slowest), and the debootstrap bases they need that are not cached yet are
made meanwhile by a background ``nice`` process started at collection (``python -m tests.support.image_base``),
so a fresh machine's minutes of debootstrap under qemu overlap the rest of the suite; :func:`wait_for_bases`
is called by the fixtures that need them.

Session-scoped, each made on first use:

    base_index      the two debootstrap bases (amd64, arm64) as one OCI index on ``registry``, pinned by digest
    released        ``deploy/release.sh`` run from a fresh clone of HEAD, with fresh storage and no
                    SOURCE_DATE_EPOCH: linux/amd64 + linux/arm64 (arm64 under qemu) pushed as one OCI
                    index, and the chart, to ``basic_registry`` (logged in with ``basic_credentials``)
    reproduced      ``deploy/image/build.sh`` of linux/amd64 from a second fresh clone, fresh storage, pushed
                    to ``registry``: the same commit built again, to compare digests with ``released``

Helpers:

    fresh_clone, tested_commit    a clone of the commit the run tests (HEAD when first asked)
    wait_for_bases                the background base maker done (or the test fails with its output)
    terminal_line                 a figure the run reports, whatever the capture
    skopeo_raw, skopeo_config     an image's manifest or config, read by skopeo
    image_container               a working container of one platform of a pushed image
    image_files                   the distributions in an image's /opt/noe, and its SBOM
    unpinned                      those deploy/image/constraints.txt does not pin at their version
    schema_errors                 an SBOM checked against the CycloneDX schema of its version
    checkout_mutate               this checkout's ``noe mutate`` of the examples, to compare with an image's
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.helm import helm_binary
from tests.support.image_base import BuildahStore, base_archive, host_arch, run_tool
from tests.support.image_base import base_index as push_base_index
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

RELEASE = ROOT / "deploy" / "release.sh"
BUILD = ROOT / "deploy" / "image" / "build.sh"
PLATFORMS = ("linux/amd64", "linux/arm64")
BASE_ARCHES = tuple(dict.fromkeys([host_arch(), *(p.split("/")[1] for p in PLATFORMS)]))
# build.sh takes the source label from the git remote `origin`; every clone here has the same one (ROOT).
TOOLS = ("buildah", "debootstrap", "skopeo", "git")
SBOM = "/usr/share/doc/noe/sbom.cdx.json"


_BASES = pytest.StashKey[tuple[subprocess.Popen[bytes], Path]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Image tests last; their missing bases started in the background (see the module's docstring)."""
    image = [item for item in items if item.get_closest_marker("image")]
    if not image:
        return
    items[:] = [item for item in items if not item.get_closest_marker("image")] + image
    missing = [arch for arch in BASE_ARCHES if not base_archive(arch).is_file()]
    if missing and shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin"):
        log = Path(tempfile.mkdtemp(prefix="noe-image-bases-")) / "make.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["nice", "-n", "19", sys.executable, "-m", "tests.support.image_base", *missing],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        config.stash[_BASES] = (proc, log)


def wait_for_bases(config: pytest.Config) -> None:
    """Until the background base maker (if any) is done; its failure fails the test with its output's tail."""
    started = config.stash.get(_BASES, None)
    if started is None:
        return
    proc, log = started
    try:
        proc.wait(timeout=3600)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        pytest.fail(f"making the image bases failed ({proc.returncode}):\n{tail}", pytrace=False)


def terminal_line(config: pytest.Config, line: str) -> None:
    """A figure the run reports (build time, size, digest), printed whether or not output is captured."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def require_tools() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin") is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run `python -m tests.support.system_deps`", pytrace=False)


@functools.cache
def tested_commit() -> str:
    """The checkout's HEAD when the run first asked: every clone of the run builds this one commit."""
    return run_tool(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).stdout.strip()


def fresh_clone(dest: Path) -> Path:
    """A clone of the checkout's HEAD, as a release job checks it out: committed files only."""
    run_tool(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)], timeout=120)
    run_tool(["git", "-C", str(dest), "checkout", "--quiet", "--detach", tested_commit()])
    return dest


def release_env(store: BuildahStore, **extra: str) -> dict[str, str]:
    """The build's environment: *store* for storage, and no SOURCE_DATE_EPOCH (the commit must decide)."""
    env = {k: v for k, v in store.env.items() if k != "SOURCE_DATE_EPOCH" and not k.startswith("REGISTRY_")}
    env.update(extra)
    return env


def skopeo_raw(reference: str, *, creds: tuple[str, str] | None = None) -> bytes:
    cmd = ["skopeo", "inspect", "--raw", "--tls-verify=false", "--retry-times=0"]
    if creds:
        cmd += ["--creds", f"{creds[0]}:{creds[1]}"]
    proc = subprocess.run([*cmd, f"docker://{reference}"], capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return proc.stdout


def skopeo_config(reference: str, *, creds: tuple[str, str] | None = None, arch: str | None = None) -> dict[str, Any]:
    """The image config of *reference* (of an index: its *arch* image, else this machine's)."""
    cmd = ["skopeo", "inspect", "--config", "--tls-verify=false", "--retry-times=0"]
    cmd += ["--creds", f"{creds[0]}:{creds[1]}"] if creds else []
    cmd += ["--override-arch", arch] if arch else []
    proc = subprocess.run([*cmd, f"docker://{reference}"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    config: dict[str, Any] = json.loads(proc.stdout)
    return config


@dataclass(frozen=True)
class Released:
    clone: Path
    store: BuildahStore
    registry: RegistryServer
    creds: tuple[str, str]
    image: str  # REGISTRY/noe:VERSION
    digest: str  # the index's
    chart: str  # oci://REGISTRY/charts/noe
    version: str
    output: Path  # SBOMs, chart package, release.txt
    seconds: float
    log: str

    @property
    def repository(self) -> str:
        """REGISTRY/noe: with ``@DIGEST``, a reference tools accept (a tag and a digest together they do not)."""
        return self.image.rsplit(":", 1)[0]

    def index(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(skopeo_raw(f"{self.repository}@{self.digest}", creds=self.creds))
        return doc


@dataclass(frozen=True)
class Reproduced:
    clone: Path
    image: str
    digest: str  # the index's (of one platform)
    registry: RegistryServer
    seconds: float

    @property
    def repository(self) -> str:
        return self.image.rsplit(":", 1)[0]


def _timed(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[str, str, float]:
    clock = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    seconds = time.monotonic() - clock
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    return proc.stdout, proc.stderr, seconds


def _per_platform(log: str) -> str:
    return "; ".join(
        line.removeprefix("build.sh: built ") for line in log.splitlines() if " s" in line and "(linux/" in line
    )


@pytest.fixture(scope="session")
def base_index(
    tmp_path_factory: pytest.TempPathFactory, registry: RegistryServer, request: pytest.FixtureRequest
) -> str:
    require_tools()
    wait_for_bases(request.config)
    store = BuildahStore.create(tmp_path_factory.mktemp("base-index-store"))
    return push_base_index(store, registry, [p.split("/")[1] for p in PLATFORMS])


@pytest.fixture(scope="session")
def released(
    tmp_path_factory: pytest.TempPathFactory,
    base_index: str,
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    request: pytest.FixtureRequest,
) -> Iterator[Released]:
    work = tmp_path_factory.mktemp("release")
    clone = fresh_clone(work / "clone")
    store = BuildahStore.create(work / "store")
    user, password = basic_credentials
    env = release_env(store, REGISTRY_USERNAME=user, REGISTRY_PASSWORD=password, HELM=str(helm_binary()))
    env["HELM_CONFIG_HOME"], env["HELM_CACHE_HOME"] = str(work / "helm-config"), str(work / "helm-cache")
    output = work / "out"
    cmd = [
        str(clone / "deploy" / "release.sh"),
        "--registry",
        basic_registry.host,
        "--platform",
        ",".join(PLATFORMS),
        "--base",
        base_index,
        "--plain-http",
        "--output",
        str(output),
    ]
    stdout, log, seconds = _timed(cmd, cwd=clone, env=env, timeout=3600)
    lines = dict(line.split(" ", 1) for line in stdout.strip().splitlines())
    image, digest = lines["image"].split("@")
    chart, version = lines["chart"].split()
    terminal_line(
        request.config,
        f"noe release: {image}@{digest} ({', '.join(PLATFORMS)}) and {chart} {version} in {seconds:.0f} s "
        f"({_per_platform(log)})",
    )
    yield Released(clone, store, basic_registry, basic_credentials, image, digest, chart, version, output, seconds, log)


@pytest.fixture(scope="session")
def reproduced(
    tmp_path_factory: pytest.TempPathFactory,
    released: Released,
    base_index: str,
    registry: RegistryServer,
    request: pytest.FixtureRequest,
) -> Reproduced:
    """linux/amd64 of the released commit again: another clone, another store, no SOURCE_DATE_EPOCH."""
    work = tmp_path_factory.mktemp("reproduce")
    clone = fresh_clone(work / "clone")
    store = BuildahStore.create(work / "store")
    cmd = [
        str(clone / "deploy" / "image" / "build.sh"),
        "--platform",
        "linux/amd64",
        "--base",
        base_index,
        "--push",
        f"{registry.host}/noe-again",
        "--tls-verify=false",
        "--output",
        str(work / "out"),
    ]
    stdout, _, seconds = _timed(cmd, cwd=clone, env=release_env(store), timeout=3600)
    image, digest = stdout.strip().splitlines()[-1].split()
    terminal_line(request.config, f"noe image rebuilt: {image}@{digest} (linux/amd64) in {seconds:.0f} s")
    return Reproduced(clone, image, digest, registry, seconds)


def image_container(store: BuildahStore, reference: str, platform: str, *, creds: tuple[str, str] | None = None) -> str:
    """A working container of *platform*'s image of the index *reference*, pulled afresh into *store*."""
    args = ["from", "--pull=always", "--tls-verify=false", "--platform", platform, "--quiet"]
    if creds:
        args += ["--creds", f"{creds[0]}:{creds[1]}"]
    return store.buildah(*args, f"docker://{reference}", timeout=900).stdout.strip().splitlines()[-1]


def image_files(store: BuildahStore, ctr: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(name -> version of every distribution in the image's /opt/noe, read from its dist-info files; its SBOM)."""
    rootfs = Path(store.buildah("mount", ctr).stdout.strip())
    try:
        found = {}
        for metadata in rootfs.glob("opt/noe/lib/python3*/site-packages/*.dist-info/METADATA"):
            head = metadata.read_text().split("\n\n")[0]
            fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
            found[fields["Name"]] = fields["Version"]
        sbom: dict[str, Any] = json.loads((rootfs / SBOM.lstrip("/")).read_text())
        return found, sbom
    finally:
        store.buildah("umount", ctr, check=False)


def canonical(name: str) -> str:
    """A distribution's normalized name (PEP 503), as purls and pip compare them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def unpinned(found: dict[str, str]) -> dict[str, str]:
    """The distributions (besides noe-webhook itself) not pinned at their version by deploy/image/constraints.txt."""
    pins = {}
    for line in (ROOT / "deploy" / "image" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonical(name)] = version.strip()
    return {n: v for n, v in found.items() if canonical(n) != "noe-webhook" and pins.get(canonical(n)) != v}


def schema_errors(sbom: dict[str, Any]) -> str | None:
    """Why *sbom* is not valid CycloneDX JSON of its declared version (its first lines), or None."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    version = SchemaVersion.from_version(sbom["specVersion"])
    error = JsonStrictValidator(version).validate_str(json.dumps(sbom))
    return None if error is None else "\n".join(str(error).splitlines()[:5])


def checkout_mutate() -> str:
    """What this checkout's ``noe mutate`` prints for examples/pod.yaml and examples/platforms.json (run from ROOT),
    to compare byte for byte with an image's ``noe mutate`` on the same files (copied to /tmp/examples)."""
    return subprocess.run(
        [sys.executable, "-m", "noe_web", *MUTATE_EXAMPLE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


MUTATE_EXAMPLE = ("mutate", "-f", "examples/pod.yaml", "--platforms", "examples/platforms.json")
