"""Every flag of every ``noe`` subcommand: declared once, and every bad value is one usage line, exit 2.

The flags are found by walking the real ``noe`` parser, so a flag added later
is covered without touching this file; a bad value is derived from the kind of
its value parser, and fed both on the command line and through the flag's
``NOE_*`` variable.
"""

from __future__ import annotations

import argparse
import io
import logging
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from noe_core.cli import values
from noe_core.cli.options import go_style_argv
from noe_core.cli.parser import Flag, flag_of
from noe_web.commands import build_parser, main
from noe_web.flags import HostPort
from noe_web.server import application as server
from tests.support.paths import ROOT

MISSING = "/nonexistent/noe-flag-test"

# Base arguments that make each command reach the point where it builds its settings, and no further
# (inspect and mutate never touch the network with them; serve and certs stop before serving anything).
BASE: dict[str, list[str]] = {
    "mutate": ["--filename=examples/pod.yaml", "--platforms=examples/platforms.json"],
    "inspect": ["127.0.0.1:9/x/y:1"],
    "serve": ["--bind=127.0.0.1:0", "--metrics-addr="],
    "certs": ["--namespace=default"],
    "report": ["--filename=examples/pod.yaml", "--platforms=examples/platforms.json"],
    "controller": ["--metrics-addr="],  # without --kubeconfig and outside a cluster it stops with exit 2
    "policy explain": ["--filename=examples/pod.yaml"],
    "why": ["web", f"--kubeconfig={MISSING}"],  # every flag is judged before the kubeconfig is read
}


def base_args(command: str, flag: str) -> list[str]:
    """The command's base arguments, less the flag under test (so its variable is not overridden)."""
    return [arg for arg in BASE[command] if arg.split("=", 1)[0] != flag]


# Flags whose value no text can make wrong: the command reads them itself.
FREE_TEXT = {
    ("mutate", "--filename"),  # read by the command: 'cannot read FILE' (tests/core/cli/test_mutate.py)
    ("report", "--filename"),  # likewise (tests/web/report/test_command.py)
    ("report", "--html"),  # written by the command: 'cannot write it'
    ("mutate", "--docker-config"),
    ("inspect", "--docker-config"),
    ("serve", "--docker-config"),
    ("report", "--docker-config"),
    ("mutate", "--containerd-config"),
    ("inspect", "--containerd-config"),
    ("serve", "--containerd-config"),
    ("report", "--containerd-config"),
    ("why", "--docker-config"),
    ("why", "--containerd-config"),
    ("serve", "--state-dir"),  # created when missing
    ("serve", "--cache-dir"),  # created when missing; unusable: a warning and the in-memory cache
    ("serve", "--control-socket"),  # created by gunicorn
    ("controller", "--docker-config"),
    ("controller", "--containerd-config"),
    # policy files are read by the command: 'cannot read policy file FILE' (tests/core/cli/test_policy.py)
    ("mutate", "--policy"),
    ("inspect", "--policy"),
    ("report", "--policy"),
    ("serve", "--policy"),
    ("policy explain", "--policy"),
    ("policy explain", "--filename"),
}
# Option names two commands use for different settings, each declared once per meaning.
HOMONYMS = {
    "--namespace",
    "--output",
    "--filename",
    # serve accepts them for the Go Noe's command line and ignores them; controller elects a leader
    "--leader-elect",
    "--leader-election-id",
    "--leader-election-namespace",
}  # mutate: namespace of bare objects; certs: of the Service
# and Secret; report: the one namespace to read. --output and --filename: each command's own formats and inputs.


NESTED = {"policy"}
"""Subcommands whose own subcommands take flags, walked by their full name (``policy explain``)."""


def subcommands() -> dict[str, argparse.ArgumentParser]:
    def children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        return dict(sub.choices) if sub is not None else {}

    out = children(build_parser())
    for name in NESTED:
        out.update({f"{name} {child}": parser for child, parser in children(out.pop(name)).items()})
    return out


