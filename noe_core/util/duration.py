"""Durations as operators and Kubernetes write them: seconds (``3600``) or Go's ``time.Duration`` (``1h30m``).

:func:`parse_go_duration` reads what Kubernetes serialises (``metav1.Duration``:
a credential provider's ``cacheDuration``); :func:`parse_duration` reads a flag's
value, either form, and raises :class:`~noe_core.errors.InvalidSettings` naming it.
"""

from __future__ import annotations

import re

from noe_core.errors import InvalidSettings

_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}  # fmt: skip


def parse_duration(text: str, flag: str = "duration") -> float:
    """Seconds as a number (``3600``, ``0.5``) or a Go duration (``1h``, ``30s``, ``1h30m``, ``250ms``)."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parse_go_duration(value)
        except ValueError:
            raise InvalidSettings(
                f"{flag} {text!r} is not a duration: use seconds (3600) or Go syntax (1h, 30s, 1h30m)"
            ) from None
    if not 0 <= seconds < float("inf"):
        raise InvalidSettings(f"{flag} {text!r} must be a finite, non-negative duration")
    return seconds


def parse_go_duration(text: str) -> float:
    """Seconds in a Go ``time.Duration`` string (``"5m0s"``, ``"1h"``, ``"1.5h"``, ``"0"``).

    Kubernetes serialises ``metav1.Duration`` this way; negative durations are
    refused because a cache duration cannot be negative.
    """
    if not isinstance(text, str):
        raise ValueError(f"duration {text!r} must be a string such as '5m0s'")
    if text in ("0", "+0"):
        return 0.0
    body = text[1:] if text.startswith("+") else text
    position, total = 0, 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"duration {text!r} is not a Go duration such as '5m0s' or '1h'")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if not body:
        raise ValueError("empty duration")
    return total
