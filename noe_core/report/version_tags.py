"""Version tags: which tags of a repository are newer releases of the one a pod runs.

A tag is read as a version when it is ``[v]MAJOR[.MINOR[.PATCH]][-SUFFIX]``
(``1.2.3``, ``v1.2.3``, ``1.27``, ``7``, ``1.2.3-alpine``); anything else —
``latest``, ``nightly``, a commit hash, four numbers — is not a version and is
ignored. Newer means higher by semantic-version order of the numbers, among
tags of the *same shape*: as many numbers and the same suffix. So ``1.27``
(which follows the newest 1.27.x) is compared with ``1.28``, not with
``1.27.1``; ``1.2.3-alpine`` with ``1.2.4-alpine``, never with ``1.2.4`` (another
image flavour); and ``1.2.3`` with ``1.2.4``, never with ``1.2.4-rc1`` (a
pre-release, in semantic versioning's own terms). The ``v`` prefix does not
matter; of two tags naming the same version, the one spelled like the current
tag is kept. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_NUMBER = r"(?:0|[1-9][0-9]{0,8})"  # no leading zero, as semantic versioning says
_VERSION = re.compile(
    rf"^(?P<prefix>[vV]?)(?P<numbers>{_NUMBER}(?:\.{_NUMBER}){{0,2}})(?:-(?P<suffix>[0-9A-Za-z][0-9A-Za-z._-]*))?$"
)


@dataclass(frozen=True)
class TagVersion:
    """A tag read as a version: its numbers, its suffix and how it is spelled."""

    tag: str
    numbers: tuple[int, ...]
    suffix: str
    prefix: str

    @property
    def shape(self) -> tuple[int, str]:
        """What two tags must share to be compared: how many numbers, and the suffix."""
        return len(self.numbers), self.suffix


def parse_version(tag: str) -> TagVersion | None:
    """``v1.2.3-alpine`` → ``TagVersion(numbers=(1, 2, 3), suffix="alpine")``; ``None`` when it is no version."""
    match = _VERSION.match(tag)
    if match is None:
        return None
    numbers = tuple(int(part) for part in match["numbers"].split("."))
    return TagVersion(tag, numbers, match["suffix"] or "", match["prefix"])


def newer_tags(current: str, tags: Iterable[str]) -> list[str]:
    """The tags of the same shape as ``current`` with a higher version, lowest first; ``[]`` if it is no version."""
    base = parse_version(current)
    if base is None:
        return []
    best: dict[tuple[int, ...], TagVersion] = {}
    for tag in tags:
        version = parse_version(tag)
        if version is None or version.shape != base.shape or version.numbers <= base.numbers:
            continue
        kept = best.get(version.numbers)
        if kept is None or _preference(version, base) < _preference(kept, base):
            best[version.numbers] = version
    return [best[numbers].tag for numbers in sorted(best)]


def _preference(version: TagVersion, base: TagVersion) -> tuple[bool, str]:
    """Spelled like the current tag first (``v`` or not), then by name."""
    return version.prefix != base.prefix, version.tag
