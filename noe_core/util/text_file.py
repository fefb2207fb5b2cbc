"""A settings file (placement policies, declared platforms) read as UTF-8 text.

Both stop the command with :class:`~noe_core.errors.InvalidSettings` naming the file;
the reading and its two messages are written here once.
"""

from __future__ import annotations

from noe_core.errors import InvalidSettings


def read_text(path: str, label: str) -> str:
    """The UTF-8 text of ``path``; ``InvalidSettings("cannot read LABEL: …")`` or ``("LABEL is not UTF-8 text")``."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise InvalidSettings(f"cannot read {label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidSettings(f"{label} is not UTF-8 text") from None
