#!/usr/bin/env python3
"""Build ``kubectl noe`` as one file that runs with any Python 3.11 or newer, its krew archive and manifest.

    python deploy/plugin/build_zipapp.py --output DIR [--release-url URL] [--wheels DIR]

DIR gets:

* ``kubectl-noe.pyz`` — a zipapp: ``noe_core``, ``noe_web`` and the pure-Python
  packages the CLI imports (requests, urllib3, idna, certifi, charset_normalizer,
  jsonpatch, jsonpointer, PyYAML's ``yaml``, tqdm), each with its licence and
  metadata; ``python3 kubectl-noe.pyz ARGS`` is ``kubectl noe ARGS``;
* ``kubectl-noe`` — the same bytes, executable, ``#!/usr/bin/env python3``: put it
  on PATH and kubectl runs it as ``kubectl noe``;
* ``kubectl-noe-VERSION.tar.gz`` — ``kubectl-noe`` and ``LICENSE``, what krew downloads;
* ``krew/noe.yaml`` — the krew manifest (deploy/plugin/krew_manifest.py): that
  archive at ``--release-url`` (default: the GitHub release of this version) and its sha256.

Why one file: a kubectl plugin is installed by copying an executable onto PATH
(or by krew); no pip, no virtualenv. Only pure-Python code can run on every
OS and CPU from one file, so nothing compiled goes in — the build refuses a
``.so``/``.pyd``. orjson and the web extra stay out: ``noe_web.json_codec``
falls back to the standard library, and ``serve``/``controller``/``certs`` say
which extra they need. PyYAML ships no pure wheel: its ``yaml`` package is
taken without the ``_yaml`` extension, and then runs its pure-Python parser.
``--cache-url`` (Redis) and ``report --html`` (Jinja2, pygal) need extras the
file does not carry, and say so.

Dependencies come from wheels pip downloads (``--wheels DIR`` keeps them
between builds), each pinned exactly by deploy/image/constraints.txt (the same
versions the image has) or deploy/plugin/constraints.txt (what the image does
not install); an unpinned one stops the build. noe itself is the files git
tracks under noe_core/ and noe_web/, with the version of setup.cfg.

Reproducible: entries in name order, every time SOURCE_DATE_EPOCH (default:
the commit's time), fixed modes and owners, no byte-code — two builds of one
commit with the same Python and zlib give the same bytes, so the manifest's
sha256 can be checked by anyone who rebuilds.
"""

from __future__ import annotations

import argparse
import configparser
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import krew_manifest

ROOT = Path(__file__).resolve().parent.parent.parent
CONSTRAINTS = (ROOT / "deploy" / "image" / "constraints.txt", ROOT / "deploy" / "plugin" / "constraints.txt")
NOE_PACKAGES = ("noe_core", "noe_web")
PYTHON = "3.11"
"""The oldest Python the file runs on (setup.cfg's python_requires); wheels are chosen for it."""
SHEBANG = b"#!/usr/bin/env python3\n"
ZIP_EPOCH_MIN = 315532800  # 1980-01-01: nothing earlier fits a zip entry's date
COMPILED = (".so", ".pyd", ".dylib", ".dll")


@dataclass(frozen=True)
class Dependency:
    """A distribution the file carries: the top-level modules taken from its wheel."""

    name: str
    modules: tuple[str, ...]
    pure_wheel: bool = True
    """False for PyYAML, which has only compiled wheels: one is taken and its compiled files left out."""


DEPENDENCIES = (
    Dependency("requests", ("requests",)),
    Dependency("urllib3", ("urllib3",)),
    Dependency("idna", ("idna",)),
    Dependency("certifi", ("certifi",)),
    Dependency("charset-normalizer", ("charset_normalizer",)),
    Dependency("jsonpatch", ("jsonpatch.py",)),
    Dependency("jsonpointer", ("jsonpointer.py",)),
    Dependency("PyYAML", ("yaml",), pure_wheel=False),
    Dependency("tqdm", ("tqdm",)),
)

MAIN = '''\
"""kubectl-noe as one file: ``python3 kubectl-noe.pyz ARGS`` is ``kubectl noe ARGS``."""
import sys

if sys.version_info < (3, 11):
    sys.exit("kubectl-noe needs Python 3.11 or newer; %s is %s" % (sys.executable, sys.version.split()[0]))

from noe_web.commands.kubectl import main

sys.exit(main())
'''


class BuildError(Exception):
    """What stops the build, in one line."""


# ---------------------------------------------------------------------------------------- inputs


def project_version(root: Path = ROOT) -> str:
    parser = configparser.ConfigParser()
    parser.read(root / "setup.cfg")
    return parser["metadata"]["version"]


