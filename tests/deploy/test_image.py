"""The container image of this checkout (tracked files as they are now), built for this machine's platform.

deploy/image/build.sh builds it with buildah (vfs storage, chroot isolation: no
daemon) on a local debootstrap Debian base (tests/support/image_base.py, cached
in the user's cache directory), pip fetching the wheels from PyPI. The image then
runs ``noe`` as its non-root user, is pushed to the real registry the tests start
and read back by ``noe inspect`` (inside the image itself) and by skopeo. The
two-platform release build, its reproducibility, the SBOM of each platform and
the chart in the registry: tests/deploy/test_image_release.py.

Select these with ``pytest -m image``. The first run makes the base with
debootstrap (about 1.5 min); the image build takes about a minute more.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version as distribution_version
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core.util.installed_version import DISTRIBUTION
from tests.support.image_base import BuildahStore, host_arch, local_base, run_tool
from tests.support.image_release import (
    MUTATE_EXAMPLE,
    checkout_mutate,
    image_files,
    release_env,
    require_tools,
    schema_errors,
    terminal_line,
    unpinned,
    wait_for_bases,
)
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

# The first test also waits for the base (debootstrap) and the build: minutes, not the default 300 s.
pytestmark = [pytest.mark.image, pytest.mark.timeout(1800)]

BUILD = ROOT / "deploy" / "image" / "build.sh"
# build.sh takes the source label from the git remote `origin`; a clone without one passes this.
FALLBACK_SOURCE = "https://github.com/noe-webhook/noe"
OCI = "org.opencontainers.image."
USER = "10001"
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "tcc", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc")


def setup_cfg_version() -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]["version"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def commit_time() -> datetime:
    return datetime.fromtimestamp(int(git("log", "-1", "--format=%ct", "HEAD")), UTC)


def origin_url() -> str | None:
    proc = subprocess.run(
        ["git", "config", "--get", "remote.origin.url"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() or None


@dataclass(frozen=True)
class BuiltImage:
    store: BuildahStore
    reference: str  # localhost/noe:VERSION
    image_id: str
    base: str
    output: Path  # build.sh --output: the SBOM beside the build
    revision: str  # what the revision label must say, from git at build time
    source: str

    container: str  # one working container of the image (vfs copies the whole image per container)

    def run(
        self, *argv: str, user: str = USER, workdir: str = "/", check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``buildah run`` in the image's working container, as *user*."""
        return self.store.buildah(
            "run",
            "--isolation",
            "chroot",
            "--user",
            user,
            "--workingdir",
            workdir,
            self.container,
            "--",
            *argv,
            check=check,
        )

    def inspect(self, name: str | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(
            self.store.buildah("inspect", "--type", "image", name or self.reference).stdout
        )
        return doc


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> BuildahStore:
    require_tools()
    wait_for_bases(request.config)
    return BuildahStore.create(tmp_path_factory.mktemp("buildah"))


@pytest.fixture(scope="module")
def built(store: BuildahStore, request: pytest.FixtureRequest) -> Iterator[BuiltImage]:
    base = local_base(store)
    source = origin_url()
    output = store.root / "out"
    cmd = [str(BUILD), "--base", base, "--pull", "never", "--output", str(output)]
    cmd += [] if source else ["--source", FALLBACK_SOURCE]
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    revision = git("rev-parse", "HEAD") + ("-dirty" if dirty else "")
    clock = time.monotonic()
    proc = subprocess.run(cmd, env=release_env(store), capture_output=True, text=True, timeout=1200, check=False)
    seconds = time.monotonic() - clock
    assert proc.returncode == 0, proc.stderr[-4000:]
    reference, image_id = proc.stdout.split()[-2:]
    terminal_line(
        request.config,
        f"noe image: built {reference} ({image_id.removeprefix('sha256:')[:12]}) from {base} in {seconds:.0f} s",
    )
    container = store.buildah("from", "--pull=never", reference).stdout.strip()
    yield BuiltImage(store, reference, image_id, base, output, revision, source or FALLBACK_SOURCE, container)
    store.buildah("rm", container, check=False)


# --- one version, everywhere ----------------------------------------------------------------------


def test_one_version_source_everywhere() -> None:
    """setup.cfg's version is what pip installed, what `noe --version` says, the chart's appVersion
    (the default image tag) and the tag of the rendered manifests and of build.sh."""
    version = setup_cfg_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", version) and version != "latest"
    assert distribution_version(DISTRIBUTION) == version
    cli = subprocess.run(
        [sys.executable, "-c", "from noe_web.commands import main; main()", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert cli.stdout.strip() == f"noe {version}"
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "noe" / "Chart.yaml").read_text())
    assert chart["appVersion"] == version and chart["version"] == version, "chart version, appVersion: one number"
    for manifest in (ROOT / "deploy" / "manifests").glob("*.yaml"):
        tags = set(re.findall(r"image: \S+/noe:(\S+)", manifest.read_text()))
        assert tags == {version}, manifest.name
    printed = subprocess.run([str(BUILD), "--print-version"], capture_output=True, text=True, check=True)
    assert printed.stdout.strip() == version


def test_build_script_prints_the_release_arguments_and_refuses_bad_ones() -> None:
    """What docker buildx users pass (see the Dockerfile), and one-line errors for a wrong call."""
    printed = subprocess.run(
        [str(BUILD), "--print-build-args", "--source", FALLBACK_SOURCE], capture_output=True, text=True, check=True
    ).stdout.split()
    args = dict(
        value.split("=", 1) for flag, value in zip(printed[::2], printed[1::2], strict=True) if flag == "--build-arg"
    )
    assert set(args) == {"VERSION", "REVISION", "CREATED", "SOURCE", "SOURCE_DATE_EPOCH"}
    assert args["VERSION"] == setup_cfg_version()
    # Dates from the commit, not the clock (or from SOURCE_DATE_EPOCH when the environment has it).
    assert datetime.fromtimestamp(int(args["SOURCE_DATE_EPOCH"]), UTC) == commit_time()
    assert args["CREATED"] == commit_time().strftime("%Y-%m-%dT%H:%M:%SZ")
    given = subprocess.run(
        [str(BUILD), "--print-build-args", "--source", FALLBACK_SOURCE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"},
    ).stdout.split()
    assert "CREATED=2023-11-14T22:13:20Z" in given and "SOURCE_DATE_EPOCH=1700000000" in given
    assert args["REVISION"].removesuffix("-dirty") == git("rev-parse", "HEAD")
    assert args["SOURCE"] == FALLBACK_SOURCE
    for argv, message in (
        (["--bogus"], "unknown argument '--bogus' (see --help)"),
        (["--base"], "--base needs a value"),
        (["--tls-verify=maybe"], "--tls-verify takes true or false, not 'maybe'"),
        (["--platform", "linux"], "--platform: 'linux' is not OS/ARCH[/VARIANT]"),
        (["--platform", "linux/amd64,arm64"], "--platform: 'arm64' is not OS/ARCH[/VARIANT]"),
    ):
        proc = subprocess.run([str(BUILD), *argv], capture_output=True, text=True, check=False)
        assert proc.returncode == 2 and proc.stderr.splitlines() == [f"build.sh: {message}"]


def test_build_refuses_a_version_that_is_not_installed(built: BuiltImage) -> None:
    """The Dockerfile checks its VERSION argument against what pip installed, so a label cannot lie."""
    ca = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")  # as build.sh passes it
    proc = built.store.buildah(
        "build",
        "--isolation",
        "chroot",
        "--pull=never",
        "--target",
        "builder",
        "--build-arg",
        f"BASE_IMAGE={built.base}",
        "--build-arg",
        "VERSION=9.9.9",
        *(["--secret", f"id=pip-ca,src={ca}"] if ca else []),
        "--file",
        str(ROOT / "Dockerfile"),
        str(ROOT),
        check=False,
    )
    assert proc.returncode != 0
    assert f"VERSION build arg '9.9.9' is not the installed noe {setup_cfg_version()}" in proc.stderr + proc.stdout


# --- the built image -------------------------------------------------------------------------------


def test_tag_and_labels_come_from_the_version_and_the_commit(built: BuiltImage) -> None:
    version = setup_cfg_version()
    assert built.reference == f"localhost/noe:{version}"
    config = built.inspect()["OCIv1"]["config"]
    labels = config["Labels"]
    assert labels[OCI + "version"] == version
    assert labels[OCI + "revision"] == built.revision
    assert labels[OCI + "source"] == built.source
    created = datetime.strptime(labels[OCI + "created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert created == commit_time(), "the commit's time: a rebuild of the same commit says the same"
    assert config["User"] == f"{USER}:{USER}"
    assert config["Entrypoint"] == ["noe"]


def test_runs_as_its_non_root_user(built: BuiltImage) -> None:
    assert built.run("noe", "--version").stdout.strip() == f"noe {setup_cfg_version()}"
    assert built.run("id", "-u").stdout.strip() == USER


def test_mutate_in_the_image_matches_the_checkout(built: BuiltImage, tmp_path: Path) -> None:
    """`noe mutate` in the image gives, byte for byte, what the checkout's noe gives on the same files."""
    for name in ("pod.yaml", "platforms.json"):
        built.store.buildah(
            "copy", "--chown", f"{USER}:{USER}", built.container, str(ROOT / "examples" / name), f"/tmp/examples/{name}"
        )
    inside = built.run("noe", *MUTATE_EXAMPLE, workdir="/tmp").stdout
    here = checkout_mutate()
    assert inside == here
    pod = yaml.safe_load(inside)
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert any(
        expr["key"] == "kubernetes.io/arch" for term in terms["nodeSelectorTerms"] for expr in term["matchExpressions"]
    )


def test_runtime_holds_no_compiler_pip_or_setuptools(built: BuiltImage) -> None:
    for python in ("python3", "/opt/noe/bin/python"):
        for module in ("pip", "setuptools", "ensurepip"):
            proc = built.run(python, "-c", f"import {module}", check=False)
            assert proc.returncode != 0 and f"No module named '{module}'" in proc.stderr, (python, module)
    rootfs = Path(built.store.buildah("mount", built.container).stdout.strip())
    try:
        found = []
        for dirpath, dirnames, filenames in os.walk(rootfs):
            rel = Path(dirpath).relative_to(rootfs)
            for name in filenames + dirnames:
                if rel.name in ("bin", "sbin") and (
                    name in COMPILERS or re.fullmatch(r"(gcc|cc)[-\d.]*", name) or name.startswith("pip")
                ):
                    found.append(str(rel / name))
                if re.match(r"(pip|setuptools)(-[\d.]+.*\.(whl|dist-info|egg-info))?$", name):
                    found.append(str(rel / name))
        assert found == []
    finally:
        built.store.buildah("umount", built.container, check=False)


# --- pushed, and read back -------------------------------------------------------------------------


def skopeo(reg: RegistryServer, *args: str) -> str:
    return run_tool(["skopeo", "inspect", "--tls-verify=false", "--retry-times=0", *args], timeout=120).stdout


@pytest.fixture(scope="module")
def pushed(built: BuiltImage, registry: RegistryServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(reference in the registry, the digest buildah pushed)."""
    digest_file = tmp_path_factory.mktemp("push") / "digest"
    target = f"{registry.host}/noe:{setup_cfg_version()}"
    built.store.buildah(
        "push", "--quiet", "--tls-verify=false", "--digestfile", str(digest_file), built.reference, f"docker://{target}"
    )
    return target, digest_file.read_text().strip()


def test_pushed_image_read_back_by_noe_inspect_in_the_image_and_skopeo(
    built: BuiltImage, pushed: tuple[str, str], registry: RegistryServer, request: pytest.FixtureRequest
) -> None:
    target, pushed_digest = pushed
    # The image reads itself back: its own noe, as its own user, over the host's loopback.
    out = built.run("noe", "inspect", "--json", target, "--insecure-registries", "127.0.0.1:*").stdout
    doc = json.loads(out)
    raw = skopeo(registry, "--raw", f"docker://{target}")
    assert doc["digest"] == pushed_digest == "sha256:" + hashlib.sha256(raw.encode()).hexdigest()
    assert [(p["os"], p["architecture"]) for p in doc["platforms"]] == [("linux", host_arch())]
    config = json.loads(skopeo(registry, "--config", f"docker://{target}"))
    assert (config["os"], config["architecture"]) == ("linux", host_arch())
    seen = json.loads(skopeo(registry, f"docker://{target}"))
    assert seen["Digest"] == pushed_digest
    assert seen["Labels"][OCI + "version"] == setup_cfg_version()
    assert seen["Labels"][OCI + "revision"] == built.revision
    manifest = json.loads(raw)
    pulled = sum(layer["size"] for layer in manifest["layers"]) + manifest["config"]["size"]
    base_layers = len(built.inspect(built.base)["OCIv1"]["rootfs"]["diff_ids"])
    added = sum(layer["size"] for layer in manifest["layers"][base_layers:])
    terminal_line(
        request.config,
        f"noe image: {target} digest {doc['digest']} platform linux/{host_arch()}; "
        f"{pulled / 1e6:.1f} MB to pull (compressed), of which noe's layers {added / 1e6:.1f} MB",
    )
    # The builder stage (sources, wheel cache, pip) stays behind: noe's layers are its venv.
    assert 0 < added < 40e6


# --- the SBOM ---------------------------------------------------------------------------------------


def test_the_sbom_in_the_image_lists_its_distributions_and_is_written_beside_the_build(built: BuiltImage) -> None:
    found, sbom = image_files(built.store, built.container)
    assert {c["name"]: c["version"] for c in sbom["components"]} == found
    assert schema_errors(sbom) is None, schema_errors(sbom)
    assert found["noe-webhook"] == setup_cfg_version() and {"flask", "gunicorn", "cryptography"} <= {
        name.lower() for name in found
    }
    assert json.loads((built.output / f"noe-{setup_cfg_version()}.sbom.cdx.json").read_text()) == sbom
    # A user reads it in the running image, as its non-root user.
    doc = json.loads(built.run("cat", "/usr/share/doc/noe/sbom.cdx.json").stdout)
    assert doc == sbom
    assert unpinned(found) == {}, "not pinned at the installed version in deploy/image/constraints.txt"
