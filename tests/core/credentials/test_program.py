"""The one credential-program runner, against real programs: hung grandchildren, floods, big input, secrets."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from noe_core.credentials.program import run_program, stderr_excerpt
from noe_core.errors import ProgramFailed, ProgramTimedOut

SECRET = "tok-Zx81aQ0pLm29Wv7sKd5RtY3bHn6c"
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def gone(pid: int, within: float = 5.0) -> bool:
    """The process no longer runs (absent, or a zombie waiting for init to reap it)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_program_that_answers(tmp_path: Path) -> None:
    finished = run_program(
        python("import sys; data = sys.stdin.read(); print(len(data)); print('note', file=sys.stderr)"),
        name="echo",
        timeout=10,
        env=ENV,
        stdin=b"x" * 300_000,  # more than a pipe holds: written while its output is read
    )
    assert finished.returncode == 0 and finished.stdout == b"300000\n" and finished.excerpt() == "note"
    assert finished.status == "exited with status 0"


def test_a_program_that_does_not_read_its_input_and_fails() -> None:
    finished = run_program(
        python("import sys; print('denied', file=sys.stderr); sys.exit(3)"),
        name="closer",
        timeout=10,
        env=ENV,
        stdin=b"y" * 1_000_000,
    )
    assert finished.returncode == 3 and finished.status == "exited with status 3" and finished.excerpt() == "denied"


def test_a_hung_grandchild_is_killed_with_its_group_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"  # inherits stdout: holds our pipe open
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        f"print({SECRET!r}, flush=True)\n"
    )
    started = time.monotonic()
    with pytest.raises(ProgramTimedOut) as info:
        run_program(python(code), name="plugin 'forker'", timeout=1.0, env=ENV)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 4.0, elapsed
    assert str(info.value) == "plugin 'forker' did not finish within 1s; its process group was killed"
    assert gone(int(pid_file.read_text()))
    assert SECRET not in repr(info.value)


def test_a_flood_on_stdout_is_cut_short_and_killed() -> None:
    started = time.monotonic()
    with pytest.raises(ProgramFailed) as info:
        run_program(
            python(f"import sys\nwhile True: sys.stdout.write({SECRET!r} * 1000)"),
            name="plugin 'flood'",
            timeout=30,
            env=ENV,
            max_stdout=100_000,
        )
    assert time.monotonic() - started < 10  # at the cap, not at the timeout
    assert not isinstance(info.value, ProgramTimedOut)
    assert str(info.value) == "plugin 'flood' printed more than 100000 bytes on standard output and was killed"


def test_a_flood_on_stderr_keeps_only_its_end() -> None:
    code = "import sys\nfor i in range(200_000): print('line', i, file=sys.stderr)\nsys.exit(1)"
    finished = run_program(python(code), name="noisy", timeout=30, env=ENV, max_stderr=4096)
    assert finished.returncode == 1 and len(finished.stderr) <= 4096
    assert finished.excerpt() == "line 199999"


def test_a_program_killed_by_a_signal_says_so() -> None:
    finished = run_program(
        python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"), name="x", timeout=10, env=ENV
    )
    assert finished.returncode < 0 and finished.status == "was killed by signal 15"


def test_a_program_that_cannot_be_started_names_it_and_keeps_the_cause(tmp_path: Path) -> None:
    with pytest.raises(ProgramFailed, match="plugin 'nope' could not be started: No such file") as info:
        run_program([str(tmp_path / "nope")], name="plugin 'nope'", timeout=1, env=ENV)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(ProgramFailed, match="Permission denied") as info:
        run_program([str(script)], name="plugin", timeout=1, env=ENV)
    assert isinstance(info.value.__cause__, PermissionError)


def test_the_excerpt_is_the_last_line_redacted_printable_and_short() -> None:
    stderr = f"debug: {SECRET}\nerror: token {SECRET} refused \x1b[31m\n".encode()
    assert stderr_excerpt(stderr) == "error: token <redacted> refused ?[31m"
    assert stderr_excerpt(b"\n  \n") == ""
    assert stderr_excerpt(b"e " * 500, limit=10) == "e e e e e …"