def declared(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.Action, Flag]]:
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = flag_of(action)
        assert flag is not None, f"{parser.prog} {action.option_strings} is not declared as a Flag"
        yield action, flag


def bad_values(kind: object) -> list[str]:
    """Values the kind must refuse (for existing files: one that is not there)."""
    if isinstance(kind, values.Seconds | values.Integer):
        out = ["abc"]
        if math.isfinite(kind.maximum):
            out.append(f"{kind.maximum + 1:g}")
        below = kind.minimum if isinstance(kind, values.Seconds) and kind.above else kind.minimum - 1
        out.append(f"{below:g}")
        return out + (["nan", "inf"] if isinstance(kind, values.Seconds) else ["1.5"])
    if isinstance(kind, values.Duration):
        return ["soon", "-1s", "1d"]
    if isinstance(kind, values.Boolean):
        return ["maybe"]
    if isinstance(kind, values.CommaList):
        return [f"x,{bad_values(kind.item)[0]}"]  # a good item, then a bad one
    if isinstance(kind, values.Architecture | values.OsName):
        return ["arm 64", "amd64!"]
    if isinstance(kind, values.Choice):
        return ["nonsense"]
    if isinstance(kind, values.LabelKey):
        return ["bad key!"]
    if isinstance(kind, values.LabelPairs):
        return ["bad key!=x", "app=bad value!", "app"]
    if isinstance(kind, values.DnsName):
        return ["Not_A_Name", "-x"]
    if isinstance(kind, values.ExistingFile | values.ExistingDir):
        return [MISSING]
    if isinstance(kind, HostPort):
        return ["nonsense", ":70000"]
    if isinstance(kind, values.SecretURL):  # no password in these: they are quoted as typed
        return ["http://127.0.0.1:6379", "redis://:6379/0", "redis://h:70000", "redis://h/99", "redis://h?x=1"]
    if isinstance(kind, values.Line):
        return ["x" * (kind.max_length + 1), "two\nlines"]
    if isinstance(kind, values.Syntax):
        return {
            values.ARCH_TOLERATIONS: ["arm64", "arm64=arch=arm64:Sometimes"],
            values.REGISTRY_PROXIES: ["nonsense", "docker.io=bad mirror"],
            values.IMAGE_PATTERNS: ["a b", "ftp://x"],
            values.HOST_GLOBS: ["a b"],
            values.ARCH_PRICES: ["arm64", "arm64=-1", "arm 64=1"],
        }[kind]
    return []


def cases() -> Iterator[tuple[str, str, list[str], dict[str, str]]]:
    for command, parser in sorted(subcommands().items()):
        for _, flag in declared(parser):
            bads = bad_values(flag.kind)
            if not bads:
                assert (command, flag.name) in FREE_TEXT, f"noe {command} {flag.name}: no bad value for its kind"
                continue
            for bad in bads:
                yield command, flag.name, [f"{flag.name}={bad}"], {}  # a switch refuses any value
                if flag.env_name:
                    yield command, flag.name, [], {flag.env_name: bad}


CASES = list(cases())


