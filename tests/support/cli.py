"""The ``noe`` command run in-process, as the CLI suites call it."""

from __future__ import annotations

import io
import sys

from noe_web.commands import main


def run_cli(*args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    try:
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse usage errors
            status = int(exc.code or 0)
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    return status, out.getvalue(), err.getvalue()
