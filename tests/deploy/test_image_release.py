"""A release as a platform team installs it: one OCI index for linux/amd64 and linux/arm64, reproducible,
with its SBOM, and the chart as an OCI artifact in the same registry.

``deploy/release.sh`` runs once per test run from a fresh clone (tests/support/image_release.py): buildah
builds both platforms (arm64 under qemu through binfmt_misc, set up by the script) on a two-platform base
index pinned by digest, pushes the index to the real registry (Basic auth, logged in by the script) and the
chart with ``helm push``. The arm64 image then runs ``noe`` under emulation; ``noe inspect`` reads the
index back. A second fresh clone builds linux/amd64 again: the digests must match.

Select these with ``pytest -m image``; the first run makes the arm64 base (debootstrap under qemu, minutes).
"""

from __future__ import annotations

import base64
import configparser
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chart import find, one, render_chart
from tests.support.helm import run_helm
from tests.support.image_base import BuildahStore
from tests.support.image_release import (
    MUTATE_EXAMPLE,
    PLATFORMS,
    Released,
    Reproduced,
    canonical,
    checkout_mutate,
    image_container,
    image_files,
    schema_errors,
    skopeo_config,
    skopeo_raw,
    terminal_line,
    unpinned,
)
from tests.support.paths import EXAMPLES, ROOT

pytestmark = [pytest.mark.image, pytest.mark.timeout(3600)]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
USER = "10001"


def setup_cfg_version() -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]["version"]


def entries(index: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The index's manifests by "os/arch"."""
    return {f"{m['platform']['os']}/{m['platform']['architecture']}": m for m in index["manifests"]}


@pytest.fixture(scope="module")
def arm64(released: Released) -> Iterator[tuple[BuildahStore, str]]:
    """A working container of the released arm64 image, pulled by the index digest into its own store."""
    store = BuildahStore.create(released.store.root.parent / "arm64-run")
    ctr = image_container(store, f"{released.repository}@{released.digest}", "linux/arm64", creds=released.creds)
    yield store, ctr
    store.buildah("rm", ctr, check=False)


def run_in(store: BuildahStore, ctr: str, *argv: str, workdir: str = "/") -> subprocess.CompletedProcess[str]:
    return store.buildah(
        "run", "--isolation", "chroot", "--user", USER, "--workingdir", workdir, ctr, "--", *argv, timeout=600
    )


# --- 1. one OCI index, both platforms -------------------------------------------------------------


def test_the_release_is_one_oci_index_of_both_platforms(released: Released, request: pytest.FixtureRequest) -> None:
    raw = skopeo_raw(f"{released.repository}@{released.digest}", creds=released.creds)
    index = json.loads(raw)
    assert index["mediaType"] == OCI_INDEX, "an OCI index, not a Docker manifest list"
    assert released.image == f"{released.registry.host}/noe:{setup_cfg_version()}"
    by_platform = entries(index)
    assert sorted(by_platform) == sorted(PLATFORMS)
    sizes = []
    for platform, entry in by_platform.items():
        assert entry["mediaType"] == OCI_MANIFEST
        manifest = json.loads(skopeo_raw(f"{released.repository}@{entry['digest']}", creds=released.creds))
        config = skopeo_config(f"{released.repository}@{entry['digest']}", creds=released.creds)
        assert f"{config['os']}/{config['architecture']}" == platform
        assert config["config"]["Labels"]["org.opencontainers.image.version"] == setup_cfg_version()
        pulled = sum(layer["size"] for layer in manifest["layers"]) + manifest["config"]["size"]
        sizes.append(f"{platform} {pulled / 1e6:.1f} MB ({entry['digest'][:19]}…)")
    # The tag names the same index.
    assert json.loads(skopeo_raw(released.image, creds=released.creds)) == index
    terminal_line(request.config, f"noe release sizes (compressed, to pull): {'; '.join(sizes)}")


def test_the_arm64_image_runs_noe_under_emulation(released: Released, arm64: tuple[BuildahStore, str]) -> None:
    store, ctr = arm64
    assert run_in(store, ctr, "uname", "-m").stdout.strip() == "aarch64"
    assert run_in(store, ctr, "noe", "--version").stdout.strip() == f"noe {setup_cfg_version()}"
    for name in ("pod.yaml", "platforms.json"):
        store.buildah("copy", "--chown", f"{USER}:{USER}", ctr, str(EXAMPLES / name), f"/tmp/examples/{name}")
    inside = run_in(store, ctr, "noe", *MUTATE_EXAMPLE, workdir="/tmp").stdout
    here = checkout_mutate()
    assert inside == here and "kubernetes.io/arch" in inside


def test_noe_inspect_in_the_arm64_image_reads_the_index_back(
    released: Released, arm64: tuple[BuildahStore, str], tmp_path: Path
) -> None:
    store, ctr = arm64
    user, password = released.creds
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"auths": {released.registry.host: {"auth": auth}}}))
    store.buildah("copy", "--chown", f"{USER}:{USER}", ctr, str(config), "/tmp/docker/config.json")
    out = run_in(
        store,
        ctr,
        "noe",
        "inspect",
        "--json",
        "--insecure-registries",
        "127.0.0.1:*",
        "--docker-config",
        "/tmp/docker/config.json",
        released.image,
    ).stdout
    doc = json.loads(out)
    assert doc["digest"] == released.digest
    assert sorted(f"{p['os']}/{p['architecture']}" for p in doc["platforms"]) == sorted(PLATFORMS)


