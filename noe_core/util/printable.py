"""Text from outside (image names, registry messages, Secret names) made safe to show.

Warnings, Events and deny messages are read in terminals and dashboards. A raw
control character (``\\x1b`` starts a terminal escape sequence, ``\\x00`` cuts a
C string) or a bidirectional override (U+202E makes ``gpj.exe`` read as
``exe.jpg``) in an image name must not act on the reader's screen, so each is
shown as its escape (``\\x1b``, ``\\u202e``) instead. A long image name is shortened at both
ends (:func:`shorten`), where the registry and the tag or digest carry its meaning.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control, format and bidirectional characters shown as escapes."""
    return _UNSAFE.sub(_escape, text)


def shorten(text: str, limit: int) -> str:
    """Keep both ends of a long image name (registry and tag/digest carry the meaning)."""
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    tail = limit - 3 - head
    return f"{text[:head]}...{text[-tail:]}"
