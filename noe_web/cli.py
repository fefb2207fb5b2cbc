"""The ``noe`` console script: ``mutate`` and ``inspect`` from noe_core, ``serve`` and ``certs`` from here.

The web subcommands import Flask and gunicorn only when they run, so
``noe mutate`` stays fast and works without the web extra.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from noe_core.cli import build_parser as build_core_parser
from noe_core.cli import run


def build_parser() -> argparse.ArgumentParser:
    """The full ``noe`` parser; the Helm chart's arguments are tested against it."""
    from noe_web.certs import add_certs_parser  # noqa: PLC0415
    from noe_web.serve import add_serve_parser  # noqa: PLC0415

    return build_core_parser(extra=(add_serve_parser, add_certs_parser))


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, build_parser())


if __name__ == "__main__":
    sys.exit(main())
