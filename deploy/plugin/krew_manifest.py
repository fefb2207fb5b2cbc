"""The krew plugin manifest of ``kubectl noe``: one archive, the same for every platform krew installs on.

krew (the kubectl plugin manager) reads a ``Plugin`` manifest, picks the
``platforms`` entry whose selector matches the machine, downloads ``uri``,
checks ``sha256``, unpacks it, copies ``files`` and links ``bin`` onto PATH.
kubectl-noe is one Python file, so every platform gets the same archive; what
the machine must bring is ``python3`` (3.11 or newer), said in ``caveats``.

The text is written here, not dumped by a YAML library, so the build needs
none and the file reads as a person would write it; every value is a JSON
string (valid YAML). The fields follow krew's own checks (its
``pkg/index/validation``): apiVersion, kind, a name matching ``^[\\w-]+$``, a
``v``-prefixed semantic version, a short description, and per platform a
selector on ``os``/``arch`` only, ``uri``, a lower-case hex ``sha256``,
``files`` and ``bin``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
NAME = "noe"
BIN = "kubectl-noe"
PLATFORMS: tuple[tuple[str, str], ...] = (
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
)
SHORT_DESCRIPTION = "Which CPU architectures your pods' images can run on"
DESCRIPTION = """\
noe reads each image's platforms from its registry, as the noe admission
webhook does, and tells you where your workloads can run.

  kubectl noe report              # every workload: runnable on amd64 and arm64?
  kubectl noe report -n shop      # one namespace; -o json|yaml|csv
  kubectl noe inspect IMAGE       # an image's digest and platforms
  kubectl noe mutate -f pod.yaml  # the placement the webhook would give

--kubeconfig, --context, -n and $KUBECONFIG work as they do for kubectl.
"""
CAVEATS = """\
kubectl-noe is a Python program: it needs python3 (3.11 or newer) on PATH.
It carries its pure-Python dependencies; nothing else is installed.
"""


def _quoted(text: str) -> str:
    return json.dumps(text)


def _block(text: str, indent: str) -> str:
    """A YAML literal block (``|``) holding ``text`` line for line."""
    return "|\n" + "".join(f"{indent}{line}\n" if line else "\n" for line in text.splitlines())


def manifest(*, version: str, homepage: str, uri: str, sha256: str, files: Sequence[str]) -> str:
    """The manifest of release ``version`` (``0.1.0``; krew's is ``v0.1.0``) whose archive is at ``uri``."""
    platforms = []
    for os_name, arch in PLATFORMS:
        copied = "".join(f'        - from: {_quoted(name)}\n          to: "."\n' for name in files)
        platforms.append(
            "    - selector:\n"
            "        matchLabels:\n"
            f"          os: {_quoted(os_name)}\n"
            f"          arch: {_quoted(arch)}\n"
            f"      uri: {_quoted(uri)}\n"
            f"      sha256: {_quoted(sha256)}\n"
            "      files:\n"
            f"{copied}"
            f"      bin: {_quoted(BIN)}\n"
        )
    return (
        "# The krew plugin manifest of kubectl noe, written by deploy/plugin/build_zipapp.py.\n"
        "# Install: kubectl krew install --manifest noe.yaml (--archive FILE to use a local archive).\n"
        f"apiVersion: {_quoted(API_VERSION)}\n"
        "kind: Plugin\n"
        "metadata:\n"
        f"  name: {_quoted(NAME)}\n"
        "spec:\n"
        f"  version: {_quoted('v' + version)}\n"
        f"  homepage: {_quoted(homepage)}\n"
        f"  shortDescription: {_quoted(SHORT_DESCRIPTION)}\n"
        f"  description: {_block(DESCRIPTION, '    ')}"
        f"  caveats: {_block(CAVEATS, '    ')}"
        "  platforms:\n" + "".join(platforms)
    )