# --- 2. reproducible ----------------------------------------------------------------------------------


def test_the_same_commit_builds_the_same_digests(
    released: Released, reproduced: Reproduced, request: pytest.FixtureRequest
) -> None:
    """Two fresh clones, two fresh stores, no SOURCE_DATE_EPOCH: the linux/amd64 image is the same, byte for byte.

    Only linux/amd64 is built twice (an arm64 build under qemu takes minutes): the index is a pure function of
    its entries — media type, digest, size and platform of each image, nothing else (no date, no annotation) —
    so equal images make equal indexes, which the second build's one-platform index shows; and what could
    differ between builds (file times, .pyc headers, dates, the builder's identity) is the same code for
    both platforms.
    """
    first = json.loads(skopeo_raw(f"{released.repository}@{released.digest}", creds=released.creds))
    again_raw = skopeo_raw(f"{reproduced.repository}@{reproduced.digest}")
    again = json.loads(again_raw)
    amd64, amd64_again = entries(first)["linux/amd64"], entries(again)["linux/amd64"]
    if amd64 != amd64_again:
        one_ = json.loads(skopeo_raw(f"{released.repository}@{amd64['digest']}", creds=released.creds))
        two = json.loads(skopeo_raw(f"{reproduced.repository}@{amd64_again['digest']}"))
        differ = [(a["digest"], b["digest"]) for a, b in zip(one_["layers"], two["layers"], strict=False) if a != b] + (
            [("config", one_["config"]["digest"], two["config"]["digest"])] if one_["config"] != two["config"] else []
        )
        pytest.fail(f"linux/amd64 built twice differs: {differ}")
    for index in (first, again):
        assert {key for m in index["manifests"] for key in m} == {"mediaType", "digest", "size", "platform"}
        assert set(index) == {"schemaVersion", "mediaType", "manifests"}
    # The one-platform index is exactly the released index's amd64 entry, serialized the same way.
    expected = json.dumps({**first, "manifests": [amd64]}, separators=(",", ":")).encode()
    assert again_raw == expected
    terminal_line(
        request.config,
        f"noe reproducible: linux/amd64 {amd64['digest']} twice (release index {released.digest}, "
        f"one-platform index {reproduced.digest})",
    )