def project_url(root: Path = ROOT) -> str:
    parser = configparser.ConfigParser()
    parser.read(root / "setup.cfg")
    return parser["metadata"]["url"].rstrip("/")


def source_date_epoch(environ: Mapping[str, str], root: Path = ROOT) -> int:
    """SOURCE_DATE_EPOCH, else the commit's time (as deploy/image/build.sh), never before 1980."""
    text = environ.get("SOURCE_DATE_EPOCH") or _git(root, "log", "-1", "--format=%ct", "HEAD").strip()
    if not text.isdigit():
        raise BuildError(f"SOURCE_DATE_EPOCH must be seconds since 1970, not {text!r}")
    return max(int(text), ZIP_EPOCH_MIN)


def _git(root: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BuildError(f"git is needed to list the sources ({exc.strerror})") from None
    if proc.returncode != 0:
        raise BuildError(f"git {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
    return proc.stdout


def pins(files: Iterable[Path]) -> dict[str, str]:
    """``name==version`` lines of pip constraint files, by normalised name."""
    found: dict[str, str] = {}
    for path in files:
        for line in path.read_text().splitlines():
            requirement = line.split("#", 1)[0].strip()
            if match := re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", requirement):
                found[_normal(match[1])] = match[2]
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def noe_sources(root: Path = ROOT) -> list[str]:
    """The files git tracks (and new ones it does not ignore) under noe_core/ and noe_web/."""
    listed = _git(root, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *NOE_PACKAGES)
    return sorted(name for name in listed.split("\0") if name and (root / name).is_file())


def download_wheels(target: Path, constraints: Sequence[Path] = CONSTRAINTS) -> dict[str, Path]:
    """Each dependency's wheel, pinned, from pip (its cache, its indexes), by normalised name."""
    pinned = pins(constraints)
    missing = [dep.name for dep in DEPENDENCIES if _normal(dep.name) not in pinned]
    if missing:
        raise BuildError(f"no exact version for {', '.join(missing)} in {' or '.join(map(str, constraints))}")
    target.mkdir(parents=True, exist_ok=True)
    common = ["--only-binary=:all:", "--no-deps", "--python-version", PYTHON, "-d", str(target)]
    pure = [f"{dep.name}=={pinned[_normal(dep.name)]}" for dep in DEPENDENCIES if dep.pure_wheel]
    compiled = [f"{dep.name}=={pinned[_normal(dep.name)]}" for dep in DEPENDENCIES if not dep.pure_wheel]
    _pip([*common, "--platform", "any", "--implementation", "py", *pure])
    # Only the pure-Python part of these is kept, the same in every platform's wheel: take Linux x86_64's.
    abi = "cp" + PYTHON.replace(".", "")
    _pip([*common, "--platform", "manylinux2014_x86_64", "--implementation", "cp", "--abi", abi, *compiled])
    wheels: dict[str, Path] = {}
    for dep in DEPENDENCIES:
        version = pinned[_normal(dep.name)]
        prefix = f"{_normal(dep.name).replace('-', '_')}-{version}-"
        found = sorted(p for p in target.glob("*.whl") if p.name.lower().startswith(prefix.lower()))
        if not found:
            raise BuildError(f"pip downloaded no wheel of {dep.name}=={version} into {target}")
        wheels[_normal(dep.name)] = found[0]
    return wheels


def _pip(args: Sequence[str]) -> None:
    command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", *args]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BuildError(f"pip download {' '.join(args[-3:])} failed: {last}")


# ---------------------------------------------------------------------------------------- the archive


def _is_licence(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].upper()
    return "/licenses/" in name or base.startswith(("LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS"))


def wheel_members(wheel: Path, dep: Dependency) -> dict[str, bytes]:
    """The dependency's modules and its METADATA and licence files; compiled files refused, or (PyYAML) left out."""
    out: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith("/"):
                continue
            top = name.split("/", 1)[0]
            if top.endswith(".dist-info"):
                if name == f"{top}/METADATA" or _is_licence(name):
                    out[name] = zf.read(name)
                continue
            if top not in dep.modules:
                continue  # command-line scripts, type stubs, other packages
            if name.endswith(COMPILED):
                if dep.pure_wheel:
                    raise BuildError(f"{wheel.name} holds compiled {name}: not a pure-Python wheel")
                continue  # PyYAML's _yaml extension: yaml falls back to pure Python without it
            out[name] = zf.read(name)
    return out


def noe_members(root: Path, version: str) -> dict[str, bytes]:
    """noe's packages, its metadata (for ``--version``) and licence, and ``__main__.py``."""
    out = {name: (root / name).read_bytes() for name in noe_sources(root)}
    info = f"noe_webhook-{version}.dist-info"
    out[f"{info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        "Name: noe-webhook\n"
        f"Version: {version}\n"
        "Summary: kubectl noe: the noe command as one file\n"
        f"Home-page: {project_url(root)}\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.11\n"
    ).encode()
    out[f"{info}/LICENSE"] = (root / "LICENSE").read_bytes()
    out["__main__.py"] = MAIN.encode()
    return out


def _zip_entry(name: str, epoch: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=time.gmtime(epoch)[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix, whatever builds it
    info.external_attr = 0o100644 << 16
    return info


def write_zipapp(path: Path, members: Mapping[str, bytes], epoch: int) -> None:
    """The shebang, then a zip of ``members`` in name order with fixed times and modes."""
    compiled = sorted(name for name in members if name.endswith(COMPILED) or name.endswith((".pyc", ".pyo")))
    if compiled:
        raise BuildError(f"refusing compiled files in the zipapp: {', '.join(compiled)}")
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w") as zf:
        for name in sorted(members):
            zf.writestr(_zip_entry(name, epoch), members[name], compresslevel=9)
    path.write_bytes(buffer.getvalue())


def write_krew_archive(path: Path, files: Mapping[str, tuple[bytes, int]], epoch: int) -> None:
    """A .tar.gz of ``files`` (name → (bytes, mode)) with fixed times, owners and gzip header."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            data, mode = files[name]
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode, entry.mtime = len(data), mode, epoch
            entry.uid = entry.gid = 0
            entry.uname = entry.gname = ""
            tar.addfile(entry, io.BytesIO(data))
    with path.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=epoch, compresslevel=9) as gz:
        gz.write(raw.getvalue())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------- the build


@dataclass(frozen=True)
class Built:
    pyz: Path
    executable: Path
    archive: Path
    manifest: Path
    versions: dict[str, str]


def build(output: Path, *, release_url: str | None, wheels_dir: Path | None, environ: Mapping[str, str]) -> Built:
    version = project_version()
    epoch = source_date_epoch(environ)
    with tempfile.TemporaryDirectory(prefix="noe-plugin-") as scratch:
        wheels = download_wheels(wheels_dir or Path(scratch))
        members = noe_members(ROOT, version)
        for dep in DEPENDENCIES:
            members.update(wheel_members(wheels[_normal(dep.name)], dep))
    output.mkdir(parents=True, exist_ok=True)
    pyz = output / "kubectl-noe.pyz"
    write_zipapp(pyz, members, epoch)
    executable = output / "kubectl-noe"
    shutil.copyfile(pyz, executable)
    executable.chmod(0o755)
    archive = output / f"kubectl-noe-{version}.tar.gz"
    licence = (ROOT / "LICENSE").read_bytes()
    write_krew_archive(archive, {"kubectl-noe": (pyz.read_bytes(), 0o755), "LICENSE": (licence, 0o644)}, epoch)
    base = (release_url or f"{project_url()}/releases/download/v{version}").rstrip("/")
    manifest = output / "krew" / f"{krew_manifest.NAME}.yaml"
    manifest.parent.mkdir(exist_ok=True)
    manifest.write_text(
        krew_manifest.manifest(
            version=version,
            homepage=project_url(),
            uri=f"{base}/{archive.name}",
            sha256=sha256(archive),
            files=("kubectl-noe", "LICENSE"),
        )
    )
    pinned = pins(CONSTRAINTS)
    versions = {dep.name: pinned[_normal(dep.name)] for dep in DEPENDENCIES}
    return Built(pyz, executable, archive, manifest, versions)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="build_zipapp.py",
        description="Build kubectl-noe.pyz, the kubectl-noe executable, its krew archive and manifest.",
    )
    parser.add_argument("--output", required=True, type=Path, metavar="DIR", help="where the files are written")
    parser.add_argument(
        "--release-url",
        metavar="URL",
        help="where the release's files are downloaded from (default: the GitHub release of this version)",
    )
    parser.add_argument("--wheels", type=Path, metavar="DIR", help="keep the downloaded wheels here (default: none)")
    args = parser.parse_args(argv)
    try:
        built = build(args.output, release_url=args.release_url, wheels_dir=args.wheels, environ=os.environ)
    except (BuildError, OSError) as exc:
        print(f"build_zipapp.py: {exc}", file=sys.stderr)
        return 2
    print(f"pyz {built.pyz} sha256:{sha256(built.pyz)} {built.pyz.stat().st_size} bytes")
    print(f"plugin {built.executable}")
    print(f"archive {built.archive} sha256:{sha256(built.archive)}")
    print(f"krew {built.manifest}")
    print("packed " + " ".join(f"{name}=={version}" for name, version in built.versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
