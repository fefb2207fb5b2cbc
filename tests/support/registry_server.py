"""A real registry server (CNCF distribution, Debian ``docker-registry``) for tests.

    with start_registry(tmp_path, auth="basic", htpasswd_users={"alice": "pw"}) as reg:
        reg.url            # "http://127.0.0.1:PORT" (https when tls= is given)
        reg.host           # "127.0.0.1:PORT", the registry part of an image reference
        m = reg.mark()
        ...                # the code under test talks to reg
        reg.requests_since(m)                      # [AccessEntry("GET", "/v2/", 401, ...), ...]
        reg.count(method="GET", path_contains="/manifests/", since=m)

Counting comes from the registry's own access log, which it writes *after*
answering. ``mark()`` and ``requests_since()`` therefore first settle the log: they send
one sentinel request (user agent ``noe-test-sentinel/...``), wait until its line has
arrived and the log has been quiet for a moment, so that every request answered
before the call is counted and none is missed. Sentinel lines and the traffic of
``tests.support.images`` (user agent ``noe-test-pusher/...``) are left out unless
``include_test_traffic=True``.

Every server listens on 127.0.0.1 only, on a free port, with its own JSON config
(JSON is YAML) and storage under the given work directory; ``REGISTRY_*`` variables
are removed from its environment because they would override the config.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

import bcrypt
import requests

from tests.support.certs import CertPair

if TYPE_CHECKING:
    from tests.support.token_server import TokenServer

__all__ = [
    "PUSHER_USER_AGENT",
    "SENTINEL_USER_AGENT",
    "AccessEntry",
    "RegistryNotInstalled",
    "RegistryServer",
    "RegistryStartError",
    "registry_binary",
    "start_registry",
]

AuthMode = Literal["none", "basic", "token"]

PUSHER_USER_AGENT = "noe-test-pusher/1"
SENTINEL_USER_AGENT = "noe-test-sentinel/1"
TEST_USER_AGENTS = ("noe-test-pusher/", "noe-test-sentinel/")

_INSTALL_HINT = "run `python -m tests.support.system_deps` (as root) to install the Debian packages"

# gorilla/handlers combined log format, as written by the registry to stdout:
# 127.0.0.1 - - [02/Dec/2025:10:00:00 +0000] "GET /v2/ HTTP/1.1" 401 87 "" "python-requests/2.32"
_ACCESS_LINE = re.compile(
    r'^(?P<remote>\S+) \S+ (?P<user>\S+) \[[^\]]*\] "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" '
    r'(?P<status>\d{3}) (?P<size>\S+)(?: "(?P<referer>[^"]*)" "(?P<agent>[^"]*)")?'
)


class RegistryNotInstalled(RuntimeError):
    """The registry binary is missing: the tests cannot run, and must not skip silently."""


class RegistryStartError(RuntimeError):
    """The registry process did not become ready."""


@dataclass(frozen=True)
class AccessEntry:
    """One request as the registry logged it."""

    method: str
    path: str
    status: int
    user_agent: str = ""

    @property
    def is_test_traffic(self) -> bool:
        """Requests made by the test infrastructure itself (pushes, log sentinels)."""
        return self.user_agent.startswith(TEST_USER_AGENTS)


def registry_binary() -> str:
    """Path of ``docker-registry``; raises :class:`RegistryNotInstalled` with the fix when absent."""
    found = shutil.which("docker-registry", path=os.environ.get("PATH", "") + os.pathsep + "/usr/bin")
    if not found:
        raise RegistryNotInstalled(f"`docker-registry` (CNCF distribution) is not installed: {_INSTALL_HINT}")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}


class RegistryServer:
    """A running ``docker-registry serve`` process; build it with :func:`start_registry`."""

    def __init__(
        self,
        *,
        workdir: Path,
        auth: AuthMode,
        tls: CertPair | None,
        htpasswd_users: Mapping[str, str],
        token: TokenServer | None,
    ) -> None:
        self.workdir = workdir
        self.auth: AuthMode = auth
        self.tls = tls
        self.users: dict[str, str] = dict(htpasswd_users)
        self.token_server = token
        self.port = 0
        self.config_file = workdir / "config.json"
        self.storage_dir = workdir / "storage"
        self._proc: subprocess.Popen[str] | None = None
        self._threads: list[threading.Thread] = []
        self._cond = threading.Condition()
        self._log: list[str] = []  # every output line, both streams, in arrival order
        self._entries: list[AccessEntry] = []
        self._last_line_at = 0.0
        self.start_attempts = 0

    # -- what tests read -------------------------------------------------------------

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def ca_file(self) -> Path | None:
        """The CA that signed the serving certificate (None over plain HTTP)."""
        return self.tls.ca_file if self.tls else None

    @property
    def cert_dir(self) -> Path | None:
        """A directory holding only ``ca.crt``, for ``skopeo --cert-dir`` (None over plain HTTP)."""
        if not self.tls:
            return None
        d = self.workdir / "trust"
        if not (d / "ca.crt").exists():
            d.mkdir(exist_ok=True)
            shutil.copyfile(self.tls.ca_file, d / "ca.crt")
        return d

    @property
    def verify(self) -> str | bool:
        """The ``verify=`` value for a ``requests`` session (with ``trust_env = False``)."""
        return str(self.tls.ca_file) if self.tls else True

    @property
    def token_verify(self) -> str | bool:
        """The ``verify=`` value for requests to the token service's realm."""
        ca = self.token_server.ca_file if self.token_server else None
        return str(ca) if ca else True

    @property
    def push_credentials(self) -> tuple[str, str] | None:
        """Username and password allowed to push (None for an anonymous registry)."""
        if self.auth == "basic":
            user = next(iter(self.users))
            return user, self.users[user]
        if self.auth == "token":
            assert self.token_server is not None
            return self.token_server.admin
        return None

    @property
    def log_lines(self) -> list[str]:
        """Everything the registry printed so far (for failure messages)."""
        with self._cond:
            return list(self._log)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def ref(self, repository: str, tag_or_digest: str = "latest") -> str:
        """``host/repository:tag`` or ``host/repository@sha256:...``."""
        sep = "@" if tag_or_digest.startswith("sha256:") else ":"
        return f"{self.host}/{repository}{sep}{tag_or_digest}"

    # -- request counting ------------------------------------------------------------

    def mark(self) -> int:
        """Settle the access log and return a position; requests answered later come after it."""
        self._settle()
        with self._cond:
            return len(self._entries)

    def requests_since(
        self,
        mark: int = 0,
        *,
        method: str | None = None,
        path_contains: str | None = None,
        include_test_traffic: bool = False,
    ) -> list[AccessEntry]:
        """Requests logged after *mark*, in order, optionally filtered."""
        self._settle()
        with self._cond:
            entries = self._entries[mark:]
        return [
            e
            for e in entries
            if (include_test_traffic or not e.is_test_traffic)
            and (method is None or e.method == method.upper())
            and (path_contains is None or path_contains in e.path)
        ]

    def count(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        since: int = 0,
        *,
        include_test_traffic: bool = False,
    ) -> int:
        """How many requests matched since *since* (a value from :meth:`mark`)."""
        return len(
            self.requests_since(
                since, method=method, path_contains=path_contains, include_test_traffic=include_test_traffic
            )
        )

    def _settle(self, quiet: float = 0.03, timeout: float = 10.0) -> None:
        token = uuid.uuid4().hex
        with self._cond:
            start = len(self._entries)
        with requests.Session() as s:
            s.trust_env = False
            s.headers["User-Agent"] = f"{SENTINEL_USER_AGENT} {token}"
            with s.get(f"{self.url}/v2/", verify=self.verify, timeout=5):
                pass
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(token in e.user_agent for e in self._entries[start:]):
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    raise RegistryStartError(f"the registry did not log the sentinel request {token}")
                self._cond.wait(left)
            while (idle := time.monotonic() - self._last_line_at) < quiet:
                self._cond.wait(quiet - idle)

    # -- process ---------------------------------------------------------------------

    def _config(self, port: int) -> dict[str, object]:
        http: dict[str, object] = {
            "addr": f"127.0.0.1:{port}",
            "secret": secrets.token_hex(16),
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        }
        if self.tls:
            http["tls"] = {"certificate": str(self.tls.cert_file), "key": str(self.tls.key_file)}
        config: dict[str, object] = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage_dir)},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
                "cache": {"blobdescriptor": "inmemory"},
            },
            "http": http,
            "health": {"storagedriver": {"enabled": False}},
        }
        if self.auth == "basic":
            if not self.users:
                raise ValueError("auth='basic' needs htpasswd_users")
            htpasswd = self.workdir / "htpasswd"
            htpasswd.write_text(
                "".join(
                    f"{user}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"
                    for user, pw in self.users.items()
                )
            )
            config["auth"] = {"htpasswd": {"realm": "noe-test-registry", "path": str(htpasswd)}}
        elif self.auth == "token":
            if self.token_server is None:
                raise ValueError("auth='token' needs token=TokenServer")
            ts = self.token_server
            config["auth"] = {
                "token": {
                    "realm": ts.realm,
                    "service": ts.service,
                    "issuer": ts.issuer,
                    "rootcertbundle": str(ts.root_cert_file),
                }
            }
        elif self.auth != "none":
            raise ValueError(f"unknown auth mode {self.auth!r}")
        return config

    def _start(self, attempts: int = 8, timeout: float = 15.0) -> None:
        binary = registry_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage_dir.mkdir(exist_ok=True)
        failure = ""
        for attempt in range(1, attempts + 1):
            self.start_attempts = attempt
            port = _free_port()
            self.config_file.write_text(json.dumps(self._config(port), indent=2))
            self._launch(binary)
            outcome = self._wait_listening(timeout)
            if outcome == "ready":
                self.port = port
                self._wait_answering(timeout)
                return
            failure = "\n".join(self.log_lines[-20:])
            self._stop_process()
            if outcome != "in-use":
                break
        raise RegistryStartError(f"docker-registry did not start ({self.config_file}):\n{failure}")

    def _launch(self, binary: str) -> None:
        with self._cond:
            self._log.clear()
            self._entries.clear()
        self._proc = subprocess.Popen(
            [binary, "serve", str(self.config_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=_child_env(),
            cwd=self.workdir,
        )
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._drain, args=(stream,), name=f"registry-{name}", daemon=True)
            for name, stream in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr))
        ]
        for t in self._threads:
            t.start()

    def _drain(self, stream: IO[str]) -> None:
        for raw in stream:
            line = raw.rstrip("\n")
            match = _ACCESS_LINE.match(line)
            with self._cond:
                self._log.append(line)
                if match:
                    self._entries.append(
                        AccessEntry(
                            method=match["method"],
                            path=match["path"],
                            status=int(match["status"]),
                            user_agent=match["agent"] or "",
                        )
                    )
                self._last_line_at = time.monotonic()
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _wait_listening(self, timeout: float) -> Literal["ready", "in-use", "failed"]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                text = "\n".join(self._log)
                if "address already in use" in text:
                    return "in-use"
                if "listening on" in text:
                    return "ready"
                left = deadline - time.monotonic()
                if left <= 0 or (self._proc is not None and self._proc.poll() is not None):
                    if self._proc is not None and self._proc.poll() is not None:
                        # let the drain threads read the last words
                        self._cond.wait(0.2)
                        if "address already in use" in "\n".join(self._log):
                            return "in-use"
                    return "failed"
                self._cond.wait(min(left, 0.05))

    def _wait_answering(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with requests.Session() as s:
            s.trust_env = False
            s.headers["User-Agent"] = SENTINEL_USER_AGENT
            while True:
                try:
                    with s.get(f"{self.url}/v2/", verify=self.verify, timeout=2):
                        return
                except requests.ConnectionError:
                    if time.monotonic() > deadline or not self.running:
                        raise
                    time.sleep(0.02)

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    def stop(self) -> None:
        self._stop_process()

    def __repr__(self) -> str:
        return f"<RegistryServer {self.url} auth={self.auth}>"


@contextlib.contextmanager
def start_registry(
    workdir: Path,
    *,
    auth: AuthMode = "none",
    tls: CertPair | None = None,
    htpasswd_users: Mapping[str, str] | None = None,
    token: TokenServer | None = None,
) -> Iterator[RegistryServer]:
    """Run a registry for the duration of the ``with`` block; storage lives under *workdir*."""
    server = RegistryServer(workdir=workdir, auth=auth, tls=tls, htpasswd_users=htpasswd_users or {}, token=token)
    server._start()
    try:
        yield server
    finally:
        server.stop()
