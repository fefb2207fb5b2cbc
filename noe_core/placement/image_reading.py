"""Rule 4 per image, with rules 14-17: what each image of a workload offers, or why it is left out.

Each image's lookup is read once into a :data:`Reading`: its offer
(:mod:`noe_core.image.offer`: the (OS, architecture) pairs, Windows builds
and x86-64 levels of the nodes it runs on), the :class:`LookupFailure` that
leaves it out (rule 5), or an :class:`Artifact` (rule 17: not a program; as an
image volume it constrains nothing, as a container's image it cannot run). The
strict-namespace problems, the deny message of rule 6 and the per-image
warnings and reasons are all shaped from these readings, so they say the same.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from noe_core.image.image_platforms import ImagePlatforms, Lookup, LookupFailure, Lookups
from noe_core.image.node_platform import AMD64
from noe_core.image.offer import Offer, PlatformScope, describe
from noe_core.placement.messages import Notes, joined
from noe_core.policies.settings import NOTHING_SCHEDULABLE
from noe_core.util.printable import shorten

IMAGE_IN_WARNING = 64
"""Characters of an image name in a warning (both ends kept)."""


@dataclass(frozen=True)
class Artifact:
    """An image that is an OCI artifact (``artifactType``, or a config that is not an image config)."""

    artifact_type: str
    volume: bool
    """Only used as an image volume: then it constrains nothing."""


Reading: TypeAlias = Offer | LookupFailure | Artifact
"""One image after rule 4: what it offers, why it is left out, or that it is an artifact."""

NOT_INSPECTED = LookupFailure("not inspected")
_NO_PLATFORMS = ImagePlatforms(())


def read_image(found: Lookup | None, scope: PlatformScope, *, volume: bool = False) -> Reading:
    """Rule 4 for one lookup: the image's offer within ``scope`` (computed once per value and scope), or why
    it is left out. ``volume``: the image is only mounted as an image volume (rule 3)."""
    if found is None:
        return NOT_INSPECTED
    if isinstance(found, LookupFailure):
        return found if found.reason else LookupFailure("lookup failed", found.temporary)
    if not isinstance(found, ImagePlatforms):
        raise TypeError(f"lookup is {type(found).__name__}, not a Lookup")
    if found.artifact_type:
        return Artifact(found.artifact_type, volume)
    if not found.arch_os:
        if found.unusable:
            return LookupFailure(
                f"its manifest names no usable platform (not label values: {', '.join(found.unusable)})"
            )
        return LookupFailure("its manifest names no platform")
    return found.offer(scope)


def read_images(
    images: Sequence[str], lookups: Lookups, scope: PlatformScope, volumes: Collection[str] = ()
) -> dict[str, Reading]:
    """Each image's reading, in the workload's order; ``volumes`` are the images used only as image volumes."""
    out: dict[str, Reading] = {}
    for image in images:
        found = lookups.get(image)
        if type(found) is ImagePlatforms and not found.artifact_type and found.arch_os:
            out[image] = found.offer(scope)  # the common case, without the checks of read_image
        else:
            out[image] = read_image(found, scope, volume=image in volumes)
    return out


def offers(readings: Mapping[str, Reading]) -> list[Offer]:
    """The offers of the images that were inspected (failures and artifacts left out)."""
    return [reading for reading in readings.values() if isinstance(reading, Offer)]


def platforms_of(lookups: Lookups, image: str) -> ImagePlatforms:
    """The image's platforms as looked up (none when its lookup failed)."""
    found = lookups.get(image)
    return found if isinstance(found, ImagePlatforms) else _NO_PLATFORMS


def strict_problems(readings: Mapping[str, Reading], lookups: Lookups) -> list[str]:
    """Rule 5 in a strict namespace, with rule 17: images not inspected, artifacts used as a container's
    image, and entries without os or architecture, that are no label value or whose os.version is no
    Windows version."""
    problems = []
    for image, reading in readings.items():
        if isinstance(reading, Artifact):
            if not reading.volume:
                problems.append(f"image {image} is an artifact ({reading.artifact_type}), not a container image")
            continue
        found = platforms_of(lookups, image)
        if isinstance(reading, LookupFailure):
            problems.append(f"image {image} could not be inspected: {reading.reason}")
        elif found.incomplete:
            problems.append(
                f"image {image} has platform entries without os or architecture: {', '.join(found.incomplete)}"
            )
        elif found.unusable:
            problems.append(
                f"image {image} has platform entries that are not valid label values: {', '.join(found.unusable)}"
            )
        elif found.bad_versions:
            problems.append(
                f"image {image} has Windows entries whose os.version is not a build: {', '.join(found.bad_versions)}"
            )
    return problems


