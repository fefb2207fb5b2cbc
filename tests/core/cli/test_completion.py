"""``noe completion bash|zsh|fish``: scripts generated from the real parser, loaded by the real shells.

bash and fish are asked for completions as a user's shell would ask them
(bash: ``COMP_WORDS``/``COMP_CWORD`` and the completion function; fish:
``complete -C``); zsh's script is checked with ``zsh -n``. The shells are
installed by tests/support/system_deps.py; a missing one fails the test.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noe_web.commands import build_parser
from tests.support.paths import ROOT


def noe_completion(shell: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "noe_web", "completion", shell],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def shell(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed: run python -m tests.support.system_deps"
    return path


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "noe.bash"
    path.write_text(noe_completion("bash"))
    return path


def bash_complete(script: Path, line: str) -> list[str]:
    """What bash offers for the last word of ``line`` (a trailing space starts a new, empty word)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    array = " ".join(shlex.quote(w) for w in words)
    program = (
        f"source {shlex.quote(str(script))}; COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; "
        "_noe_completion; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    proc = subprocess.run(
        [shell("bash"), "--norc", "--noprofile", "-c", program], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("noe mu", ["mutate"]),
        (
            "noe ",
            [
                "mutate",
                "inspect",
                "policy",
                "serve",
                "controller",
                "certs",
                "report",
                "why",
                "cache",
                "completion",
                "-h",
                "--help",
                "--version",
            ],
        ),
        ("noe mutate -o ", ["yaml", "json"]),
        ("noe mutate --out", ["--output"]),
        ("noe inspect --output ", ["text", "json", "yaml"]),
        ("noe report -o ", ["table", "json", "yaml", "csv", "policyreport"]),
        ("noe why -o ", ["table", "json", "yaml"]),
        ("noe serve --log-format ", ["auto", "json", "text"]),
        ("noe serve --preference-mode r", ["required"]),
        ("noe completion ", ["bash", "zsh", "fish"]),
        ("noe serve --leader", ["--leader-elect", "--leader-election-id", "--leader-election-namespace"]),
    ],
)
def test_bash_completes_commands_flags_and_choices(bash_script: Path, line: str, expected: list[str]) -> None:
    assert sorted(bash_complete(bash_script, line)) == sorted(expected)


def test_bash_offers_every_flag_of_every_subcommand(bash_script: Path) -> None:
    for name, parser in subcommands().items():
        offered = set(bash_complete(bash_script, f"noe {name} -"))
        options = {opt for action in parser._actions for opt in action.option_strings}
        assert offered == options, (name, options ^ offered)


def test_bash_completes_file_values_with_paths(bash_script: Path, tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text("{}")
    line = f"noe mutate -f {tmp_path}/po"
    assert bash_complete(bash_script, line) == [f"{tmp_path}/pod.yaml"]
    assert bash_complete(bash_script, "noe mutate --namespace de") == []  # no guess for a free value


def test_zsh_script_is_valid_zsh() -> None:
    script = noe_completion("zsh")
    assert script.startswith("#compdef noe\n")
    proc = subprocess.run([shell("zsh"), "-n"], input=script, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    for name, parser in subcommands().items():
        assert f"    {name})\n" in script
        for action in parser._actions:
            for option in action.option_strings:
                assert option in script, (name, option)


def test_fish_script_is_valid_and_completes(tmp_path: Path) -> None:
    path = tmp_path / "noe.fish"
    path.write_text(noe_completion("fish"))
    check = subprocess.run([shell("fish"), "-n", str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert check.returncode == 0, check.stderr

    def complete(line: str) -> list[str]:
        program = f"source {shlex.quote(str(path))}; complete -C {shlex.quote(line)}"
        proc = subprocess.run(
            [shell("fish"), "--no-config", "-c", program], capture_output=True, text=True, timeout=30, check=False
        )
        assert proc.returncode == 0, proc.stderr
        return sorted(w.split("\t")[0] for w in proc.stdout.splitlines() if w)

    assert complete("noe mutate -o ") == ["json", "yaml"]
    assert "serve" in complete("noe ")
    assert "--log-format" in complete("noe serve --log-")


def test_unknown_shell_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "noe_web", "completion", "tcsh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("noe completion: argument SHELL: invalid choice: 'tcsh'"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
