"""A node's platform as its labels state it, and whether an image's platform entry is usable there.

The kubelet pulls, for every image of a pod, the entry of the image that matches
its node; a pod runs only where every image has one. A node says what it is
through well-known labels:

* ``kubernetes.io/os`` and ``kubernetes.io/arch`` (the kubelet sets them);
* ``node.kubernetes.io/windows-build`` on Windows, ``major.minor.build``
  (``10.0.20348``): a Windows container must match its host's build;
* ``feature.node.kubernetes.io/cpu-cpuid.X86_64_V2|V3|V4=true`` where
  node-feature-discovery runs: the x86-64 micro-architecture levels the CPU
  supports, cumulative. A node without them counts as ``v1``.

:func:`usable_on` is the placement contract's definition of "usable on a node"
(``docs/placement.md``, rules 14-16), as one pure function: the controller
(:mod:`noe_core.placement.compatibility`), ``kubectl debug`` checks
(:mod:`noe_core.placement.ephemeral`) and ``noe_core.testing`` evaluate nodes with it, and
the property tests check that the terms the policy writes
(:mod:`noe_core.placement.needs`) select exactly the nodes it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from noe_core.errors import InvalidPlatform
from noe_core.image.platform import X86_64_MAX_LEVEL, Platform, normalize_architecture, normalize_os, x86_64_level

ARCH_LABEL = "kubernetes.io/arch"
BETA_ARCH_LABEL = "beta.kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
BETA_OS_LABEL = "beta.kubernetes.io/os"
WINDOWS_BUILD_LABEL = "node.kubernetes.io/windows-build"
WINDOWS = "windows"
AMD64 = "amd64"
LEVEL_LABEL_PREFIX = "feature.node.kubernetes.io/cpu-cpuid.X86_64_V"
LEVEL_LABEL_VALUE = "true"
REQUIRABLE_LEVELS = range(2, X86_64_MAX_LEVEL + 1)
"""Levels a term may require: every amd64 node is at least ``v1``, and ``v1`` has no label."""


def level_label(level: int) -> str:
    """The node-feature-discovery label of x86-64 level ``level`` (2 to 4)."""
    if level not in REQUIRABLE_LEVELS:
        raise ValueError(f"x86-64 level {level} has no node label (only 2 to {X86_64_MAX_LEVEL})")
    return f"{LEVEL_LABEL_PREFIX}{level}"


@dataclass(frozen=True)
class NodePlatform:
    """What a node is, for image selection: OS, architecture, Windows build (``""`` elsewhere), x86-64 level.

    ``level`` is 1 on a node without node-feature-discovery's labels and on every
    architecture but amd64.
    """

    os: str
    architecture: str
    windows_build: str = ""
    level: int = 1

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> NodePlatform:
        """Read a Node's labels (the beta OS/arch labels when the GA ones are missing)."""
        os_name = normalize_os(labels.get(OS_LABEL) or labels.get(BETA_OS_LABEL) or "")
        arch, _ = normalize_architecture(labels.get(ARCH_LABEL) or labels.get(BETA_ARCH_LABEL) or "")
        build = labels.get(WINDOWS_BUILD_LABEL, "") if os_name == WINDOWS else ""
        level = 1
        if arch == AMD64:
            # The labels are cumulative; the highest one present is the node's level.
            level = max((n for n in REQUIRABLE_LEVELS if labels.get(level_label(n)) == LEVEL_LABEL_VALUE), default=1)
        return cls(os_name, arch, build, level)

    def labels(self) -> dict[str, str]:
        """The labels a node of this platform carries (the kubelet's and node-feature-discovery's)."""
        out = {
            OS_LABEL: self.os,
            BETA_OS_LABEL: self.os,
            ARCH_LABEL: self.architecture,
            BETA_ARCH_LABEL: self.architecture,
        }
        if self.windows_build:
            out[WINDOWS_BUILD_LABEL] = self.windows_build
        for level in REQUIRABLE_LEVELS:
            if level <= self.level:
                out[level_label(level)] = LEVEL_LABEL_VALUE
        return out

    def __str__(self) -> str:
        """``os/arch``, as ``kubectl debug`` users know a node's platform."""
        return f"{self.os}/{self.architecture}"

    def describe(self) -> str:
        """``os/arch`` with the build or level when they matter (``windows/amd64 build 10.0.20348``)."""
        text = str(self)
        if self.windows_build:
            text += f" build {self.windows_build}"
        if self.architecture == AMD64 and self.level > 1:
            text += f" x86-64-v{self.level}"
        return text


def entry_build(entry: Platform) -> str | None:
    """The Windows build an entry needs (``""``: any), ``None`` when its ``os.version`` is not a Windows version."""
    try:
        version = entry.version
    except InvalidPlatform:
        return None
    return "" if version is None else version.build


def usable_on(entry: Platform, node: NodePlatform, *, levels: bool) -> bool:
    """The contract's "usable on a node": same OS (an entry without one matches any), same architecture,
    on Windows the same build when the entry states ``os.version``, and on amd64 with ``levels`` a variant
    level at most the node's (an unknown variant is usable nowhere then)."""
    entry_os = normalize_os(entry.os)
    if entry_os and entry_os != node.os:
        return False
    if normalize_architecture(entry.architecture)[0] != node.architecture:
        return False
    if node.os == WINDOWS and entry.os_version:
        build = entry_build(entry)
        if build is None or build != node.windows_build:
            return False
    if levels and node.architecture == AMD64:
        level = x86_64_level(entry.variant)
        if level is None or level > node.level:
            return False
    return True
