"""Flags that can also be set through ``NOE_*`` environment variables.

Every flag of the ``noe`` command has an environment variable named after it
(``--preferred-arch`` → ``NOE_PREFERRED_ARCH``) so that a Deployment can set
configuration either way. A flag on the command line wins over the variable.
Go's flag syntax (``-preferred-arch amd64``, ``-preferred-arch=amd64``) is
accepted too, so the Go Noe's command lines keep working unchanged.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

_GO_LONG_FLAG = re.compile(r"^-[a-z][a-z0-9]*(-[a-z0-9]+)*[a-z0-9](=.*)?$", re.DOTALL)


def env_name(flag: str) -> str:
    """``--preferred-arch`` → ``NOE_PREFERRED_ARCH``."""
    return "NOE_" + flag.lstrip("-").upper().replace("-", "_")


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    *,
    help: str,
    default: Any = None,
    environ: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> argparse.Action:
    """Add ``flag`` whose default comes from its ``NOE_*`` variable when set.

    For ``action="append"`` flags the variable holds a comma-free list
    separated by ``os.pathsep``; for ``store_true`` flags it holds
    ``true``/``false``. Values from the environment go through the same
    ``type=`` conversion as values from the command line.
    """
    env = os.environ if environ is None else environ
    name = env_name(flag)
    action = kwargs.get("action")
    raw = env.get(name)
    if raw is not None:
        if action == "store_true":
            default = raw.strip().lower() in ("1", "true", "yes", "on")
        elif action == "append":
            default = [item for item in raw.split(os.pathsep) if item]
        else:
            default = raw
    help_text = f"{help} [env {name}]"
    return parser.add_argument(flag, default=default, help=help_text, **kwargs)


def go_style_argv(argv: Sequence[str]) -> list[str]:
    """Rewrite Go-style single-dash long flags (``-preferred-arch``) as ``--preferred-arch``.

    Only tokens that look like a long flag are touched: ``-f`` and ``-o`` stay
    short options and ``-`` (stdin) stays a value.
    """
    return [
        "-" + token if _GO_LONG_FLAG.match(token) else token
        for token in argv
    ]
