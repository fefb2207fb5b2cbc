"""Comma-separated flag values (``a, b,,c``): the one way noe splits them.

Every list-valued flag and ``NOE_*`` variable (architectures, namespaces,
label keys, host globs, image patterns, registry proxies, architecture
tolerations) is read through :func:`parse_comma_list`, so blanks, empty items
and repeats mean the same thing everywhere.
"""

from __future__ import annotations


def parse_comma_list(text: str) -> tuple[str, ...]:
    """Split a comma-separated value: items trimmed, empty items and repeats dropped, order kept.

    ``"a, b,,c,a"`` → ``("a", "b", "c")``; order is kept so messages follow the flag.
    """
    seen: dict[str, None] = {}  # an ordered set
    for item in text.split(","):
        stripped = item.strip()
        if stripped:
            seen.setdefault(stripped, None)
    return tuple(seen)
