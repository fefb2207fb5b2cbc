"""Kubeconfig ``exec`` credential plugins (``client.authentication.k8s.io/v1``), as kubectl runs them.

EKS (``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``) and AKS
(``kubelogin``) kubeconfigs name a program that prints an ``ExecCredential``
JSON document with a bearer token and, usually, its ``expirationTimestamp``.
:class:`ExecCredentialSource` runs it when a token is first needed, keeps the
token until that timestamp (for the process' life when there is none), and
runs it again early when the API server answers 401 (``refresh``).

The program gets the process environment plus the kubeconfig's ``env``
entries, and ``KUBERNETES_EXEC_INFO`` describing a non-interactive call, as
the protocol says. noe never runs interactively: a plugin that requires it
(``interactiveMode: Always``) is refused when the kubeconfig is read.
It runs through :func:`noe_core.credentials.program.run_program`, as kubelet
credential providers do: a plugin still running after ``timeout`` (60 s) has
its whole process group killed, one printing more than 1 MiB is killed, and
only a redacted excerpt of its standard error reaches a message. Tokens never
reach a log line or an error message.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noe_core.credentials.program import run_program
from noe_core.errors import InvalidSettings, ProgramFailed

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
DEFAULT_TIMEOUT = 60.0
MAX_OUTPUT = 1 << 20
"""An ExecCredential is a few kilobytes; a plugin printing more than this is killed."""
_STDERR_CHARS = 300


class ExecCredentialError(Exception):
    """The plugin could not be run or did not print a usable credential; the message says which and why."""


@dataclass(frozen=True)
class ExecPlugin:
    """The ``user.exec`` section of a kubeconfig, validated."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_version: str = API_VERSIONS[0]
    install_hint: str = ""
    provide_cluster_info: bool = False
    base: Path = Path(".")

    @classmethod
    def parse(cls, body: Mapping[str, Any], where: str, base: Path) -> ExecPlugin:
        """Read ``user.exec``; *where* names it in errors (``kubeconfig user 'eks'``)."""
        command = body.get("command")
        if not isinstance(command, str) or not command:
            raise InvalidSettings(f"{where}: exec has no command")
        api_version = body.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise InvalidSettings(f"{where}: exec apiVersion {api_version!r} is not supported; use {API_VERSIONS[0]}")
        args = body.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise InvalidSettings(f"{where}: exec args must be a list of strings")
        env_items = body.get("env") or []
        if not isinstance(env_items, list):
            raise InvalidSettings(f"{where}: exec env must be a list of name/value pairs")
        env: list[tuple[str, str]] = []
        for item in env_items:
            if not (
                isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)
            ):
                raise InvalidSettings(f"{where}: exec env must be a list of name/value pairs")
            env.append((item["name"], item["value"]))
        if body.get("interactiveMode") == "Always":
            raise InvalidSettings(
                f"{where}: the exec plugin {command} requires an interactive terminal (interactiveMode: Always), "
                "which noe never has; log in first or use a plugin mode that does not prompt"
            )
        hint = body.get("installHint")
        return cls(
            command=command,
            args=tuple(args),
            env=tuple(env),
            api_version=api_version,
            install_hint=hint.strip() if isinstance(hint, str) else "",
            provide_cluster_info=body.get("provideClusterInfo") is True,
            base=base,
        )

    def executable(self) -> str:
        """kubectl's rule: a command with a path separator is relative to the kubeconfig's directory."""
        if os.sep in self.command and not os.path.isabs(self.command):
            return str(self.base / self.command)
        found = shutil.which(self.command)
        if found is None and os.sep not in self.command:
            hint = f" ({self.install_hint})" if self.install_hint else ""
            raise ExecCredentialError(f"exec credential plugin {self.command!r} not found on PATH{hint}")
        return found or self.command


@dataclass(frozen=True)
class _Credential:
    token: str = field(repr=False)
    expires: float | None  # epoch seconds; None: no expiry given


