"""What the policy is told about each image: its platforms, or why they are unknown.

The registry resolver, the ``--platforms`` file and tests all produce these
values, so the policy never depends on where an answer came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from noe_core.platform import Platform, parse_platform


@dataclass(frozen=True)
class ImagePlatforms:
    """The platforms an image offers, as its manifest (list) or config blob states them.

    Entries are kept as the registry wrote them, ``unknown/unknown`` included:
    filtering is the policy's job so that every source is filtered alike.
    """

    platforms: tuple[Platform, ...]
    digest: str = ""

    @classmethod
    def of(cls, *platforms: str, digest: str = "") -> ImagePlatforms:
        """Build from platform strings: ``ImagePlatforms.of("linux/amd64", "linux/arm64/v8")``."""
        return cls(tuple(parse_platform(p) for p in platforms), digest)


@dataclass(frozen=True)
class LookupFailure:
    """The image could not be inspected; ``reason`` is shown to the user in a warning or denial."""

    reason: str


Lookup: TypeAlias = ImagePlatforms | LookupFailure
Lookups: TypeAlias = Mapping[str, Lookup]
"""Keyed by the image string exactly as written in the pod spec."""
