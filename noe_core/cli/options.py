"""Command-line conventions of the ``noe`` command: ``NOE_*`` variable names and Go-style ``-flag``.

Every flag of the ``noe`` command has an environment variable named after it
(``--preferred-arch`` → ``NOE_PREFERRED_ARCH``) so that a Deployment can set
configuration either way; a flag on the command line wins over the variable
(:mod:`noe_core.cli.flags` declares the flags). Go's flag syntax
(``-preferred-arch amd64``, ``-preferred-arch=amd64``) is accepted too, so the
Go Noe's command lines keep working unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_GO_LONG_FLAG = re.compile(r"^-[a-z][a-z0-9]*(-[a-z0-9]+)*[a-z0-9](=.*)?$", re.DOTALL)


def env_name(flag: str) -> str:
    """``--preferred-arch`` → ``NOE_PREFERRED_ARCH``."""
    return "NOE_" + flag.lstrip("-").upper().replace("-", "_")


def go_style_argv(argv: Sequence[str]) -> list[str]:
    """Rewrite Go-style single-dash long flags (``-preferred-arch``) as ``--preferred-arch``.

    Only tokens that look like a long flag are touched: ``-f`` and ``-o`` stay
    short options and ``-`` (stdin) stays a value.
    """
    return [
        "-" + token if _GO_LONG_FLAG.match(token) else token
        for token in argv
    ]
