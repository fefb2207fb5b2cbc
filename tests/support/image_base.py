"""buildah on a private store, and a minimal Debian base image with Python made by debootstrap, cached.

    store = BuildahStore.create(tmp_path)     # vfs storage under tmp_path, never the machine's default store
    base = local_base(store)                  # "localhost/noe-test-base:bookworm-amd64"
    store.buildah("from", base)

The base (Debian minbase plus ``python3`` and ``python3-venv``, from Debian's mirror) is
made once and kept as an OCI archive under ``tests/.image-cache/``; later runs load
that archive in seconds instead of running debootstrap (about a minute and a half) again.
Delete the directory to rebuild it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CACHE_DIR", "DEBIAN_MIRROR", "SUITE", "BuildahStore", "ToolFailed", "host_arch", "local_base"]

CACHE_DIR = Path(__file__).resolve().parent.parent / ".image-cache"
SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv")

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
        return run_tool(["buildah", "--storage-driver", "vfs", *args], env=self.env, timeout=timeout, check=check)


def local_base(store: BuildahStore, arch: str | None = None) -> str:
    """The base image's name in *store*, loaded from the cached archive (made first when missing)."""
    arch = arch or host_arch()
    name = f"localhost/noe-test-base:{SUITE}-{arch}"
    archive = CACHE_DIR / f"debian-{SUITE}-python3-{arch}.oci.tar"
    if not archive.is_file():
        _make_base(store, name, arch, archive)
    image_id = store.buildah("pull", "--quiet", f"oci-archive:{archive}").stdout.split()[-1]
    store.buildah("tag", image_id, name)
    return name


def _make_base(store: BuildahStore, name: str, arch: str, archive: Path) -> None:
    """debootstrap straight into a buildah container's root, commit it, save it as an OCI archive."""
    container = store.buildah("from", "scratch").stdout.strip()
    try:
        rootfs = store.buildah("mount", container).stdout.strip()
        run_tool(
            [
                "debootstrap",
                "--variant=minbase",
                f"--arch={arch}",
                f"--include={','.join(BASE_PACKAGES)}",
                SUITE,
                rootfs,
                DEBIAN_MIRROR,
            ],
            timeout=1200,
        )
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
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    store.buildah("push", "--quiet", name, f"oci-archive:{partial}")
    partial.rename(archive)
