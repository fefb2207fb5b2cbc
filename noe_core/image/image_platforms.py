"""What the policy is told about each image: its platforms, or why they are unknown.

The registry resolver, the ``--platforms`` file and tests all produce these
values, so the policy never depends on where an answer came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Protocol, TypeAlias

from noe_core.image.node_platform import AMD64, WINDOWS, NodePlatform, entry_build, usable_on
from noe_core.image.offer import EntryFacts, Offer, PlatformScope, image_offer
from noe_core.image.platform import Platform, normalize_arch_name, normalize_os, parse_platform, x86_64_level
from noe_core.name.kubernetes import is_label_value
from noe_core.util.printable import printable, shorten

_MAX_ARTIFACT_TYPE = 128
"""Characters of a registry's ``artifactType`` kept (it is shown to users, never put in a patch)."""
_MAX_SETTINGS = 8
"""Settings remembered per value by :meth:`ImagePlatforms.runnable_on` (a process has one; tests a few)."""


@dataclass(frozen=True)
class ResolvedPlatform:
    """One platform an image runs on, and the digest of its manifest."""

    platform: Platform
    digest: str


@dataclass(frozen=True)
class ImagePlatforms:
    """What is known of an image's platforms: the one shape from the registry resolver to the policy.

    ``platforms`` are the entries as the manifest (list) or config blob states
    them, ``unknown/unknown`` included: filtering is the policy's job, so that
    every source is filtered alike. A registry answer also carries the image's
    ``digest``, its ``media_type`` and each entry's manifest digest
    (``manifests``, in the order of ``platforms``); a platforms file or a test
    may give platforms alone. ``artifact_type`` is set when the manifest is an
    OCI artifact, not a program (rule 17): its ``artifactType``, or its config's
    media type; such a value has no platforms.

    The settings-independent part of rule 4 (:attr:`offered`, :attr:`incomplete`,
    :attr:`arch_os`, :attr:`unusable`) is computed once per value, and the
    offer for given settings (:meth:`offer`) once per value and settings: the
    resolver's cache hands out the same value to every admission that asks.
    """

    platforms: tuple[Platform, ...]
    digest: str = ""
    media_type: str = ""
    manifests: tuple[str, ...] = ()
    artifact_type: str = ""

    def __post_init__(self) -> None:
        if self.manifests and len(self.manifests) != len(self.platforms):
            raise ValueError(f"{len(self.manifests)} manifest digests for {len(self.platforms)} platforms")

    @classmethod
    def of(cls, *platforms: str, digest: str = "") -> ImagePlatforms:
        """Build from platform strings: ``ImagePlatforms.of("linux/amd64", "linux/arm64/v8")``."""
        return cls(tuple(parse_platform(p) for p in platforms), digest)

    @classmethod
    def artifact(cls, artifact_type: str, *, digest: str = "", media_type: str = "") -> ImagePlatforms:
        """An OCI artifact (``artifactType`` or non-image config ``artifact_type``): no platforms, runs nowhere."""
        return cls((), digest, media_type, (), shorten(printable(artifact_type), _MAX_ARTIFACT_TYPE) or "unknown")

    @property
    def is_artifact(self) -> bool:
        """Rule 17: not a program; as an image volume it constrains nothing."""
        return bool(self.artifact_type)

    @property
    def resolved(self) -> tuple[ResolvedPlatform, ...]:
        """Each platform with its manifest digest (``""`` when not read from a registry)."""
        digests = self.manifests or ("",) * len(self.platforms)
        return tuple(ResolvedPlatform(p, d) for p, d in zip(self.platforms, digests, strict=True))

    @cached_property
    def _read_entries(self) -> tuple[tuple[Platform, _Entry], ...]:
        """Each entry with how rule 4 reads it, ``unknown/unknown`` (attestations) dropped."""
        return tuple(
            (p, _read(p.os, p.architecture, p.variant, p.os_version)) for p in self.platforms if not p.is_unknown
        )

    @cached_property
    def _entries(self) -> tuple[_Entry, ...]:
        return tuple(entry for _, entry in self._read_entries)

    @cached_property
    def _facts(self) -> tuple[EntryFacts, ...]:
        """The runnable entries as an offer reads them, without repeats."""
        return tuple(
            dict.fromkeys(
                (entry.os, entry.arch, entry.build, entry.level)
                for entry in self._entries
                if entry.usable and entry.arch
            )
        )

    def offer(self, scope: PlatformScope) -> Offer:
        """Rules 4 and 14-16 for given settings: the (OS, architecture) pairs, Windows builds and x86-64 levels
        of the nodes this image runs on. Remembered per value, since the settings rarely change."""
        found = self._offers.get(scope)
        if found is None:
            found = image_offer(self._facts, scope)
            # What every admission naming the image says of it, written once.
            found.note = f"{found.shown(scope)} (offers {', '.join(self.offered)})"
            found.flagged = bool(self.needs_level or self.unusable or self.bad_versions)
            if len(self._offers) < _MAX_SETTINGS:
                self._offers[scope] = found
        return found

    @cached_property
    def _offers(self) -> dict[PlatformScope, Offer]:
        return {}

    def usable_on(self, node: NodePlatform, *, levels: bool) -> bool:
        """True when some runnable entry is usable on ``node`` (:func:`noe_core.image.node_platform.usable_on`)."""
        return any(entry.usable and entry.arch and usable_on(p, node, levels=levels) for p, entry in self._read_entries)

    @cached_property
    def needs_level(self) -> bool:
        """True when, for some OS, every amd64 entry needs an x86-64 level above v1 (rule 16)."""
        return bool(self._x86_64_floors)

    def x86_64_floor(self, os_name: str) -> int:
        """The lowest x86-64 level among the amd64 entries for ``os_name`` (entries without OS count for
        every OS); 1 when there is none. Above 1, older amd64 nodes cannot run the image (rule 16)."""
        floors = self._x86_64_floors
        if not floors:
            return 1
        return min((floors[name] for name in (os_name, "") if name in floors), default=1)

    @cached_property
    def _x86_64_floors(self) -> dict[str, int]:
        """Per OS written on the entries, the lowest level of its amd64 entries; empty when none is above 1."""
        floors: dict[str, int] = {}
        for entry in self._entries:
            if entry.usable and entry.arch == AMD64 and entry.level is not None:
                floors[entry.os] = min(floors.get(entry.os, entry.level), entry.level)
        return floors if any(level > 1 for level in floors.values()) else {}

    @cached_property
    def offered(self) -> tuple[str, ...]:
        """The runnable entries as shown to users, sorted."""
        return tuple(sorted({entry.text for entry in self._entries if entry.usable and entry.arch}))

    @cached_property
    def incomplete(self) -> tuple[str, ...]:
        """Entries without os or architecture (a strict namespace denies them)."""
        return tuple(entry.text or "(empty)" for entry in self._entries if entry.usable and not entry.complete)

    @cached_property
    def arch_os(self) -> tuple[tuple[str, str], ...]:
        """The normalised (architecture, OS) pairs of the runnable entries, in order, without repeats."""
        return tuple(dict.fromkeys((entry.arch, entry.os) for entry in self._entries if entry.usable and entry.arch))

    @cached_property
    def unusable(self) -> tuple[str, ...]:
        """Entries whose OS, architecture or variant is not a Kubernetes label value (``arm64;reboot``,
        300 characters): never used, since the architecture would go into the pod's node affinity."""
        return tuple(entry.text for entry in self._entries if not entry.usable)

    @cached_property
    def bad_versions(self) -> tuple[str, ...]:
        """Windows entries whose ``os.version`` is not ``major.minor.build[.revision]``: no Windows node's
        build can be told to match them, so they are usable on none (rule 15)."""
        return tuple(
            entry.text for entry in self._entries if entry.usable and entry.os == WINDOWS and entry.build is None
        )


