"""A declared flag as an argparse option: variables, one-line usage errors naming flag and variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from noe_core.cli.parser import (
    Flag,
    NoeArgumentParser,
    add_flag,
    flag_of,
    given,
    parse_text,
    require,
    usage_error,
)
from noe_core.cli.values import ExistingFile, Seconds
from noe_core.errors import InvalidSettings

TIMEOUT = Flag("--lookup-timeout", Seconds(0, 300, above=True), default="10", help="seconds")
FILE = Flag("--platforms", ExistingFile(), env=False, help="a file")


def _parser(environ: dict[str, str] | None = None) -> NoeArgumentParser:
    parser = NoeArgumentParser(prog="noe test")
    add_flag(parser, TIMEOUT, environ or {})
    add_flag(parser, FILE, {})
    return parser


def test_the_variable_replaces_the_default_and_the_command_line_wins() -> None:
    assert _parser().parse_args([]).lookup_timeout == 10
    ns = _parser({"NOE_LOOKUP_TIMEOUT": "3"}).parse_args([])
    assert ns.lookup_timeout == 3 and not given(ns, TIMEOUT)
    ns = _parser({"NOE_LOOKUP_TIMEOUT": "3"}).parse_args(["--lookup-timeout", "4"])
    assert ns.lookup_timeout == 4 and given(ns, TIMEOUT)


def test_a_bad_value_is_one_usage_line_naming_the_flag_or_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["--lookup-timeout", "abc"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "noe test: argument --lookup-timeout: 'abc' is not a number of seconds\n"
    with pytest.raises(SystemExit):
        _parser({"NOE_LOOKUP_TIMEOUT": "abc"}).parse_args([])
    assert "NOE_LOOKUP_TIMEOUT='abc' is not a number of seconds" in capsys.readouterr().err


def test_files_are_checked_when_settings_are_built(tmp_path: Path) -> None:
    present = tmp_path / "p.json"
    present.write_text("{}")
    assert require(_parser().parse_args(["--platforms", str(present)]), FILE) == present
    assert require(_parser().parse_args([]), FILE) is None
    with pytest.raises(InvalidSettings, match=r"argument --platforms: '/nope' is not an existing file"):
        require(_parser().parse_args(["--platforms", "/nope"]), FILE)
    with pytest.raises(TypeError):
        require(_parser().parse_args([]), TIMEOUT)


def test_library_callers_and_later_checks_phrase_problems_alike() -> None:
    with pytest.raises(InvalidSettings, match="--lookup-timeout: 'x' is not a number of seconds"):
        parse_text(TIMEOUT, "x")
    problem = usage_error(_parser().parse_args(["--lookup-timeout", "5"]), TIMEOUT, "is too long here")
    assert str(problem) == "argument --lookup-timeout: '5.0' is too long here"  # the value as parsed
    actions = {a.dest: flag_of(a) for a in _parser()._actions}
    assert actions["lookup_timeout"] is TIMEOUT and actions["help"] is None
