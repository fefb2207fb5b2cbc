"""Whether a node can run a pod's images: the controller's test for misplaced pods.

The webhook decides where a pod *may* go; the controller asks the converse of
a pod already bound to a node: does every image that could be inspected offer
the node's ``kubernetes.io/arch`` and ``kubernetes.io/os``? It reads the image
platforms exactly as the policy's rule 4 does (:attr:`ImagePlatforms.entries`:
attestations and unusable entries dropped, architecture aliases normalised, an
entry without OS matching any). An image that could not be inspected, or that
names no usable platform, proves nothing and is left out, as in the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from noe_core.lookup import ImagePlatforms, Lookups
from noe_core.platform import normalize_os
from noe_core.settings import normalize_arch_name


@dataclass(frozen=True)
class Unsupported:
    """An image that does not offer the node's platform, with what it does offer."""

    image: str
    digest: str
    offered: tuple[str, ...]


def unsupported_images(images: Sequence[str], lookups: Lookups, *, arch: str, os: str) -> tuple[Unsupported, ...]:
    """The inspected images that offer no platform matching the node's ``arch``/``os``."""
    node_arch, node_os = normalize_arch_name(arch), normalize_os(os) if os else ""
    out: list[Unsupported] = []
    for image in dict.fromkeys(images):
        found = lookups.get(image)
        if not isinstance(found, ImagePlatforms):
            continue
        entries = found.entries
        if not entries.arch_os:
            continue
        if not any(a == node_arch and (not o or not node_os or o == node_os) for a, o in entries.arch_os):
            out.append(Unsupported(image, found.digest, entries.offered))
    return tuple(out)
