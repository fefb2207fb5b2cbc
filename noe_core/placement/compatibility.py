"""Whether a node can run a pod's images: the controller's test for misplaced pods.

The webhook decides where a pod *may* go; the controller asks the converse of
a pod already bound to a node: does every image that could be inspected have an
entry usable on the node (:func:`noe_core.image.node_platform.usable_on`: OS,
architecture, Windows build, and x86-64 level when levels are labelled)? It
reads the image platforms exactly as the policy's rule 4 does (attestations and
unusable entries dropped, aliases normalised, an entry without OS matching any).
An image that could not be inspected, that names no usable platform, or that is
an artifact (rule 17) proves nothing and is left out, as in the policy. A node
that states no OS is judged on its architecture (and build, level) alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from noe_core.image.image_platforms import ImagePlatforms, Lookups
from noe_core.image.node_platform import NodePlatform


@dataclass(frozen=True)
class Unsupported:
    """An image that does not offer the node's platform, with what it does offer."""

    image: str
    digest: str
    offered: tuple[str, ...]


def _usable(found: ImagePlatforms, node: NodePlatform, levels: bool) -> bool:
    if node.os:
        return found.usable_on(node, levels=levels)
    return any(found.usable_on(replace(node, os=os_name), levels=levels) for _, os_name in found.arch_os)


def unsupported_images(
    images: Sequence[str], lookups: Lookups, *, node: NodePlatform, levels: bool = False
) -> tuple[Unsupported, ...]:
    """The inspected images with no entry usable on ``node`` (``levels``: ``--x86-64-levels nfd``)."""
    out: list[Unsupported] = []
    for image in dict.fromkeys(images):
        found = lookups.get(image)
        if not isinstance(found, ImagePlatforms) or found.is_artifact or not found.arch_os:
            continue
        if not _usable(found, node, levels):
            out.append(Unsupported(image, found.digest, found.offered))
    return tuple(out)
