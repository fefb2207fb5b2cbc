"""The container image, built for real from the root Dockerfile and used like a user would.

deploy/image/build.sh builds it with buildah (vfs storage, chroot isolation: no
daemon) on a local debootstrap Debian base (tests/support/image_base.py, cached
under tests/.image-cache/), pip fetching the wheels from PyPI. The image then runs
``noe`` as its non-root user, is pushed to the real registry the tests start and
read back by ``noe inspect`` (inside the image itself) and by skopeo.

Select these with ``pytest -m image``. The first run makes the base with
debootstrap (about 1.5 min); the image build takes about a minute more.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version as distribution_version
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core.version import DISTRIBUTION
from tests.support.image_base import BuildahStore, host_arch, local_base, run_tool
from tests.support.registry_server import RegistryServer

# The first test also waits for the base (debootstrap) and the build: minutes, not the default 300 s.
pytestmark = [pytest.mark.image, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "deploy" / "image" / "build.sh"
# build.sh takes the source label from the git remote `origin`; a clone without one passes this.
FALLBACK_SOURCE = "https://github.com/noe-webhook/noe"
OCI = "org.opencontainers.image."
USER = "10001"
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "tcc", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc")
TOOL_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
QEMU_NAMES = {"arm64": "aarch64", "amd64": "x86_64"}


def setup_cfg_version() -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]["version"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


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
    started: datetime
    finished: datetime
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


def terminal_line(config: pytest.Config, line: str) -> None:
    """A figure the run reports (build time, size, digest), printed whether or not output is captured."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> BuildahStore:
    missing = [tool for tool in ("buildah", "debootstrap", "skopeo") if shutil.which(tool, path=TOOL_PATH) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run `python -m tests.support.system_deps`", pytrace=False)
    return BuildahStore.create(tmp_path_factory.mktemp("buildah"))


@pytest.fixture(scope="module")
def built(store: BuildahStore, request: pytest.FixtureRequest) -> Iterator[BuiltImage]:
    base = local_base(store)
    source = origin_url()
    cmd = [str(BUILD), "--base", base, "--pull", "never", *([] if source else ["--source", FALLBACK_SOURCE])]
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    revision = git("rev-parse", "HEAD") + ("-dirty" if dirty else "")
    started = datetime.now(UTC).replace(microsecond=0)
    clock = time.monotonic()
    proc = subprocess.run(cmd, env=store.env, capture_output=True, text=True, timeout=1200, check=False)
    seconds = time.monotonic() - clock
    assert proc.returncode == 0, proc.stderr[-4000:]
    finished = datetime.now(UTC)
    reference, image_id = proc.stdout.split()[-2:]
    terminal_line(
        request.config,
        f"noe image: built {reference} ({image_id.removeprefix('sha256:')[:12]}) from {base} in {seconds:.0f} s",
    )
    container = store.buildah("from", "--pull=never", reference).stdout.strip()
    yield BuiltImage(
        store, reference, image_id, base, started, finished, revision, source or FALLBACK_SOURCE, container
    )
    store.buildah("rm", container, check=False)


# --- one version, everywhere ----------------------------------------------------------------------


def test_one_version_source_everywhere() -> None:
    """setup.cfg's version is what pip installed, what `noe --version` says, the chart's appVersion
    (the default image tag) and the tag of the rendered manifests and of build.sh."""
    version = setup_cfg_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", version) and version != "latest"
    assert distribution_version(DISTRIBUTION) == version
    cli = subprocess.run(
        [sys.executable, "-c", "from noe_web.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert cli.stdout.strip() == f"noe {version}"
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "noe" / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
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
    assert set(args) == {"VERSION", "REVISION", "CREATED", "SOURCE"}
    assert args["VERSION"] == setup_cfg_version()
    assert args["REVISION"].removesuffix("-dirty") == git("rev-parse", "HEAD")
    assert args["SOURCE"] == FALLBACK_SOURCE
    for argv, message in (
        (["--bogus"], "unknown argument '--bogus' (see --help)"),
        (["--base"], "--base needs a value"),
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
    assert built.started <= created <= built.finished + timedelta(seconds=1)
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
    inside = built.run(
        "noe", "mutate", "-f", "examples/pod.yaml", "--platforms", "examples/platforms.json", workdir="/tmp"
    ).stdout
    here = subprocess.run(
        [
            sys.executable,
            "-c",
            "from noe_web.cli import main; raise SystemExit(main())",
            "mutate",
            "-f",
            "examples/pod.yaml",
            "--platforms",
            "examples/platforms.json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
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


# --- two platforms ---------------------------------------------------------------------------------


def emulation_missing(arch: str) -> str | None:
    """Why *arch* cannot run here, or None: foreign RUN steps need a binfmt_misc handler (qemu-user-static)."""
    handler = Path("/proc/sys/fs/binfmt_misc") / f"qemu-{QEMU_NAMES.get(arch, arch)}"
    try:
        enabled = handler.read_text().splitlines()[0] == "enabled"
    except OSError:
        return f"no {arch} emulation on this machine ({handler} missing: needs qemu-user-static + binfmt_misc)"
    return None if enabled else f"no {arch} emulation on this machine ({handler} is disabled)"


def test_two_platform_index(built: BuiltImage, registry: RegistryServer) -> None:
    other = "arm64" if host_arch() == "amd64" else "amd64"
    reason = emulation_missing(other)
    if reason:
        pytest.skip(f"two-platform OCI index not built: {reason}")
    version = setup_cfg_version()
    base = local_base(built.store, other)
    proc = subprocess.run(
        [
            str(BUILD),
            "--base",
            base,
            "--pull",
            "never",
            "--platform",
            f"linux/{other}",
            "--name",
            f"localhost/noe-{other}",
            "--source",
            built.source,
        ],
        env=built.store.env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    other_ref = proc.stdout.split()[-2]
    index = f"localhost/noe-index:{version}"
    built.store.buildah("manifest", "create", index)
    built.store.buildah("manifest", "add", index, built.reference)
    built.store.buildah("manifest", "add", index, other_ref)
    target = f"{registry.host}/noe-multi:{version}"
    built.store.buildah("manifest", "push", "--all", "--tls-verify=false", index, f"docker://{target}")
    doc = json.loads(built.run("noe", "inspect", "--json", target, "--insecure-registries", "127.0.0.1:*").stdout)
    assert sorted((p["os"], p["architecture"]) for p in doc["platforms"]) == sorted(
        [("linux", host_arch()), ("linux", other)]
    )
