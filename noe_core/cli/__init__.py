"""The ``noe`` command's offline and registry subcommands: ``mutate``, ``inspect`` and ``policy``.

``noe_web.commands`` adds ``serve``, ``controller``, ``certs``, ``report`` and
``cache`` on top; ``python -m noe_core.cli`` offers these three (and
``completion``) without the web extra installed.

* :mod:`.__main__` — ``python -m noe_core.cli``
* :mod:`.parser` — a declared :class:`~.parser.Flag` becomes an argparse option; one-line usage errors
* :mod:`.values` — typed value parsers, one per kind of flag value, shared by flags and ``NOE_*`` variables
* :mod:`.options` — ``NOE_*`` variable names and Go's flag syntax (``-flag``, ``-switch=true``)
* :mod:`.flags` — the flag catalogue: ``mutate``'s and ``inspect``'s, the policy and registry flags
* :mod:`.policy_options` — the policy flags → ``PolicySettings``
* :mod:`.registry_options` — the registry and credential flags → ``RegistrySettings``, the node keychain
* :mod:`.output` — ``-o json|yaml``: the one way commands print structured data
* :mod:`.mutate` — ``noe mutate``: the webhook's answer for a file, offline or against registries
* :mod:`.inspect` — ``noe inspect``: an image's platforms as the webhook sees them
* :mod:`.policy` — ``noe policy check`` and ``noe policy explain``: policy files as the cluster would judge them
* :mod:`.completion` — ``noe completion bash|zsh|fish``: scripts generated from the real parser
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import cast

from noe_core.cli.options import go_style_argv
from noe_core.cli.parser import NoeArgumentParser
from noe_core.util.installed_version import installed_version


class _VersionAction(argparse.Action):
    """``--version``: reads the package metadata only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))  # type: ignore[arg-type]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"noe {installed_version()}")
        parser.exit()


SubcommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def build_parser(extra: Sequence[SubcommandAdder] = (), *, prog: str = "noe") -> argparse.ArgumentParser:
    """The ``noe`` parser with ``mutate``, ``inspect`` and ``policy``, plus the ``extra`` subcommands and
    ``completion``; ``prog`` is the name usage and help give it (``kubectl noe`` for the kubectl plugin)."""
    from noe_core.cli.completion import add_completion_parser  # noqa: PLC0415
    from noe_core.cli.inspect import add_inspect_parser  # noqa: PLC0415
    from noe_core.cli.mutate import add_mutate_parser  # noqa: PLC0415
    from noe_core.cli.policy import add_policy_parser  # noqa: PLC0415

    parser = NoeArgumentParser(
        prog=prog,
        description="Place Kubernetes pods on nodes whose CPU architecture every image supports.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print noe's version and exit")
    # Subcommand parsers are NoeArgumentParsers too (argparse uses the parent's class); adders see the base type.
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", required=True),
    )
    add_mutate_parser(subparsers)
    add_inspect_parser(subparsers)
    add_policy_parser(subparsers)
    for add in extra:
        add(subparsers)
    add_completion_parser(subparsers, parser)
    return parser


def run(argv: Sequence[str] | None, parser: argparse.ArgumentParser) -> int:
    """Parse ``argv`` (Go-style ``-flag`` accepted) and run the chosen subcommand.

    Usage errors (a bad value of any flag or ``NOE_*`` variable) exit 2 with
    one line; subcommands return their own status.
    """
    args = go_style_argv(list(sys.argv[1:] if argv is None else argv), parser)
    ns = parser.parse_args(args)
    status: int = ns.run(ns)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, build_parser())
