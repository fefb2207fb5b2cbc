"""Debian's ``redis-server`` on 127.0.0.1, one per test or module, with a password.

:func:`start_redis` runs ``redis-server --port P --save '' --appendonly no --requirepass …`` in
its own directory (nothing persisted), waits for ``PING``, and yields a :class:`RedisServer`
that can be frozen (``SIGSTOP``: it keeps accepting connections and never answers), thawed,
killed mid-run and started again on the same port. :func:`silent_listener` is a TCP port that
accepts and never says a word. :meth:`RedisServer.dump` reads every key and value back, so a
test can look for a credential in any of them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

REDIS_BINARY = "redis-server"
_INSTALL_HINT = "run `python -m tests.support.system_deps` (as root) to install Debian's redis-server"


class RedisNotInstalled(RuntimeError):
    """``redis-server`` is not on PATH."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RedisServer:
    """A running ``redis-server``; :meth:`stop` ends it."""

    directory: Path
    password: str = field(default_factory=lambda: "rp-" + secrets.token_hex(12))
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    config: Path | None = None
    """A configuration file to run instead of the test settings (then only port, bind and dir are given)."""

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def client(self, timeout: float = 5.0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=timeout)

    def start(self) -> None:
        """Start it (again, on the same port after :meth:`kill`); waits until it answers ``PING``."""
        binary = shutil.which(REDIS_BINARY, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin"]))
        if binary is None:
            raise RedisNotInstalled(f"{REDIS_BINARY} not found: {_INSTALL_HINT}")
        self.directory.mkdir(parents=True, exist_ok=True)
        for _attempt in range(5):
            port = self.port or _free_port()
            log = (self.directory / "redis.log").open("ab")
            settings = ["--save", "", "--appendonly", "no", "--requirepass", self.password]
            self.proc = subprocess.Popen(
                [
                    binary,
                    *([str(self.config)] if self.config is not None else settings),
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.directory),
                    "--daemonize",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
            )
            log.close()
            self.port = port
            if self._wait_ready():
                return
            self.proc.kill()
            self.proc.wait(10)
        raise RuntimeError(f"redis-server did not start; see {self.directory / 'redis.log'}")

    def _wait_ready(self, timeout: float = 10.0) -> bool:
        assert self.proc is not None
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if self.proc.poll() is not None:
                return False  # e.g. the port was taken meanwhile
            with contextlib.suppress(redis.RedisError), self.client(0.5) as client:
                if client.ping():
                    return True
            time.sleep(0.02)
        return False

    def freeze(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel, nothing is ever answered."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crashed or evicted Redis: everything it held is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        self.kill()

    def dump(self) -> list[tuple[bytes, bytes]]:
        """Every key and every value it holds (hash fields and values, set members, strings)."""
        found: list[tuple[bytes, bytes]] = []
        with self.client() as client:
            for key in client.scan_iter(count=1000):
                kind = client.type(key)
                if kind == b"string":
                    found.append((key, client.get(key) or b""))
                elif kind == b"hash":
                    for name, value in client.hgetall(key).items():
                        found.append((key, name + b"=" + value))
                elif kind == b"zset":
                    for member in client.zrange(key, 0, -1):
                        found.append((key, member))
                else:
                    found.append((key, kind))
        return found


@contextlib.contextmanager
def start_redis(directory: Path, *, password: str | None = None) -> Iterator[RedisServer]:
    server = RedisServer(directory) if password is None else RedisServer(directory, password)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A port on 127.0.0.1 that completes TCP handshakes (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])
