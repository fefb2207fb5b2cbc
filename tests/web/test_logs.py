"""--log-format auto: text when the lines go to a terminal, JSON otherwise (a pipe, a file, a container)."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys

from noe_web.logs import resolve_format
from tests.support.paths import ROOT

SCRIPT = (
    "import logging, sys\n"
    "from noe_web.logs import configure_logging\n"
    "configure_logging('INFO', sys.argv[1])\n"
    "logging.getLogger('noe.demo').info('hello', extra={'fields': {'event': 'demo'}})\n"
)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_reads_the_stream() -> None:
    assert resolve_format("auto", _Terminal()) == "text"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("json", _Terminal()) == "json"
    assert resolve_format("text", io.StringIO()) == "text"


def _run(log_format: str, *, terminal: bool) -> str:
    """The line a fresh process logs, its standard output a real pseudo-terminal or a pipe."""
    args = [sys.executable, "-c", SCRIPT, log_format]
    if not terminal:
        return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(args, cwd=ROOT, stdout=follower, stderr=subprocess.DEVNULL, timeout=60, check=True)
        assert proc.returncode == 0
        os.close(follower)
        follower = -1
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the writer side is closed
                break
            if not chunk:
                break
            out += chunk
        return out.decode()
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_a_terminal_gets_text_and_a_pipe_gets_json() -> None:
    at_terminal = _run("auto", terminal=True).strip()
    assert " info noe.demo hello event=demo" in at_terminal and not at_terminal.startswith("{")
    piped = json.loads(_run("auto", terminal=False))
    assert (piped["level"], piped["logger"], piped["msg"], piped["event"]) == ("info", "noe.demo", "hello", "demo")
    forced = json.loads(_run("json", terminal=True).strip())
    assert forced["msg"] == "hello"
