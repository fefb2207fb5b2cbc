"""The Go Noe's command line, read as ``noe serve``'s: its image and chart keep working unchanged.

The Go Noe's image runs ``noe`` with no subcommand and Go-style flags, in a
working directory holding ``tls.crt``/``tls.key`` (controller-runtime's
``--cert-dir`` default ``./``); early versions of its chart passed
``registry-proxies=…`` without dashes (which Go's flag package, stopping at the
first non-flag, ignored with every argument after it); controller-runtime
flags (``--leader-elect``, ``--health-probe-addr``, ``--zap-*``…) come along.
So, before argparse:

* no subcommand (or none at all) means ``serve``;
* then a bare ``name=value`` naming a ``serve`` flag means ``--name=value``, with a one-line warning;
* without ``--cert-dir``/``--tls-*`` (flag or variable), ``./tls.crt`` and
  ``./tls.key`` are served when both exist;

and after it, :func:`apply_compat_flags` maps the controller-runtime flags that
mean something here (``--metrics-bind-address`` → ``--metrics-addr``,
``--zap-log-level`` → ``--log-level``, ``--zap-encoder`` → ``--log-format``) and
says in one line each that the others are ignored.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from noe_core.cli.options import long_options
from noe_core.cli.parser import Flag, given
from noe_web.commands.flags import (
    CERT_DIR,
    HEALTH_PROBE_ADDR,
    HEALTH_PROBE_BIND_ADDRESS,
    LEADER_ELECT,
    LEADER_ELECTION_ID,
    LEADER_ELECTION_NAMESPACE,
    METRICS_BIND_ADDRESS,
    TLS_CERT_FILE,
    TLS_KEY_FILE,
    ZAP_DEVEL,
    ZAP_ENCODER,
    ZAP_LOG_LEVEL,
    ZAP_STACKTRACE_LEVEL,
    ZAP_TIME_ENCODING,
)
from noe_web.flags import LOG_FORMAT, LOG_LEVEL_FLAG, METRICS_ADDR

NOTES = "noe_style_notes"
"""Namespace attribute holding the warnings found before parsing (logged once logging is set up)."""

_TOP_LEVEL = frozenset({"-h", "--help", "--version"})
_TLS_FLAGS = (CERT_DIR, TLS_CERT_FILE, TLS_KEY_FILE)
_ZAP_LEVELS = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING"}
_IGNORED: tuple[tuple[Flag, str], ...] = (
    (LEADER_ELECT, "noe elects no leader: every replica answers admissions"),
    (LEADER_ELECTION_ID, "noe elects no leader"),
    (LEADER_ELECTION_NAMESPACE, "noe elects no leader"),
    (HEALTH_PROBE_ADDR, "noe serves /healthz and /readyz on --bind over HTTPS; point the probes there"),
    (HEALTH_PROBE_BIND_ADDRESS, "noe serves /healthz and /readyz on --bind over HTTPS; point the probes there"),
    (ZAP_DEVEL, "noe's log format is --log-format"),
    (ZAP_STACKTRACE_LEVEL, "errors are logged with their traceback in the 'error' field"),
    (ZAP_TIME_ENCODING, "times are ISO 8601, UTC"),
)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def noe_style_argv(
    argv: Sequence[str],
    parser: argparse.ArgumentParser,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """``argv`` (already through :func:`~noe_core.cli.options.go_style_argv`) as the ``noe`` parser reads it,
    and the warnings to log; unchanged when it names a subcommand."""
    commands = _subcommands(parser)
    first = argv[0] if argv else ""
    if first in commands or first in _TOP_LEVEL or "serve" not in commands:
        return list(argv), []
    if first and not first.startswith("-") and "=" not in first:
        return list(argv), []  # a mistyped subcommand: argparse names the valid ones
    serve_options = long_options(commands["serve"])
    out, notes = ["serve"], []
    for token in argv:
        name = "--" + token.partition("=")[0]
        if not token.startswith("-") and "=" in token and name in serve_options:
            notes.append(
                f"argument '{token.partition('=')[0]}=…' read as {name}: the Go Noe ignored it and "
                "every argument after it (Go's flag parsing stops at the first non-flag)"
            )
            token = f"{name}={token.partition('=')[2]}"  # noqa: PLW2901
        out.append(token)
    env = os.environ if environ is None else environ
    named = {token.partition("=")[0] for token in out}
    if not any(flag.name in named or (flag.env_name or "") in env for flag in _TLS_FLAGS):
        here = (cwd or Path.cwd()).resolve()
        if (here / "tls.crt").is_file() and (here / "tls.key").is_file():
            out.append(f"{CERT_DIR.name}={here}")
    return out, notes


def apply_compat_flags(ns: argparse.Namespace) -> list[str]:
    """Map the controller-runtime flags that have a meaning here onto noe's; the warnings to log."""
    notes = list(getattr(ns, NOTES, None) or ())
    if given(ns, METRICS_BIND_ADDRESS):
        if given(ns, METRICS_ADDR) and ns.metrics_addr != ns.metrics_bind_address:
            notes.append(f"{METRICS_BIND_ADDRESS.name} ignored: {METRICS_ADDR.name} is given too")
        else:
            ns.metrics_addr = ns.metrics_bind_address
    if given(ns, ZAP_LOG_LEVEL) and not given(ns, LOG_LEVEL_FLAG):
        ns.log_level = _ZAP_LEVELS.get(ns.zap_log_level, "ERROR")
    if given(ns, ZAP_ENCODER) and not given(ns, LOG_FORMAT):
        ns.log_format = "json" if ns.zap_encoder == "json" else "text"
    notes.extend(
        f"{flag.name} accepted for the Go Noe's command line and ignored: {why}"
        for flag, why in _IGNORED
        if given(ns, flag)
    )
    return notes
