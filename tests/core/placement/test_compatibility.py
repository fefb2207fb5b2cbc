"""Whether a node can run a pod's images: rule 4's reading of the platforms, for the controller."""

from __future__ import annotations

from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.image.node_platform import NodePlatform
from noe_core.placement.compatibility import Unsupported, unsupported_images


def test_only_inspected_images_that_lack_the_nodes_platform_are_named() -> None:
    lookups = {
        "multi:1": ImagePlatforms.of("linux/amd64", "linux/arm64"),
        "amd:1": ImagePlatforms.of("linux/amd64", digest="sha256:amd"),
        "win:1": ImagePlatforms.of("windows/arm64"),
        "any-os:1": ImagePlatforms.of("arm64"),
        "gone:1": LookupFailure("404"),
        "attestation:1": ImagePlatforms.of("unknown/unknown"),
    }
    images = [*lookups, "not-looked-up:1"]
    node = NodePlatform.from_labels({"kubernetes.io/arch": "aarch64", "kubernetes.io/os": "linux"})
    found = unsupported_images(images, lookups, node=node)
    assert found == (
        Unsupported("amd:1", "sha256:amd", ("linux/amd64",)),
        Unsupported("win:1", "", ("windows/arm64",)),
    )


def test_builds_levels_artifacts_and_nodes_without_os() -> None:
    lookups = {
        "win2022:1": ImagePlatforms.of("windows(10.0.20348.1)/amd64"),
        "v3:1": ImagePlatforms.of("linux/amd64/v3"),
        "chart:1": ImagePlatforms.artifact("application/vnd.cncf.helm.config.v1+json"),
        "linux:1": ImagePlatforms.of("linux/amd64"),
    }
    win2019 = NodePlatform("windows", "amd64", "10.0.17763")
    assert [u.image for u in unsupported_images(list(lookups), lookups, node=win2019)] == [
        "win2022:1",
        "v3:1",
        "linux:1",
    ]
    v2 = NodePlatform("linux", "amd64", level=2)
    assert [u.image for u in unsupported_images(list(lookups), lookups, node=v2)] == ["win2022:1"]
    assert [u.image for u in unsupported_images(list(lookups), lookups, node=v2, levels=True)] == ["win2022:1", "v3:1"]
    no_os = NodePlatform("", "amd64")
    assert unsupported_images(["linux:1", "v3:1"], lookups, node=no_os) == ()