@dataclass(frozen=True)
class _Entry:
    text: str
    arch: str
    os: str
    complete: bool
    usable: bool
    build: str | None
    """The Windows build its ``os.version`` names (``""``: none stated; ``None``: not a Windows version)."""
    level: int | None
    """The x86-64 level of an amd64 entry (``None``: a variant naming none); 1 on other architectures."""


@lru_cache(maxsize=4096)
def _read(os_name: str, architecture: str, variant: str, os_version: str) -> _Entry:
    """One platform entry as rule 4 reads it; registries repeat the same few, so each is read once."""
    arch = normalize_arch_name(architecture) if architecture else ""
    platform = Platform(os_name, architecture, variant, os_version)
    text = str(platform)
    usable = all(is_label_value(value) for value in (os_name, arch, variant))
    level = x86_64_level(variant) if arch == AMD64 else 1
    return _Entry(
        text, arch, normalize_os(os_name), bool(os_name and architecture), usable, entry_build(platform), level
    )


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


class Declared(Protocol):
    """Declared platforms (``noe_core.image.declared``: a file, or placement policies' ``imagePlatforms``)."""

    def get(self, image: str) -> Lookup | None: ...


@dataclass(frozen=True)
class LookupRequest:
    """The images of one object to look up, with what a lookup may need to read them.

    ``pull_secrets`` are the names of the pod's ``imagePullSecrets`` in ``namespace``;
    ``declared`` the platforms its placement policies declare (``imagePlatforms``), consulted
    before the registry and on top of the lookup's own declarations (``--image-platforms``).
    """

    images: tuple[str, ...]
    namespace: str = ""
    pull_secrets: tuple[str, ...] = ()
    declared: Declared | None = None


Source: TypeAlias = str
"""Where an image's answer came from: ``declared``, ``cache``, ``registry`` or ``learned`` (an answer an
``exec format error`` corrected)."""


@dataclass(frozen=True)
class LookupResult:
    """The answers for a :class:`LookupRequest`, warnings about how they were obtained, and where each came from
    (``sources``: image → :data:`Source`; an image not listed came from an unnamed source: a test's answers)."""

    lookups: Mapping[str, Lookup]
    warnings: tuple[str, ...] = ()
    sources: Mapping[str, Source] = field(default_factory=dict)


Inspect: TypeAlias = Callable[[LookupRequest], LookupResult]
"""Images → lookups: the registry client, a platforms file, or a test's fixed answers."""


def declared_first(images: Iterable[str], declared: Declared | None, known: Lookups) -> dict[str, Lookup]:
    """Each image's answer: the declared platforms first (the lookup service's first rule), else ``known``'s;
    an image in neither is left out (not inspected)."""
    found: dict[str, Lookup] = {}
    for image in images:
        answer = declared.get(image) if declared is not None else None
        if answer is None:
            answer = known.get(image)
        if answer is not None:
            found[image] = answer
    return found


def fixed(lookups: Lookups) -> Inspect:
    """An :data:`Inspect` that answers from ``lookups`` (an image it lacks is "not inspected"), after the
    platforms the request's placement policies declare, as the lookup service answers them first."""

    def inspect(request: LookupRequest) -> LookupResult:
        return LookupResult(declared_first(request.images, request.declared, lookups))

    return inspect