@pytest.fixture
def contained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No stray NOE_* variable; a serve that got past its checks fails instead of serving; logging restored."""
    for name in [n for n in os.environ if n.startswith("NOE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.chdir(ROOT)

    def refuse(self: object) -> None:
        raise AssertionError("noe serve started although a flag was bad")

    monkeypatch.setattr(server.NoeServer, "run", refuse)
    loggers = [logging.getLogger(name) for name in ("noe", "noe_core")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers, lg.level, lg.propagate = handlers, level, propagate


def run_noe(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            status = main(argv)
        except SystemExit as exc:
            status = int(exc.code or 0)
    finally:
        sys.stdout, sys.stderr = old
    return status, out.getvalue(), err.getvalue()


@pytest.mark.usefixtures("contained")
@pytest.mark.parametrize(
    ("command", "flag", "args", "env"),
    CASES,
    ids=[" ".join([c, *a, *(f"{k}={v}" for k, v in e.items())]) for c, _, a, e in CASES],
)
def test_every_bad_value_is_one_usage_line(
    monkeypatch: pytest.MonkeyPatch, command: str, flag: str, args: list[str], env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    status, out, err = run_noe([*command.split(), *base_args(command, flag), *args])
    lines = err.strip().splitlines()
    assert status == 2, (status, out, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    line = lines[0]
    assert line.startswith(f"noe {command}: "), line
    assert flag in line, line
    for name, value in env.items():
        assert f"{name}={value!r}" in line, line
    for arg in args:
        assert repr(arg.split("=", 1)[1]) in line or "ignored explicit argument" in line, line


def test_every_command_and_kind_is_covered() -> None:
    """The walk reaches all five commands, and each takes flags of several kinds on both paths."""
    commands = {c for c, _, _, _ in CASES}
    assert commands == {"mutate", "inspect", "serve", "certs", "report", "controller", "policy explain", "why"}
    assert sum(1 for _, _, a, _ in CASES if a) > 100
    assert sum(1 for _, _, _, e in CASES if e) > 100


def test_a_flag_shared_by_commands_is_one_declaration() -> None:
    seen: dict[str, Flag] = {}
    for command, parser in subcommands().items():
        for _, flag in declared(parser):
            if flag.name in HOMONYMS:
                continue
            assert seen.setdefault(flag.name, flag) is flag, f"noe {command} {flag.name} is declared twice"
    assert {"--preferred-arch", "--cache-ttl", "--kubeconfig", "--bind", "--lookup-timeout"} <= set(seen)


def test_the_variable_is_parsed_like_the_flag_and_the_flag_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOE_LOOKUP_TIMEOUT", "2.5")
    monkeypatch.setenv("NOE_PREFERRED_ARCH", "x86_64")
    monkeypatch.setenv("NOE_VERIFY_PLATFORM_MANIFESTS", "off")
    monkeypatch.setenv("NOE_CACHE_TTL", "1h30m")
    parser = build_parser()
    ns = parser.parse_args(go_style_argv(["mutate", "-f", "-", "-lookup-timeout=7"], parser))
    assert ns.lookup_timeout == 7.0  # the Go-style flag beats the variable
    assert ns.preferred_arch == "amd64"  # normalised through the architecture aliases
    assert ns.verify_platform_manifests is False
    assert ns.cache_ttl == 5400.0
    ns = build_parser().parse_args(["mutate", "-f", "-", "--verify-platform-manifests"])
    assert ns.verify_platform_manifests is True and ns.lookup_timeout == 2.5


def test_repeatable_flags_take_a_path_list_from_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOE_DOCKER_CONFIG", os.pathsep.join(["/a/config.json", "", "/b/config.json"]))
    ns = build_parser().parse_args(["inspect", "x", "--docker-config", "/c/config.json"])
    assert ns.docker_config == ["/a/config.json", "/b/config.json", "/c/config.json"]


def test_the_documented_example_of_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's example, word for word, on the command line and through the variable."""
    monkeypatch.delenv("NOE_LOOKUP_TIMEOUT", raising=False)
    status, _, err = run_noe(["mutate", "-f", "examples/pod.yaml", "--lookup-timeout", "abc"])
    assert (status, err) == (2, "noe mutate: argument --lookup-timeout: 'abc' is not a number of seconds\n")
    monkeypatch.setenv("NOE_LOOKUP_TIMEOUT", "abc")
    status, _, err = run_noe(["mutate", "-f", "examples/pod.yaml"])
    assert (status, err) == (
        2,
        "noe mutate: argument --lookup-timeout: NOE_LOOKUP_TIMEOUT='abc' is not a number of seconds\n",
    )


def test_help_shows_defaults_and_variables() -> None:
    text = subcommands()["serve"].format_help()
    assert "[default: 0.0.0.0:8443; env NOE_BIND]" in " ".join(text.split())
    assert "[default: 1h; env NOE_CACHE_TTL]" in " ".join(text.split())