def note_images(
    readings: Mapping[str, Reading], lookups: Lookups, scope: PlatformScope, out: Notes
) -> tuple[list[Offer], tuple[str, ...]]:
    """The warnings and reasons each image gives: left out (and why), or what it offers.

    Returns the offers of the inspected images, and those of them whose amd64 entries all need an
    x86-64 level (for :func:`warn_levels`).
    """
    inspected: list[Offer] = []
    leveled: list[str] = []
    for image, reading in readings.items():
        if isinstance(reading, Offer):
            inspected.append(reading)
            out.reasons.append(f"image {image}: {reading.note or reading.shown(scope)}")
            if not reading.flagged:
                continue  # the common case: nothing to warn about
            found = platforms_of(lookups, image)
            if found.needs_level:
                leveled.append(image)
        elif isinstance(reading, Artifact):
            if reading.volume:
                out.reasons.append(f"image volume {image} is an artifact ({reading.artifact_type}): constrains nothing")
            else:
                out.warn(f"{shorten(image, IMAGE_IN_WARNING)} is an artifact, not a container image: it cannot run")
                out.reasons.append(f"image {image} left out: an artifact ({reading.artifact_type})")
            continue
        else:
            found = platforms_of(lookups, image)
            out.warn(f"cannot inspect {shorten(image, IMAGE_IN_WARNING)}: {reading.reason}")
            out.reasons.append(f"image {image} left out: {reading.reason}")
        if found.unusable:
            out.warn(
                f"{shorten(image, IMAGE_IN_WARNING)}: platform {shorten(found.unusable[0], 24)} "
                "is not a valid label value: ignored"
            )
        if found.bad_versions:
            out.warn(
                f"{shorten(image, IMAGE_IN_WARNING)}: platform {shorten(found.bad_versions[0], 40)} "
                "has no Windows build: ignored"
            )
    return inspected, tuple(leveled)


def warn_levels(images: Sequence[str], lookups: Lookups, common: Offer, out: Notes) -> None:
    """Rule 16 with levels off: an image whose amd64 entries all need a level above v1 (``images``, as
    :func:`note_images` found them) is not held to it, but the user hears which level it needs while
    amd64 nodes are possible for the pod."""
    amd64_oses = [os_name for os_name, arch in common if arch == AMD64]
    if not amd64_oses:
        return
    for image in images:
        found = platforms_of(lookups, image)
        level = max(found.x86_64_floor(os_name) for os_name in amd64_oses)
        if level > 1:
            out.warn(f"{shorten(image, 48)} needs x86-64-v{level} on amd64; not required (--x86-64-levels off)")
            out.reasons.append(f"image {image}: its amd64 entries need x86-64-v{level}; older amd64 nodes crash it")


def deny_message(readings: Mapping[str, Reading], lookups: Lookups, scope: PlatformScope) -> str:
    """Rule 6 (and 14): every image with what it offers, so the user sees the conflict."""
    what = "platform" if scope.multi_os or "windows" in scope.oses else "CPU architecture"
    where = f"OS {', '.join(scope.oses)}"
    if scope.architectures == NOTHING_SCHEDULABLE:
        where += ", no schedulable architecture: the placement policies' schedulableArchitectures share none"
    elif scope.architectures:
        where += f", schedulable architectures {', '.join(sorted(scope.architectures))}"
    parts = []
    for image, reading in readings.items():
        if isinstance(reading, Artifact):
            if not reading.volume:
                parts.append(f"{image}: an artifact ({reading.artifact_type})")
        elif isinstance(reading, LookupFailure):
            parts.append(f"{image}: not inspected ({reading.reason})")
        elif reading:
            parts.append(f"{image}: {', '.join(describe(reading, scope))}")
        else:
            parts.append(f"{image}: none usable (offers {', '.join(platforms_of(lookups, image).offered)})")
    return joined(f"no {what} is supported by every image ({where}): ", parts, "images")