def _parse_time(text: str) -> float:
    """RFC 3339 (``2026-01-02T03:04:05Z``, fractions and offsets allowed) to epoch seconds."""
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise ExecCredentialError(f"expirationTimestamp {text!r} is not an RFC 3339 time") from exc
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


class ExecCredentialSource:
    """A token from an exec plugin, cached until its ``expirationTimestamp``; thread-safe."""

    def __init__(
        self,
        plugin: ExecPlugin,
        *,
        server: str,
        ca_pem: str | None = None,
        insecure: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.plugin = plugin
        self._server, self._ca_pem, self._insecure = server, ca_pem, insecure
        self._timeout = timeout
        self._clock = clock
        self._cached: _Credential | None = None
        self._lock = threading.Lock()

    def token(self, *, refresh: bool = False) -> str:
        """The current token; runs the plugin when none is cached, it expired, or *refresh* is asked."""
        with self._lock:
            cached = self._cached
            fresh = cached is not None and (cached.expires is None or cached.expires > self._clock())
            if cached is None or refresh or not fresh:
                cached = self._cached = self._run()
            return cached.token

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self.plugin.provide_cluster_info:
            cluster: dict[str, Any] = {"server": self._server, "insecure-skip-tls-verify": self._insecure}
            if self._ca_pem:
                cluster["certificate-authority-data"] = base64.b64encode(self._ca_pem.encode()).decode()
            spec["cluster"] = cluster
        return json.dumps({"apiVersion": self.plugin.api_version, "kind": "ExecCredential", "spec": spec})

    def _run(self) -> _Credential:
        plugin = self.plugin
        env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": self._exec_info()}
        name = f"exec credential plugin {plugin.command!r}"
        try:
            # The kubeconfig's owner chose this program, as kubectl would run it; noe_core runs every
            # credential program alike: own process group killed at the timeout, output capped.
            finished = run_program(
                [plugin.executable(), *plugin.args], name=name, timeout=self._timeout, env=env, max_stdout=MAX_OUTPUT
            )
        except ProgramFailed as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                hint = f" ({plugin.install_hint})" if plugin.install_hint else ""
                raise ExecCredentialError(f"{name} not found{hint}") from None
            if isinstance(exc.__cause__, PermissionError):
                raise ExecCredentialError(f"{name} is not executable") from None
            raise ExecCredentialError(str(exc)) from None
        if finished.returncode != 0:
            said = finished.excerpt(_STDERR_CHARS)
            code = finished.returncode
            ended = f"exit {code}" if code >= 0 else f"killed by signal {-code}"
            raise ExecCredentialError(f"{name} failed ({ended})" + (f": {said}" if said else ""))
        return self._parse(finished.stdout)

    def _parse(self, out: bytes) -> _Credential:
        name = self.plugin.command
        try:
            doc = json.loads(out)
        except ValueError as exc:
            raise ExecCredentialError(f"exec credential plugin {name!r} printed no ExecCredential JSON") from exc
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise ExecCredentialError(f"exec credential plugin {name!r} printed no ExecCredential JSON")
        if doc.get("apiVersion") != self.plugin.api_version:
            raise ExecCredentialError(
                f"exec credential plugin {name!r} answered apiVersion {doc.get('apiVersion')!r}, "
                f"not the {self.plugin.api_version} the kubeconfig asked for"
            )
        status = doc.get("status")
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            if isinstance(status, dict) and status.get("clientCertificateData"):
                raise ExecCredentialError(
                    f"exec credential plugin {name!r} gave a client certificate; noe takes tokens from plugins only"
                )
            raise ExecCredentialError(f"exec credential plugin {name!r} gave no token in status.token")
        expiry = status.get("expirationTimestamp") if isinstance(status, dict) else None
        if expiry is not None and not isinstance(expiry, str):
            raise ExecCredentialError(f"exec credential plugin {name!r}: expirationTimestamp must be a string")
        return _Credential(token=token, expires=_parse_time(expiry) if expiry else None)
