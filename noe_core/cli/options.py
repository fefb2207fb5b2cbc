"""Command-line conventions of the ``noe`` command: ``NOE_*`` variable names and Go-style ``-flag``.

Every flag of the ``noe`` command has an environment variable named after it
(``--preferred-arch`` → ``NOE_PREFERRED_ARCH``) so that a Deployment can set
configuration either way; a flag on the command line wins over the variable
(:mod:`noe_core.cli.flags` declares the flags). Go's flag syntax
(``-preferred-arch amd64``, ``-preferred-arch=amd64``) is accepted too, so the
Go Noe's command lines keep working unchanged.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from noe_core.cli.values import BadValue, Boolean


def env_name(flag: str) -> str:
    """``--preferred-arch`` → ``NOE_PREFERRED_ARCH``."""
    return "NOE_" + flag.lstrip("-").upper().replace("-", "_")


def long_options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Every ``--name`` of ``parser`` and of its subcommands' parsers → whether it is a switch (takes no value)."""
    found: dict[str, bool] = {}
    stack = [parser]
    while stack:
        current = stack.pop()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
            for name in action.option_strings:
                if name.startswith("--"):
                    found[name] = found.get(name, False) or action.nargs == 0
    return found


def go_style_argv(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """Go's flag syntax, as the Go Noe's command lines use it, rewritten for argparse.

    * ``-preferred-arch amd64`` → ``--preferred-arch amd64``, only when
      ``--preferred-arch`` is an option of ``parser`` or one of its subcommands:
      ``-ojson`` stays the short option ``-o`` with the value ``json``, ``-`` (stdin) a value;
    * ``--leader-elect=true`` (a switch given a boolean, as Go allows) →
      ``--leader-elect``; ``=false`` → ``--no-leader-elect`` when the switch has a negation,
      else nothing (off is a switch's default).

    Tokens after ``--`` are left alone.
    """
    known = long_options(parser)
    out: list[str] = []
    for index, given in enumerate(argv):
        if given == "--":
            return out + list(argv[index:])
        single = given.startswith("-") and not given.startswith("--") and "-" + given.partition("=")[0] in known
        token = "-" + given if single else given
        rewritten = _go_switch(token, known) if token.startswith("--") else token
        if rewritten is not None:
            out.append(rewritten)
    return out


def _go_switch(token: str, known: Mapping[str, bool]) -> str | None:
    """``--switch=true`` → ``--switch``; ``=false`` → its negation, or ``None`` (dropped)."""
    name, eq, value = token.partition("=")
    if not eq or not known.get(name):
        return token
    try:
        on = Boolean()(value)
    except BadValue:
        return token  # argparse says the switch takes no value
    if on:
        return name
    negation = "--no-" + name[2:]
    return negation if negation in known else None
