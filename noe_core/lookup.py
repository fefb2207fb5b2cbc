"""What the policy is told about each image: its platforms, or why they are unknown.

The registry resolver, the ``--platforms`` file and tests all produce these
values, so the policy never depends on where an answer came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TypeAlias

from noe_core.platform import Platform, normalize_os, parse_platform
from noe_core.settings import is_label_value, normalize_arch_name


@dataclass(frozen=True)
class PlatformEntries:
    """An image's platform entries after rule 4's settings-independent part.

    ``unknown/unknown`` (attestations) dropped; ``offered`` is what is shown to
    users, ``incomplete`` the entries without os or architecture, ``arch_os``
    the normalised (architecture, OS) pairs of the runnable ones.
    """

    offered: tuple[str, ...]
    incomplete: tuple[str, ...]
    arch_os: tuple[tuple[str, str], ...]
    unusable: tuple[str, ...] = ()
    """Entries whose OS, architecture or variant is not a Kubernetes label value (``arm64;reboot``,
    300 characters): never used, since the architecture would go into the pod's node affinity."""


@dataclass(frozen=True)
class ImagePlatforms:
    """The platforms an image offers, as its manifest (list) or config blob states them.

    Entries are kept as the registry wrote them, ``unknown/unknown`` included:
    filtering is the policy's job so that every source is filtered alike.
    """

    platforms: tuple[Platform, ...]
    digest: str = ""

    @cached_property
    def entries(self) -> PlatformEntries:
        """The entries as rule 4 reads them, computed once per value (a warm cache hands out the same one)."""
        read = [_read(p.os, p.architecture, p.variant, p.os_version) for p in self.platforms if not p.is_unknown]
        runnable = [entry for entry in read if entry.usable and entry.arch]
        return PlatformEntries(
            offered=tuple(sorted({entry.text for entry in runnable})),
            incomplete=tuple(entry.text or "(empty)" for entry in read if entry.usable and not entry.complete),
            arch_os=tuple(dict.fromkeys((entry.arch, entry.os) for entry in runnable)),
            unusable=tuple(entry.text for entry in read if not entry.usable),
        )

    @classmethod
    def of(cls, *platforms: str, digest: str = "") -> ImagePlatforms:
        """Build from platform strings: ``ImagePlatforms.of("linux/amd64", "linux/arm64/v8")``."""
        return cls(tuple(parse_platform(p) for p in platforms), digest)


@dataclass(frozen=True)
class _Entry:
    text: str
    arch: str
    os: str
    complete: bool
    usable: bool


@lru_cache(maxsize=4096)
def _read(os_name: str, architecture: str, variant: str, os_version: str) -> _Entry:
    """One platform entry as rule 4 reads it; registries repeat the same few, so each is read once."""
    arch = normalize_arch_name(architecture) if architecture else ""
    text = str(Platform(os_name, architecture, variant, os_version))
    usable = all(is_label_value(value) for value in (os_name, arch, variant))
    return _Entry(text, arch, normalize_os(os_name), bool(os_name and architecture), usable)


@dataclass(frozen=True)
class LookupFailure:
    """The image could not be inspected; ``reason`` is shown to the user in a warning or denial.

    ``temporary`` says the same lookup may succeed later (a timeout, a connection
    error, 429 or 5xx): in gate mode such a pod is held back rather than admitted
    without placement.
    """

    reason: str
    temporary: bool = False


Lookup: TypeAlias = ImagePlatforms | LookupFailure
Lookups: TypeAlias = Mapping[str, Lookup]
"""Keyed by the image string exactly as written in the pod spec."""


@dataclass(frozen=True)
class LookupRequest:
    """The images of one object to look up, with what a lookup may need to read them.

    ``pull_secrets`` are the names of the pod's ``imagePullSecrets`` in ``namespace``.
    """

    images: tuple[str, ...]
    namespace: str = ""
    pull_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class LookupResult:
    """The answers for a :class:`LookupRequest`, and warnings about how they were obtained."""

    lookups: Mapping[str, Lookup]
    warnings: tuple[str, ...] = ()


Inspect: TypeAlias = Callable[[LookupRequest], LookupResult]
"""Images → lookups: the registry client, a platforms file, or a test's fixed answers."""


def fixed(lookups: Lookups) -> Inspect:
    """An :data:`Inspect` that answers from ``lookups`` (an image it lacks is "not inspected")."""

    def inspect(request: LookupRequest) -> LookupResult:
        return LookupResult({image: lookups[image] for image in request.images if image in lookups})

    return inspect