def test_dates_come_from_the_commit(released: Released, base_index: str) -> None:
    """The created label and date, and every history entry the build added: the commit's time, not the clock's."""
    log = ["git", "-C", str(released.clone), "log", "-1", "--format=%ct"]
    commit = datetime.fromtimestamp(int(subprocess.run(log, capture_output=True, text=True, check=True).stdout), UTC)
    for platform, entry in entries(released.index()).items():
        arch = platform.split("/")[1]
        config = skopeo_config(f"{released.repository}@{entry['digest']}", creds=released.creds)
        assert config["config"]["Labels"]["org.opencontainers.image.created"] == commit.strftime("%Y-%m-%dT%H:%M:%SZ")
        base = skopeo_config(base_index, arch=arch)["history"]
        assert config["history"][: len(base)] == base
        added = config["history"][len(base) :]
        assert added and {datetime.fromisoformat(h["created"]) for h in added} == {commit}, platform
        assert datetime.fromisoformat(config["created"]) == commit


# --- 3. the SBOM ----------------------------------------------------------------------------------------


def test_each_platforms_sbom_lists_every_installed_distribution(
    released: Released, arm64: tuple[BuildahStore, str]
) -> None:
    version = setup_cfg_version()
    store, ctr = arm64
    found, sbom = image_files(store, ctr)
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"].startswith("1.")
    assert schema_errors(sbom) is None, schema_errors(sbom)
    listed = {c["name"]: c["version"] for c in sbom["components"]}
    assert listed == found, "the SBOM lists exactly the image's distributions, at their versions"
    assert listed["noe-webhook"] == version
    # PyPI's distributions by package URL; noe itself, built from the checkout, is no PyPI package.
    purls = {c["name"]: c.get("purl") for c in sbom["components"]}
    assert purls.pop("noe-webhook") is None
    assert purls == {name: f"pkg:pypi/{canonical(name)}@{v}" for name, v in listed.items() if name != "noe-webhook"}
    # Beside the build output too, the same document, one per platform.
    beside = released.output / f"noe-{version}-linux-arm64.sbom.cdx.json"
    assert json.loads(beside.read_text()) == sbom
    assert (released.output / f"noe-{version}-linux-amd64.sbom.cdx.json").is_file()
    # Every distribution is pinned by deploy/image/constraints.txt, at the version installed.
    assert unpinned(listed) == {}, "not pinned at the installed version in deploy/image/constraints.txt"


# --- 4. the chart, from the registry --------------------------------------------------------------------


def test_the_chart_renders_from_the_registry_with_the_released_image(released: Released, tmp_path: Path) -> None:
    version = setup_cfg_version()
    assert released.chart == f"oci://{released.registry.host}/charts/noe" and released.version == version
    home = tmp_path / "helm"
    user, password = released.creds
    run_helm(["registry", "login", "--plain-http", released.registry.host, "-u", user, "-p", password], home=home)
    shown = yaml.safe_load(
        run_helm(["show", "chart", released.chart, "--version", version, "--plain-http"], home=home).stdout
    )
    assert (shown["name"], shown["version"], shown["appVersion"]) == ("noe", version, version)
    docs = render_chart(None, "--version", version, "--plain-http", chart=released.chart, home=home)
    images = {c["image"] for d in find(docs, "Deployment") for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {f"{released.image}@{released.digest}"}  # the tag for people, the digest for the kubelet
    assert one(docs, "MutatingWebhookConfiguration")["metadata"]["labels"]["app.kubernetes.io/version"] == version
    # The package beside the SBOMs is what was pushed.
    package = released.output / f"noe-{version}.tgz"
    pulled = tmp_path / "pulled"
    pulled.mkdir()
    run_helm(["pull", released.chart, "--version", version, "--plain-http", "-d", str(pulled)], home=home)
    assert (pulled / package.name).read_bytes() == package.read_bytes()
    # Only the image is pinned: every other default is the chart's own.
    host, repository = released.image.rsplit(":", 1)[0].split("/", 1)
    pinned = ["--set", f"image.registry={host}", "--set", f"image.repository={repository}"]
    assert docs == render_chart(None, *pinned, "--set", f"image.digest={released.digest}")
