"""A node's platform from its labels, and the contract's "usable on a node", case by case (rules 14-16)."""

from __future__ import annotations

import pytest

from noe_core import testing
from noe_core.image.node_platform import NodePlatform, entry_build, level_label, usable_on
from noe_core.image.platform import Platform, parse_platform

LINUX_AMD64_V2 = NodePlatform("linux", "amd64", level=2)
LINUX_AMD64_V3 = NodePlatform("linux", "amd64", level=3)
LINUX_ARM64 = NodePlatform("linux", "arm64")
WIN_2022 = NodePlatform("windows", "amd64", "10.0.20348")
WIN_2019 = NodePlatform("windows", "amd64", "10.0.17763")


def test_labels_read_back() -> None:
    for platform in (LINUX_AMD64_V3, LINUX_ARM64, WIN_2022, NodePlatform("linux", "amd64", level=4)):
        assert NodePlatform.from_labels(platform.labels()) == platform
    labels = testing.node("w", "amd64", "windows", windows_build="10.0.20348", x86_64_level=2)["metadata"]["labels"]
    assert labels["node.kubernetes.io/windows-build"] == "10.0.20348"
    assert labels["feature.node.kubernetes.io/cpu-cpuid.X86_64_V2"] == "true"
    assert "feature.node.kubernetes.io/cpu-cpuid.X86_64_V3" not in labels


def test_reading_labels_as_nodes_write_them() -> None:
    # beta labels only (old nodes), aliases normalised, the level labels cumulative; a Linux node's build ignored
    beta = NodePlatform.from_labels({"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "x86_64"})
    assert beta == NodePlatform("linux", "amd64")
    nfd = {level_label(n): "true" for n in (2, 3)}
    assert NodePlatform.from_labels({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **nfd}).level == 3
    arm = NodePlatform.from_labels({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64", **nfd})
    assert arm.level == 1  # levels are an amd64 notion
    odd = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", level_label(2): "false"}
    assert NodePlatform.from_labels(odd).level == 1
    linux_build = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/windows-build": "1"}
    assert NodePlatform.from_labels(linux_build).windows_build == ""
    assert str(WIN_2022) == "windows/amd64" and WIN_2022.describe() == "windows/amd64 build 10.0.20348"
    assert LINUX_AMD64_V3.describe() == "linux/amd64 x86-64-v3"


def test_only_levels_2_to_4_have_labels() -> None:
    assert level_label(3) == "feature.node.kubernetes.io/cpu-cpuid.X86_64_V3"
    for level in (0, 1, 5):
        with pytest.raises(ValueError, match="no node label"):
            level_label(level)


@pytest.mark.parametrize(
    ("entry", "node", "levels", "usable"),
    [
        # OS and architecture
        ("linux/amd64", LINUX_AMD64_V2, False, True),
        ("linux/x86_64", LINUX_AMD64_V2, False, True),
        ("linux/arm64/v8", LINUX_ARM64, False, True),
        ("linux/arm64", LINUX_AMD64_V2, False, False),
        ("windows/amd64", LINUX_AMD64_V2, False, False),
        ("amd64", LINUX_AMD64_V2, False, True),  # an entry without OS matches any
        ("amd64", WIN_2022, False, True),
        # Windows builds: the first three numbers of os.version; none stated matches any build
        ("windows(10.0.20348.2340)/amd64", WIN_2022, False, True),
        ("windows(10.0.20348)/amd64", WIN_2022, False, True),
        ("windows(10.0.17763.5458)/amd64", WIN_2022, False, False),
        ("windows/amd64", WIN_2019, False, True),
        ("windows(10.0)/amd64", WIN_2022, False, False),  # not a Windows version: no build matches it
        # x86-64 levels: only with levels on, only on amd64; none = v1
        ("linux/amd64/v3", LINUX_AMD64_V2, False, True),
        ("linux/amd64/v3", LINUX_AMD64_V2, True, False),
        ("linux/amd64/v3", LINUX_AMD64_V3, True, True),
        ("linux/amd64/v2", LINUX_AMD64_V3, True, True),
        ("linux/amd64", NodePlatform("linux", "amd64"), True, True),
        ("linux/amd64/v9", LINUX_AMD64_V3, True, False),  # a variant that names no level
        ("linux/amd64/v9", LINUX_AMD64_V3, False, True),
        ("linux/arm64/v8", LINUX_ARM64, True, True),
        ("windows(10.0.20348.1)/amd64/v3", NodePlatform("windows", "amd64", "10.0.20348", 3), True, True),
        ("windows(10.0.20348.1)/amd64/v3", WIN_2022, True, False),
    ],
)
def test_usable_on(entry: str, node: NodePlatform, levels: bool, usable: bool) -> None:
    assert usable_on(parse_platform(entry), node, levels=levels) is usable


def test_entry_build() -> None:
    assert entry_build(parse_platform("windows(10.0.20348.2340)/amd64")) == "10.0.20348"
    assert entry_build(parse_platform("windows/amd64")) == ""
    assert entry_build(Platform("windows", "amd64", "", "ltsc2022")) is None
