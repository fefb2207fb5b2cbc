"""buildah on a private store, and a minimal Debian base image with Python made by debootstrap, cached.

    store = BuildahStore.create(tmp_path)     # vfs storage under tmp_path, never the machine's default store
    base = local_base(store)                  # "localhost/noe-test-base:bookworm-amd64"
    base = local_base(store, "arm64")         # made under qemu emulation (deploy/image/emulation.sh)
    python -m tests.support.image_base amd64 arm64   # make the missing archives (the image suites start this)
    store.buildah("from", base)
    ref = base_index(store, registry, ["amd64", "arm64"])   # "127.0.0.1:PORT/noe-test-base@sha256:..."

The base (Debian minbase plus ``python3`` and ``python3-venv``, from Debian's mirror) is
made once per architecture and kept as an OCI archive in the user's cache directory
(``$XDG_CACHE_HOME/noe-webhook-tests/image-base/``), named after a hash of everything
that makes it (suite, mirror, packages, architecture, this recipe's version): a changed
recipe makes a new archive, never reuses a stale one. Later runs load the archive in
seconds instead of running debootstrap again (amd64 about 1.5 min; a foreign
architecture's second stage under qemu about 4 min). Delete the directory to rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

__all__ = [
    "DEBIAN_MIRROR",
    "SUITE",
    "BuildahStore",
    "ToolFailed",
    "base_archive",
    "base_index",
    "cache_dir",
    "ensure_emulation",
    "host_arch",
    "local_base",
    "run_tool",
]

SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv")
# Bump when _make_base changes what it produces: the cache key includes it.
RECIPE = 2
EMULATION = ROOT / "deploy" / "image" / "emulation.sh"

# Python's machine name -> the OCI / Debian architecture name.
_ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class ToolFailed(RuntimeError):
    """buildah, skopeo or debootstrap exited non-zero; the message carries the command and its stderr."""


def host_arch() -> str:
    machine = platform.machine()
    return _ARCHES.get(machine, machine)


def run_tool(
    cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure raise ToolFailed with its stderr's tail, which says what went wrong."""
    proc = subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ToolFailed(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{tail}")
    return proc


def ensure_emulation(*arches: str) -> None:
    """Foreign architectures run here (qemu through binfmt_misc), set up by the script build.sh uses."""
    run_tool([str(EMULATION), *arches], timeout=60)


@dataclass(frozen=True)
class BuildahStore:
    """A containers-storage (vfs driver) of its own, named by CONTAINERS_STORAGE_CONF for buildah and skopeo."""

    root: Path

    @classmethod
    def create(cls, root: Path) -> BuildahStore:
        root.mkdir(parents=True, exist_ok=True)
        (root / "storage.conf").write_text(
            f'[storage]\ndriver = "vfs"\ngraphroot = "{root / "graph"}"\nrunroot = "{root / "run"}"\n'
        )
        return cls(root)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf")}

    def buildah(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_tool(["buildah", *args], env=self.env, timeout=timeout, check=check)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "noe-webhook-tests" / "image-base"


def base_archive(arch: str) -> Path:
    """Where the base of *arch* is cached: the name carries a hash of every input that makes it."""
    inputs = {"suite": SUITE, "mirror": DEBIAN_MIRROR, "packages": BASE_PACKAGES, "arch": arch, "recipe": RECIPE}
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / f"debian-{SUITE}-python3-{arch}-{key}.oci.tar"


def local_base(store: BuildahStore, arch: str | None = None) -> str:
    """The base image's name in *store*, loaded from the cached archive (made first when missing)."""
    arch = arch or host_arch()
    name = f"localhost/noe-test-base:{SUITE}-{arch}"
    archive = base_archive(arch)
    if not archive.is_file():
        _make_base(store, name, arch, archive)
    image_id = store.buildah("pull", "--quiet", f"oci-archive:{archive}").stdout.split()[-1]
    store.buildah("tag", image_id, name)
    return name


def base_index(store: BuildahStore, registry: RegistryServer, arches: Sequence[str]) -> str:
    """The bases of *arches* pushed to *registry* as one OCI index: its reference pinned by digest."""
    index = f"localhost/noe-test-base-index:{SUITE}"
    store.buildah("manifest", "create", index)
    for arch in arches:
        store.buildah("manifest", "add", index, f"containers-storage:{local_base(store, arch)}")
    digest_file = store.root / "base-index.digest"
    repo = f"{registry.host}/noe-test-base"
    store.buildah(
        "manifest",
        "push",
        "--all",
        "--quiet",
        "--format",
        "oci",
        "--tls-verify=false",
        "--digestfile",
        str(digest_file),
        index,
        f"docker://{repo}:{SUITE}",
    )
    return f"{repo}@{digest_file.read_text().strip()}"


def _make_base(store: BuildahStore, name: str, arch: str, archive: Path) -> None:
    """debootstrap straight into a buildah container's root, commit it, save it as an OCI archive.

    A foreign architecture is bootstrapped in two stages: the packages are unpacked here
    (``--foreign``), then their scripts run inside the new root under qemu.
    """
    foreign = arch != host_arch()
    if foreign:
        ensure_emulation(arch)
    container = store.buildah("from", "scratch").stdout.strip()
    try:
        rootfs = store.buildah("mount", container).stdout.strip()
        run_tool(
            [
                "debootstrap",
                "--variant=minbase",
                f"--arch={arch}",
                f"--include={','.join(BASE_PACKAGES)}",
                *(["--foreign"] if foreign else []),
                SUITE,
                rootfs,
                DEBIAN_MIRROR,
            ],
            timeout=1200,
        )
        if foreign:
            run_tool(["chroot", rootfs, "/debootstrap/debootstrap", "--second-stage"], timeout=2400)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            run_tool(["find", os.path.join(rootfs, leftover), "-type", "f", "-delete"])
        store.buildah(
            "config",
            "--os",
            "linux",
            "--arch",
            arch,
            "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--cmd",
            "/bin/sh",
            container,
        )
        store.buildah("commit", "--quiet", container, name)
    finally:
        store.buildah("rm", container, check=False)
    archive.parent.mkdir(parents=True, exist_ok=True)
    # A unique partial name, renamed into place: parallel runs never read a half-written archive.
    fd, partial = tempfile.mkstemp(dir=archive.parent, prefix=f".{archive.name}.", suffix=".partial")
    os.close(fd)
    try:
        os.unlink(partial)
        store.buildah("push", "--quiet", name, f"oci-archive:{partial}")
        os.replace(partial, archive)
    finally:
        Path(partial).unlink(missing_ok=True)


def main(arches: Sequence[str]) -> int:
    """Make the cached archive of each architecture that lacks one, each in a scratch store."""
    for arch in arches:
        if base_archive(arch).is_file():
            continue
        with tempfile.TemporaryDirectory(prefix=f"noe-base-{arch}-") as scratch:
            local_base(BuildahStore.create(Path(scratch)), arch)
        print(f"image_base: made {base_archive(arch)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
