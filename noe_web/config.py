"""``noe serve`` flags (each also a ``NOE_*`` environment variable) → :class:`ServeConfig`.

:meth:`ServeConfig.from_args` validates everything that can be checked before
the first request — addresses, numbers, files, the policy and registry
settings, the ``--image-platforms`` file, the kubeconfig — and raises
:class:`~noe_core.errors.InvalidSettings` with one line that names the flag.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noe_core.cli.options import add_option
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.errors import InvalidSettings
from noe_core.settings import PolicySettings

DEFAULT_BIND = "0.0.0.0:8443"
DEFAULT_METRICS_ADDR = ":8080"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
MAX_ADMISSION_DEADLINE = 29.0  # the API server's webhook timeout is at most 30 s
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]*):(?P<port>[0-9]{1,5})$")


def default_state_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "noe"


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Every ``noe serve`` flag: the service's own, then the policy and registry ones."""
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    group = parser.add_argument_group("webhook service")
    add_option(group, "--bind", default=DEFAULT_BIND, help="HOST:PORT the TLS webhook listens on")
    add_option(group, "--tls-cert-file", default="", help="serving certificate (PEM); with --tls-key-file")
    add_option(group, "--tls-key-file", default="", help="private key of --tls-cert-file (PEM)")
    add_option(group, "--cert-dir", default="",
               help="directory holding tls.crt and tls.key, e.g. a mounted cert-manager Secret (Noe's flag)")
    add_option(group, "--state-dir", default="",
               help="where the self-signed CA and certificate are kept when no certificate is given "
                    "[default $XDG_STATE_HOME/noe or ~/.local/state/noe]")
    add_option(group, "--metrics-addr", default=DEFAULT_METRICS_ADDR,
               help="HOST:PORT of the plain-HTTP Prometheus /metrics server; empty disables it (Noe's flag)")
    add_option(group, "--workers", default="2", help="gunicorn worker processes")
    add_option(group, "--threads", default="8", help="threads per worker (gthread)")
    add_option(group, "--graceful-timeout", default="10",
               help="seconds in-flight admissions get to finish on shutdown")
    add_option(group, "--kubeconfig", default="",
               help="kubeconfig for the Kubernetes API (pull secrets, Events); default: in-cluster service "
                    "account, or no API access")
    add_option(group, "--admission-deadline", default="5",
               help="seconds within which every admission is answered; lookups still running are abandoned "
                    "(keep it below the webhook's timeoutSeconds)")
    add_option(group, "--image-platforms", default="",
               help="JSON/YAML file of image (or glob) → platforms, consulted before the registry")
    add_option(group, "--pull-secret-cache-ttl", default="30",
               help="seconds a pull Secret read from the API is reused")
    add_option(group, "--event-queue-size", default="1000",
               help="Events waiting to be written before new ones are dropped (and counted)")
    add_option(group, "--max-body-bytes", default=str(3 * 1024 * 1024),
               help="largest AdmissionReview accepted (the API server sends at most 3 MiB objects)")
    add_option(group, "--control-socket", default="",
               help="path of gunicorn's control socket; empty (the default) creates none, as a read-only "
                    "root filesystem needs")
    add_option(group, "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    add_policy_arguments(parser)
    add_registry_arguments(parser)


def parse_host_port(text: str, flag: str) -> tuple[str, int]:
    """``0.0.0.0:8443``, ``:8443``, ``[::1]:8443`` → (host, port); empty host means all interfaces."""
    match = _HOST_PORT.match(text.strip())
    if not match:
        raise InvalidSettings(f"{flag} {text!r} must be HOST:PORT, e.g. 0.0.0.0:8443 or :8443")
    port = int(match["port"])
    if port > 65535:
        raise InvalidSettings(f"{flag} {text!r}: port {port} is above 65535")
    return match["host"].strip("[]"), port


def _number(value: Any, flag: str, *, minimum: float, maximum: float = math.inf, integer: bool = False) -> float:
    try:
        number = float(value) if not integer else int(str(value).strip())
    except (TypeError, ValueError):
        kind = "an integer" if integer else "a number"
        raise InvalidSettings(f"{flag} {value!r} is not {kind}") from None
    if not math.isfinite(number) or number < minimum or number > maximum:
        bound = f"between {minimum:g} and {maximum:g}" if maximum != math.inf else f"at least {minimum:g}"
        raise InvalidSettings(f"{flag} {value!r} must be {bound}")
    return number


def _file(value: str, flag: str) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise InvalidSettings(f"{flag} {value}: no such file")
    return path


@dataclass(frozen=True)
class ServeConfig:
    """The effective configuration of ``noe serve``, validated."""

    bind_host: str
    bind_port: int
    tls_cert_file: Path | None
    tls_key_file: Path | None
    state_dir: Path
    metrics_host: str | None
    metrics_port: int | None
    workers: int
    threads: int
    graceful_timeout: float
    kubeconfig: Path | None
    admission_deadline: float
    image_platforms: Path | None
    pull_secret_cache_ttl: float
    event_queue_size: int
    max_body_bytes: int
    control_socket: str
    log_level: str
    policy: PolicySettings
    registry: Any  # noe_core.registry_settings.RegistrySettings
    node_keychain: Any  # noe_core.credentials.keychain.Keychain | None
    args: argparse.Namespace

    @property
    def bind(self) -> str:
        host = f"[{self.bind_host}]" if ":" in self.bind_host else self.bind_host
        return f"{host}:{self.bind_port}"

    @property
    def metrics_enabled(self) -> bool:
        return self.metrics_port is not None

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> ServeConfig:
        from noe_core.cli.registry_options import (  # noqa: PLC0415
            node_keychain_from_args,
            registry_settings_from_args,
        )
        from noe_core.platforms_file import StaticPlatforms  # noqa: PLC0415

        bind_host, bind_port = parse_host_port(ns.bind or DEFAULT_BIND, "--bind")
        metrics_host: str | None = None
        metrics_port: int | None = None
        if (ns.metrics_addr or "").strip() not in ("", "0"):
            metrics_host, metrics_port = parse_host_port(ns.metrics_addr, "--metrics-addr")
            if metrics_port == bind_port and metrics_port != 0 and metrics_host in (bind_host, "", "0.0.0.0"):  # noqa: S104
                raise InvalidSettings(f"--metrics-addr {ns.metrics_addr} uses the port of --bind {ns.bind}")
        cert, key = _cert_pair(ns)
        deadline = _number(ns.admission_deadline, "--admission-deadline", minimum=0.1,
                           maximum=MAX_ADMISSION_DEADLINE)
        platforms = _file(ns.image_platforms, "--image-platforms")
        if platforms is not None:
            StaticPlatforms.load(platforms)  # raises InvalidSettings naming the bad entry
        kubeconfig = _file(ns.kubeconfig, "--kubeconfig")
        if kubeconfig is not None:
            from noe_web.kube import load_kubeconfig  # noqa: PLC0415

            load_kubeconfig(kubeconfig)
        level = str(ns.log_level or "INFO").upper()
        if level not in LOG_LEVELS:
            raise InvalidSettings(f"--log-level {ns.log_level!r} must be one of {', '.join(LOG_LEVELS)}")
        policy = policy_settings_from_args(ns)
        registry = registry_settings_from_args(ns)
        node_keychain = node_keychain_from_args(ns)
        return cls(
            bind_host=bind_host,
            bind_port=bind_port,
            tls_cert_file=cert,
            tls_key_file=key,
            state_dir=Path(ns.state_dir).expanduser() if ns.state_dir else default_state_dir(),
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            workers=int(_number(ns.workers, "--workers", minimum=1, maximum=64, integer=True)),
            threads=int(_number(ns.threads, "--threads", minimum=1, maximum=256, integer=True)),
            graceful_timeout=_number(ns.graceful_timeout, "--graceful-timeout", minimum=0, maximum=600),
            kubeconfig=kubeconfig,
            admission_deadline=deadline,
            image_platforms=platforms,
            pull_secret_cache_ttl=_number(ns.pull_secret_cache_ttl, "--pull-secret-cache-ttl", minimum=0,
                                          maximum=3600),
            event_queue_size=int(_number(ns.event_queue_size, "--event-queue-size", minimum=1,
                                         maximum=1_000_000, integer=True)),
            max_body_bytes=int(_number(ns.max_body_bytes, "--max-body-bytes", minimum=1024,
                                       maximum=64 * 1024 * 1024, integer=True)),
            control_socket=str(ns.control_socket or ""),
            log_level=level,
            policy=policy,
            registry=registry,
            node_keychain=node_keychain,
            args=ns,
        )

    def describe(self) -> dict[str, Any]:
        """The effective configuration for the start-up line: paths and values, never a secret."""
        return {
            "bind": self.bind,
            "tls_cert_file": str(self.tls_cert_file) if self.tls_cert_file else None,
            "tls_key_file": str(self.tls_key_file) if self.tls_key_file else None,
            "metrics_addr": f"{self.metrics_host or ''}:{self.metrics_port}" if self.metrics_enabled else "",
            "workers": self.workers,
            "threads": self.threads,
            "admission_deadline": self.admission_deadline,
            "image_platforms": str(self.image_platforms) if self.image_platforms else None,
            "kubeconfig": str(self.kubeconfig) if self.kubeconfig else None,
            "pull_secret_cache_ttl": self.pull_secret_cache_ttl,
            "event_queue_size": self.event_queue_size,
            "max_body_bytes": self.max_body_bytes,
            "log_level": self.log_level,
            "policy": _plain(self.policy),
            "registry": _plain(self.registry, skip=("extra",)),
        }


def _plain(value: Any, skip: tuple[str, ...] = ()) -> Any:
    """A JSON-friendly view of a frozen settings dataclass (sets sorted, tuples as lists)."""
    import dataclasses  # noqa: PLC0415

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name not in skip and "password" not in f.name and "token" not in f.name
        }
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _cert_pair(ns: argparse.Namespace) -> tuple[Path | None, Path | None]:
    cert_flag, key_flag, cert_dir = ns.tls_cert_file or "", ns.tls_key_file or "", ns.cert_dir or ""
    if cert_dir and (cert_flag or key_flag):
        raise InvalidSettings("--cert-dir and --tls-cert-file/--tls-key-file are alternatives: give one")
    if cert_dir:
        directory = Path(cert_dir).expanduser()
        if not directory.is_dir():
            raise InvalidSettings(f"--cert-dir {cert_dir}: no such directory")
        cert, key = directory / "tls.crt", directory / "tls.key"
    elif cert_flag or key_flag:
        if not (cert_flag and key_flag):
            raise InvalidSettings("--tls-cert-file and --tls-key-file go together: give both")
        cert, key = Path(cert_flag).expanduser(), Path(key_flag).expanduser()
    else:
        return None, None
    from noe_web.tls import check_pair  # noqa: PLC0415

    check_pair(cert, key)
    return cert, key
