"""``noe serve`` flags (each also a ``NOE_*`` environment variable) → :class:`ServeConfig`.

:mod:`noe_web.commands.flags` declares the flags and their value parsers, so a bad
address, number or name is a usage error before this module runs.
:meth:`ServeConfig.from_args` checks what needs the machine or several flags —
files exist, the TLS pair loads, ports differ, the ``--image-platforms`` file
and the kubeconfig parse, the policy and registry settings agree — and raises
:class:`~noe_core.errors.InvalidSettings` with one line that names the flag.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noe_core.cli.flags import IMAGE_PLATFORMS, POLICY_FILE
from noe_core.cli.parser import add_flags, require, usage_error
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.errors import InvalidSettings
from noe_core.policies.settings import PolicySettings
from noe_web.commands.flags import BIND, CERT_DIR, SERVE_FLAGS, TLS_CERT_FILE, TLS_KEY_FILE
from noe_web.flags import KUBECONFIG, METRICS_ADDR
from noe_web.tracing.config import TRACING_OFF, TracingConfig, read_tracing


def default_state_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "noe"


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Every ``noe serve`` flag: the service's own, then the policy and registry ones."""
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    add_flags(parser.add_argument_group("webhook service"), SERVE_FLAGS)
    add_policy_arguments(parser)
    add_flags(parser.add_argument_group("placement policies"), (POLICY_FILE,))
    add_registry_arguments(parser)


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
    on_lookup_failure: str
    image_platforms: Path | None
    pull_secret_cache_ttl: float
    pull_secrets_hint: str
    event_queue_size: int
    max_body_bytes: int
    control_socket: str
    log_level: str
    log_format: str
    policy: PolicySettings
    registry: Any  # noe_core.registry.settings.RegistrySettings
    node_keychain: Any  # noe_core.credentials.keychain.Keychain | None
    shared_cache: Any  # noe_web.registry_cache.SharedCacheConfig | None
    args: argparse.Namespace
    policy_files: tuple[str, ...] = ()
    policy_documents: Any = None  # noe_core.policies.documents.PolicyDocuments, read from policy_files
    tracing: TracingConfig = TRACING_OFF
    """From the standard ``OTEL_*`` variables (noe has no tracing flag)."""
    noe_namespace: str = ""
    """Where ``noe-learned-platforms`` lives (empty: the service account's namespace, else ``default``)."""
    context: str = ""
    """``--context``: the kubeconfig context (empty: its current-context)."""

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
        from noe_core.image.declared import StaticPlatforms  # noqa: PLC0415

        bind_host, bind_port = ns.bind
        metrics_host: str | None = None
        metrics_port: int | None = None
        if ns.metrics_addr is not None:
            metrics_host, metrics_port = ns.metrics_addr
            if metrics_port == bind_port and metrics_port != 0 and metrics_host in (bind_host, "", "0.0.0.0"):  # noqa: S104
                raise InvalidSettings(
                    f"{METRICS_ADDR.name} {metrics_host}:{metrics_port} uses the port of {BIND.name} "
                    f"{bind_host}:{bind_port}"
                )
        cert, key = _cert_pair(ns)
        platforms = require(ns, IMAGE_PLATFORMS)
        if platforms is not None:
            StaticPlatforms.load(platforms)  # raises InvalidSettings naming the bad entry
        kubeconfig = require(ns, KUBECONFIG)
        if kubeconfig is not None:
            from noe_web.kube.config import load_kubeconfig  # noqa: PLC0415

            load_kubeconfig(kubeconfig, ns.context or None)
        policy = policy_settings_from_args(ns)
        registry = registry_settings_from_args(ns)
        node_keychain = node_keychain_from_args(ns)
        from noe_web.registry_cache import shared_cache_config  # noqa: PLC0415

        shared_cache = shared_cache_config(ns)
        if shared_cache is not None and shared_cache.timeout * 2 > ns.admission_deadline:
            raise InvalidSettings(
                f"--cache-timeout {shared_cache.timeout:g} must be at most half of --admission-deadline "
                f"{ns.admission_deadline:g}: a Redis that stops answering must leave time for the registry"
            )
        policy_files = tuple(str(path) for path in ns.policy or ())
        documents = None
        if policy_files:
            from noe_core.policies.documents import read_files  # noqa: PLC0415

            documents = read_files(policy_files)  # unreadable files stop start-up; invalid policies are said
        return cls(
            bind_host=bind_host,
            bind_port=bind_port,
            tls_cert_file=cert,
            tls_key_file=key,
            state_dir=ns.state_dir or default_state_dir(),
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            workers=ns.workers,
            threads=ns.threads,
            graceful_timeout=ns.graceful_timeout,
            kubeconfig=kubeconfig,
            admission_deadline=ns.admission_deadline,
            on_lookup_failure=ns.on_lookup_failure,
            image_platforms=platforms,
            pull_secret_cache_ttl=ns.pull_secret_cache_ttl,
            pull_secrets_hint=ns.pull_secrets_hint,
            event_queue_size=ns.event_queue_size,
            max_body_bytes=ns.max_body_bytes,
            control_socket=str(ns.control_socket or ""),
            log_level=ns.log_level,
            log_format=ns.log_format,
            policy=policy,
            registry=registry,
            node_keychain=node_keychain,
            shared_cache=shared_cache,
            args=ns,
            policy_files=policy_files,
            policy_documents=documents,
            tracing=read_tracing(os.environ),
            noe_namespace=ns.noe_namespace,
            context=ns.context,
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
            "on_lookup_failure": self.on_lookup_failure,
            "image_platforms": str(self.image_platforms) if self.image_platforms else None,
            "kubeconfig": str(self.kubeconfig) if self.kubeconfig else None,
            "context": self.context or None,
            "pull_secret_cache_ttl": self.pull_secret_cache_ttl,
            "pull_secrets_hint": self.pull_secrets_hint,
            "event_queue_size": self.event_queue_size,
            "max_body_bytes": self.max_body_bytes,
            "log_level": self.log_level,
            "log_format": self.log_format,
            "policy": _plain(self.policy),
            "policy_files": list(self.policy_files),
            "registry": _plain(self.registry, skip=("extra",)),
            "shared_cache": self.shared_cache.describe() if self.shared_cache is not None else None,
            "tracing": self.tracing.describe(),
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
    if ns.cert_dir is not None and (ns.tls_cert_file is not None or ns.tls_key_file is not None):
        raise InvalidSettings("--cert-dir and --tls-cert-file/--tls-key-file are alternatives: give one")
    if ns.tls_cert_file is not None and ns.tls_key_file is None:
        raise usage_error(ns, TLS_CERT_FILE, f"needs {TLS_KEY_FILE.name} too: the two go together")
    if ns.tls_key_file is not None and ns.tls_cert_file is None:
        raise usage_error(ns, TLS_KEY_FILE, f"needs {TLS_CERT_FILE.name} too: the two go together")
    directory = require(ns, CERT_DIR)
    if directory is not None:
        cert, key = directory / "tls.crt", directory / "tls.key"
    else:
        given_cert, given_key = require(ns, TLS_CERT_FILE), require(ns, TLS_KEY_FILE)
        if given_cert is None or given_key is None:
            return None, None
        cert, key = given_cert, given_key
    from noe_web.server.tls import check_pair  # noqa: PLC0415

    check_pair(cert, key)
    return cert, key
