"""Install the system programs the tests run: ``python -m tests.support.system_deps``.

    docker-registry   (Debian ``docker-registry``: CNCF distribution, the registry under test)
    skopeo            (Debian ``skopeo``: an independent client to compare against)
    htpasswd          (Debian ``apache2-utils``)
    chromium          (Debian ``chromium``: opens ``noe report --html`` pages headless)
    buildah           (Debian ``buildah``: builds the Dockerfile without a daemon, tests/deploy/test_image.py)
    debootstrap       (Debian ``debootstrap``: the local Debian base that image is built on)
    qemu-aarch64-static, update-binfmts
                      (Debian ``qemu-user-static``, ``binfmt-support``: the arm64 image and base built and
                      run under emulation; deploy/image/emulation.sh mounts binfmt_misc and enables them)
    promtool          (Debian ``prometheus``: checks and unit-tests the chart's alerts and dashboard queries)
    zsh, fish         (Debian ``zsh``, ``fish``: syntax-check ``noe completion zsh|fish``)
    redis-server      (Debian ``redis-server``: the cache shared by replicas, ``--cache-url``)
    kubectl           (Debian ``kubernetes-client``: runs ``kubectl noe``, the plugin, and reads kubeconfigs to compare)

Does nothing, quickly, when all are on PATH. Otherwise runs ``apt-get update`` and
``apt-get install -y --no-install-recommends`` for the missing packages; exits 1 with a
one-line reason when that is impossible (not root, no apt-get) or fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["PROGRAMS", "main", "missing_packages"]

# program -> Debian package that provides it
PROGRAMS = {
    "docker-registry": "docker-registry",
    "skopeo": "skopeo",
    "htpasswd": "apache2-utils",
    "chromium": "chromium",
    "buildah": "buildah",
    "debootstrap": "debootstrap",
    "qemu-aarch64-static": "qemu-user-static",
    "update-binfmts": "binfmt-support",
    "promtool": "prometheus",
    "zsh": "zsh",
    "fish": "fish",
    "redis-server": "redis-server",
    "kubectl": "kubernetes-client",
}

_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/usr/sbin"])


def missing_packages(programs: dict[str, str] = PROGRAMS) -> list[str]:
    """Debian packages whose program is not found, in a stable order."""
    return sorted({pkg for prog, pkg in programs.items() if shutil.which(prog, path=_SEARCH_PATH) is None})


def _run(cmd: Sequence[str]) -> int:
    print("+", " ".join(cmd), flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(list(cmd), env=env, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    missing = missing_packages()
    if not missing:
        print(f"system_deps: {', '.join(sorted(PROGRAMS))} are installed; nothing to do")
        return 0
    print(f"system_deps: missing Debian packages: {' '.join(missing)}")
    apt = shutil.which("apt-get", path=_SEARCH_PATH)
    if apt is None:
        print(f"system_deps: cannot install {' '.join(missing)}: apt-get not found (not a Debian system?)")
        return 1
    if os.geteuid() != 0:
        print(
            f"system_deps: cannot install {' '.join(missing)}: not root; run "
            f"`sudo apt-get install -y --no-install-recommends {' '.join(missing)}`"
        )
        return 1
    if _run([apt, "update"]) != 0:
        print("system_deps: `apt-get update` failed")
        return 1
    if _run([apt, "install", "-y", "--no-install-recommends", *missing]) != 0:
        print(f"system_deps: `apt-get install {' '.join(missing)}` failed")
        return 1
    still = missing_packages()
    if still:
        print(f"system_deps: installed, but still not found on PATH: {' '.join(still)}")
        return 1
    print(f"system_deps: installed {' '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
