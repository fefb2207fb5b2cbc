"""``kubectl noe``: the ``noe`` command as a kubectl plugin (the ``kubectl-noe`` console script).

kubectl runs any executable named ``kubectl-NAME`` on ``PATH`` as ``kubectl NAME``
and hands it the arguments that follow ``noe`` unchanged (it refuses flags placed
before the plugin's name). So this is the same parser and the same subcommands
under kubectl's name — usage and help say ``kubectl noe`` — and what kubectl
users expect holds because ``noe`` itself does it: ``--kubeconfig``,
``--context`` and ``$KUBECONFIG`` mean what they mean to kubectl
(:mod:`noe_web.kube.config`). What differs, all for a person at a terminal:

* kubectl's global flags ``--kubeconfig``, ``--context`` and ``-n`` may also come
  before the subcommand (``kubectl noe --context prod report``), as with kubectl's
  own commands;
* no subcommand prints the help (for ``noe`` it means ``serve``, the Go Noe's
  container command line), and that command line's bare ``name=value`` flags are
  not read.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from noe_core.cli import run
from noe_web.commands import build_parser, run_guarded

PROG = "kubectl noe"
EPILOG = (
    "kubectl runs this as the plugin kubectl-noe; --kubeconfig, --context, -n and $KUBECONFIG mean what they "
    "mean to kubectl."
)
_GLOBAL_FLAGS = frozenset({"--kubeconfig", "--context", "--namespace", "-n"})


def hoist_global_flags(args: Sequence[str]) -> list[str]:
    """``--context prod report -o json`` → ``report --context prod -o json``: kubectl's global flags, given
    before the subcommand, moved after it (the subcommand then accepts them, or says it does not)."""
    rest = list(args)
    moved: list[str] = []
    while rest and rest[0].startswith("-"):
        name, attached = rest[0].split("=", 1)[0], "=" in rest[0]
        if name.startswith("-n") and not name.startswith("--") and len(name) > 2:
            name, attached = "-n", True  # -nshop
        if name not in _GLOBAL_FLAGS:
            break
        take = 1 if attached or len(rest) < 2 else 2
        moved += rest[:take]
        del rest[:take]
    if not moved or not rest or rest[0].startswith("-"):
        return list(args)  # nothing to move, or no subcommand next to move it after: the parser says what is wrong
    return [rest[0], *moved, *rest[1:]]


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kubectl-noe`` command."""
    args = hoist_global_flags(sys.argv[1:] if argv is None else argv)

    def command() -> int:
        parser = build_parser(prog=PROG)
        parser.epilog = EPILOG
        if not args:
            parser.print_help()
            return 0
        return run(args, parser)

    return run_guarded(command)


if __name__ == "__main__":
    sys.exit(main())
