"""What the API server and users are shown: warnings and deny messages within the sizes they accept.

The API server rejects an AdmissionReview whose warnings are longer than
:data:`MAX_WARNING` characters, and kubectl shows only a few KiB of them, while
a pod may name thousands of images and a registry may answer with anything.
Every warning and deny message noe writes is shaped here: one printable line,
long image names shortened at both ends, lists cut with a count of the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from noe_core.util.printable import printable

MAX_WARNING = 120
"""The API server rejects AdmissionReview warnings longer than this (in characters)."""
MAX_WARNINGS = 30
"""Warnings in one answer; the last says how many more were left out. The API server and kubectl
show only a few KiB of warnings, and a pod naming 40,000 failing images must not cost 40,000 lines."""
MAX_MESSAGE = 2048
"""Characters of a deny message; images past it are counted, not listed."""


def limit_warning(text: str) -> str:
    """One printable line of at most :data:`MAX_WARNING` characters, so the API server accepts it."""
    flat = printable(" ".join(text.split()))
    if len(flat) <= MAX_WARNING:
        return flat
    return flat[: MAX_WARNING - 3] + "..."


def cap_warnings(warnings: Sequence[str]) -> tuple[str, ...]:
    """At most :data:`MAX_WARNINGS`, the last of them counting those left out."""
    if len(warnings) <= MAX_WARNINGS:
        return tuple(warnings)
    kept = MAX_WARNINGS - 1
    return (*warnings[:kept], f"... and {len(warnings) - kept} more warnings (noe's log has every image)")


def joined(head: str, parts: Sequence[str], what: str) -> str:
    """``head`` and as many ``parts`` as fit in :data:`MAX_MESSAGE`, the rest counted; printable."""
    text = head
    for index, part in enumerate(parts):
        separator = "; " if index else ""
        rest = len(parts) - index
        if len(text) + len(separator) + len(part) > MAX_MESSAGE - 40 and rest > 1:
            return printable(f"{text}; and {rest} more {what}")
        text += separator + part
    return printable(text)


@dataclass
class Notes:
    """A decision's warnings (each shaped, repeats dropped) and reasons, as the rules add them."""

    warnings: dict[str, None] = field(default_factory=dict)  # an ordered set: a pod may list thousands of images
    reasons: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        self.warnings.setdefault(limit_warning(text), None)

    def warning_list(self) -> tuple[str, ...]:
        return cap_warnings(tuple(self.warnings))
