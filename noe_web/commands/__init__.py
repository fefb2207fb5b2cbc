"""The ``noe`` console script and the commands that run noe's processes.

``noe mutate``, ``noe inspect`` and ``noe policy`` come from :mod:`noe_core.cli`;
this package adds ``serve``, ``certs`` and ``cache``, and, from their own
packages, ``controller`` (:mod:`noe_web.controller`) and ``report``
(:mod:`noe_web.report`). Nothing imports this package but the console script.

* :mod:`.serve` — ``noe serve``, the composition root of the webhook process
* :mod:`.config` — parsed ``serve`` flags → ``ServeConfig``, checked
* :mod:`.flags` — the flags of ``serve`` and ``certs`` alone, and the Go Noe's
* :mod:`.noe_compat` — the Go Noe's command line read as ``serve``'s
* :mod:`.certs` — ``noe certs``: CA and serving certificate, TLS Secret, webhook ``caBundle``
* :mod:`.cache` — the node's registry cache as ``serve`` opens it, and ``noe cache``
* :mod:`.kubectl` — ``kubectl-noe``: the same command as the kubectl plugin ``kubectl noe``

The web subcommands import Flask, gunicorn and cryptography only when they
run, so ``noe mutate`` and ``noe inspect`` stay fast and work without the
``web`` extra; without it, ``noe serve`` says which package is missing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from noe_core.cli import SubcommandAdder, run
from noe_core.cli import build_parser as build_core_parser

# Modules of the ``web`` extra; a missing one means the extra is not installed.
WEB_EXTRA_MODULES = frozenset({"flask", "gunicorn", "prometheus_client", "cryptography", "werkzeug"})


def _needs_web_extra(name: str, missing: str) -> SubcommandAdder:
    """A subcommand that explains how to install what it needs, instead of a traceback."""

    def add(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        parser = subparsers.add_parser(name, help=f"(needs the web extra: module {missing} is missing)")
        parser.set_defaults(run=lambda _ns: _missing_extra(missing))

    return add


def _missing_extra(missing: str) -> int:
    print(
        f"noe: this command needs the web extra: pip install 'noe-webhook[web]' (module {missing} is missing)",
        file=sys.stderr,
    )
    return 2


def build_parser(prog: str = "noe") -> argparse.ArgumentParser:
    """The full ``noe`` parser; the Helm chart's arguments are tested against it. ``prog``: the name in usage."""
    from noe_web.commands.cache import add_cache_parser  # noqa: PLC0415
    from noe_web.commands.serve import add_serve_parser  # noqa: PLC0415
    from noe_web.controller.command import add_controller_parser  # noqa: PLC0415
    from noe_web.report.command import add_report_parser  # noqa: PLC0415
    from noe_web.report.why import add_why_parser  # noqa: PLC0415

    add_certs: SubcommandAdder
    try:
        from noe_web.commands.certs import add_certs_parser  # noqa: PLC0415

        add_certs = add_certs_parser
    except ModuleNotFoundError as exc:
        if exc.name not in WEB_EXTRA_MODULES:
            raise
        add_certs = _needs_web_extra("certs", exc.name)
    parser = build_core_parser(
        extra=(add_serve_parser, add_controller_parser, add_certs, add_report_parser, add_why_parser, add_cache_parser),
        prog=prog,
    )
    parser.epilog = "Without a COMMAND, the arguments are serve's, as the Go Noe's image runs it."
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``noe`` command; the Go Noe's command lines (no subcommand) run ``serve`` (:mod:`.noe_compat`)."""
    from noe_core.cli.options import go_style_argv  # noqa: PLC0415
    from noe_web.commands.noe_compat import NOTES, noe_style_argv  # noqa: PLC0415

    def command() -> int:
        parser = build_parser()
        args, notes = noe_style_argv(go_style_argv(list(sys.argv[1:] if argv is None else argv), parser), parser)
        if notes:
            parser.set_defaults(**{NOTES: notes})
        return run(args, parser)

    return run_guarded(command)


def run_guarded(command: Callable[[], int]) -> int:
    """Run ``command``; a module of the web extra that is missing is one line saying what to install, exit 2."""
    try:
        return command()
    except ModuleNotFoundError as exc:
        if exc.name not in WEB_EXTRA_MODULES:
            raise
        return _missing_extra(exc.name)


if __name__ == "__main__":
    sys.exit(main())
