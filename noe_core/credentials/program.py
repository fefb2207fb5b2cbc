"""Running a credential program: the one way noe starts a subprocess.

Kubelet credential providers (:mod:`noe_core.credentials.provider`) and
kubeconfig ``exec`` plugins (``noe_web.kube.exec_plugin``) both hand a program
the job of printing a secret. Whatever the program does, :func:`run_program`
keeps noe safe from it:

* it runs in its own process group, and at the timeout the whole group is
  killed, so a helper it forked cannot outlive it or hold our pipes open;
* what it prints is capped: standard output past ``max_stdout`` bytes kills it
  (a response is small; a flood is a broken program), and only the last
  ``max_stderr`` bytes of standard error are kept;
* messages never carry standard output (where credentials travel); standard
  error reaches them only through :meth:`Finished.excerpt`: its last line,
  token-like runs redacted, printable and short.

A program that cannot be started, outlives its timeout or floods its output
raises :class:`~noe_core.errors.ProgramFailed`; one that exits with a status
other than 0 is returned (:attr:`Finished.status` says how it ended), since
what that means is the caller's protocol.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from noe_core.errors import ProgramFailed, ProgramTimedOut

MAX_STDOUT_BYTES: Final = 1 << 20
MAX_STDERR_BYTES: Final = 64 << 10
EXCERPT_CHARS: Final = 200
_READ = 1 << 16

# Runs of token-like characters long enough to be a key, a token or a password.
_SECRET_LIKE = re.compile(r"[A-Za-z0-9+/=_\-.~]{24,}")


@dataclass(frozen=True)
class Finished:
    """A program that ran to its end: its exit status and what it printed (never shown in a repr)."""

    returncode: int
    stdout: bytes = field(repr=False)
    stderr: bytes = field(repr=False)

    @property
    def status(self) -> str:
        """How it ended, for messages: ``exited with status 1``, ``was killed by signal 9``."""
        if self.returncode < 0:
            return f"was killed by signal {-self.returncode}"
        return f"exited with status {self.returncode}"

    def excerpt(self, limit: int = EXCERPT_CHARS) -> str:
        """The last line of standard error, safe to log: token-like runs redacted, printable, at most ``limit``."""
        return stderr_excerpt(self.stderr, limit)


def stderr_excerpt(stderr: bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short excerpt of a program's standard error that is safe to show (see :meth:`Finished.excerpt`)."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return ""
    excerpt = _SECRET_LIKE.sub("<redacted>", lines[-1])
    excerpt = "".join(char if char.isprintable() else "?" for char in excerpt)
    if len(excerpt) > limit:
        excerpt = excerpt[:limit] + "…"
    return excerpt


def run_program(
    argv: Sequence[str],
    *,
    name: str,
    timeout: float,
    env: Mapping[str, str],
    stdin: bytes = b"",
    max_stdout: int = MAX_STDOUT_BYTES,
    max_stderr: int = MAX_STDERR_BYTES,
) -> Finished:
    """Run ``argv`` with ``stdin`` and ``env`` for at most ``timeout`` seconds; ``name`` names it in errors.

    Raises :class:`ProgramFailed` when it cannot be started (the ``OSError`` is
    the cause) or prints more than ``max_stdout`` bytes, and
    :class:`ProgramTimedOut` when it (or anything it started that holds its
    output open) is still running at the timeout; either way its process group
    has been killed.
    """
    started = time.monotonic()
    end = started + max(timeout, 0.0)
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise ProgramFailed(f"{name} could not be started: {exc.strerror or type(exc).__name__}") from exc
    with process:
        try:
            stdout, stderr = _exchange(process, stdin, end, max_stdout, max_stderr)
        except _Flooded:
            _kill_group(process)
            raise ProgramFailed(
                f"{name} printed more than {max_stdout} bytes on standard output and was killed"
            ) from None
        if stdout is None:
            _kill_group(process)
            raise ProgramTimedOut(f"{name} did not finish within {timeout:g}s; its process group was killed")
        try:
            returncode = process.wait(timeout=max(end - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise ProgramTimedOut(f"{name} did not finish within {timeout:g}s; its process group was killed") from None
    return Finished(returncode, stdout, stderr)


class _Flooded(Exception):
    """Standard output went past its cap."""


def _exchange(
    process: subprocess.Popen[bytes], data: bytes, end: float, max_stdout: int, max_stderr: int
) -> tuple[bytes | None, bytes]:
    """Write ``data`` to stdin, read stdout and stderr to their end; ``(None, …)`` when ``end`` came first."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    out, err = bytearray(), bytearray()
    pending = memoryview(data)
    with selectors.DefaultSelector() as selector:
        if pending:
            os.set_blocking(process.stdin.fileno(), False)
            selector.register(process.stdin, selectors.EVENT_WRITE)
        else:
            process.stdin.close()
        selector.register(process.stdout, selectors.EVENT_READ, out)
        selector.register(process.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            left = end - time.monotonic()
            if left <= 0:
                return None, bytes(err)
            for key, _ in selector.select(left):
                if key.fileobj is process.stdin:
                    try:
                        written = os.write(key.fd, pending[:_READ])
                    except BrokenPipeError:
                        written = len(pending)  # it stopped reading: what it needed, it has
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(process.stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, _READ)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer: bytearray = key.data
                buffer += chunk
                if buffer is out and len(out) > max_stdout:
                    raise _Flooded
                if buffer is err and len(err) > max_stderr:
                    del err[: len(err) - max_stderr]
    return bytes(out), bytes(err)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the program's whole process group (its own pid: it leads a new session), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # the kernel reaps a SIGKILLed child at once
        process.wait(timeout=2.0)
