"""Where the Kubernetes API is and how to authenticate: a kubeconfig context or the in-cluster service account.

A kubeconfig (``--kubeconfig``: its current context; token, token file, client
certificate and key as data or files, an ``exec`` credential plugin
(:mod:`noe_web.kube.exec_plugin`), certificate authority as data or file,
``insecure-skip-tls-verify``) or the pod's service account
(``KUBERNETES_SERVICE_HOST``/``PORT`` and the token and CA under
``/var/run/secrets/kubernetes.io/serviceaccount``) becomes one
:class:`ApiConfig`. TLS material given as data is loaded into an
:class:`ssl.SSLContext` held in memory; nothing of it is left on disk.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from noe_core.errors import InvalidSettings
from noe_core.util import fields
from noe_core.util.safe_load import TooComplex, load_yaml
from noe_web.kube.exec_plugin import ExecPlugin

log = logging.getLogger("noe.kube")

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ApiConfig:
    """Where the API is and how to authenticate, resolved from kubeconfig or in-cluster files."""

    server: str
    source: str
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None
    ca_pem: str | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    exec_plugin: ExecPlugin | None = None

    def describe(self) -> dict[str, object]:
        """What the start-up line may say about it (never a credential)."""
        auth = (
            f"exec:{Path(self.exec_plugin.command).name}"
            if self.exec_plugin
            else "token-file"
            if self.token_file
            else "token"
            if self.token
            else "client-certificate"
            if self.client_cert_pem
            else "basic"
            if self.username
            else "none"
        )
        return {"server": self.server, "source": self.source, "auth": auth, "insecure": self.insecure}


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidSettings(f"kubeconfig: {what} is not valid base64") from exc


def _read(path: str | Path, base: Path, what: str) -> bytes:
    full = Path(path)
    if not full.is_absolute():
        full = base / full
    try:
        return full.read_bytes()
    except OSError as exc:
        raise InvalidSettings(f"kubeconfig: cannot read {what} {full} ({exc.strerror})") from exc


def _string(body: Mapping[str, Any], key: str, where: str) -> str | None:
    """``body[key]`` as a non-empty string, ``None`` when absent or empty; any other type is a setting error."""
    return fields.string(body.get(key), f"kubeconfig: {where} {key}", error=InvalidSettings) or None


def _named(items: Any, name: str, section: str, what: str) -> dict[str, Any]:
    if items is not None and not isinstance(items, list):
        raise InvalidSettings(f"kubeconfig: {section}s must be a list")
    for item in items or ():
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(what)
            if not isinstance(body, dict):
                raise InvalidSettings(f"kubeconfig: {section} {name!r} has no {what} section")
            return body
    raise InvalidSettings(f"kubeconfig: no {section} named {name!r}")


def load_kubeconfig(path: Path, context: str | None = None) -> ApiConfig:
    """Resolve the (current or given) context of a kubeconfig file."""
    try:
        doc = load_yaml(path.read_text())
    except OSError as exc:
        raise InvalidSettings(f"--kubeconfig {path}: cannot read it ({exc.strerror})") from exc
    except UnicodeDecodeError:
        raise InvalidSettings(f"--kubeconfig {path}: not UTF-8 text") from None
    except TooComplex as exc:
        raise InvalidSettings(f"--kubeconfig {path}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise InvalidSettings(f"--kubeconfig {path}: not valid YAML") from exc
    if not isinstance(doc, dict):
        raise InvalidSettings(f"--kubeconfig {path}: not a kubeconfig document")
    name = context or _string(doc, "current-context", "document")
    if not name:
        raise InvalidSettings(f"--kubeconfig {path}: no current-context set")
    ctx = _named(doc.get("contexts"), name, "context", "context")
    cluster_name = _string(ctx, "cluster", f"context {name!r}") or ""
    cluster = _named(doc.get("clusters"), cluster_name, "cluster", "cluster")
    user_name = _string(ctx, "user", f"context {name!r}")
    user = _named(doc.get("users"), user_name, "user", "user") if user_name else {}
    base = path.parent
    in_cluster = f"cluster {cluster_name!r}"
    in_user = f"user {user_name!r}"
    server = _string(cluster, "server", in_cluster)
    if server is None or not server.startswith(("https://", "http://")):
        raise InvalidSettings(f"--kubeconfig {path}: cluster {cluster_name!r} has no server URL (https://HOST[:PORT])")
    if server.startswith("http://"):
        # kubectl allows it (e.g. a local proxy); say that credentials would travel in clear text.
        log.warning(
            "--kubeconfig %s: cluster %r is plain HTTP; the token and Secrets are not encrypted on the wire",
            path,
            cluster_name,
        )
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        # a quoted "false" must not turn verification off
        raise InvalidSettings(f"kubeconfig: {in_cluster} insecure-skip-tls-verify must be true or false")
    ca_pem: str | None = None
    if ca_data := _string(cluster, "certificate-authority-data", in_cluster):
        ca_pem = _b64(ca_data, "certificate-authority-data").decode("ascii", errors="ignore")
    elif ca_path := _string(cluster, "certificate-authority", in_cluster):
        ca_pem = _read(ca_path, base, "certificate-authority").decode("ascii", errors="ignore")
    cert: bytes | None = None
    key: bytes | None = None
    if cert_data := _string(user, "client-certificate-data", in_user):
        cert = _b64(cert_data, "client-certificate-data")
    elif cert_path := _string(user, "client-certificate", in_user):
        cert = _read(cert_path, base, "client-certificate")
    if key_data := _string(user, "client-key-data", in_user):
        key = _b64(key_data, "client-key-data")
    elif key_path := _string(user, "client-key", in_user):
        key = _read(key_path, base, "client-key")
    if (cert is None) != (key is None):
        raise InvalidSettings(f"--kubeconfig {path}: user {user_name!r} has a client certificate without key")
    token = _string(user, "token", in_user)
    token_file = _string(user, "tokenFile", in_user)
    exec_plugin = None
    if not (token or token_file or cert):
        if isinstance(user.get("exec"), dict):
            exec_plugin = ExecPlugin.parse(user["exec"], f"--kubeconfig {path}: user {user_name!r}", base)
        elif user.get("exec") is not None:
            raise InvalidSettings(f"--kubeconfig {path}: user {user_name!r} exec must be a mapping")
        elif user.get("auth-provider"):
            raise InvalidSettings(
                f"--kubeconfig {path}: user {user_name!r} uses an auth-provider plugin (removed from kubectl 1.26), "
                "which noe does not run; use the provider's exec plugin, a token or a client certificate"
            )
    return ApiConfig(
        server=server.rstrip("/"),
        source=f"kubeconfig {path} context {name}",
        token=token,
        token_file=(base / token_file) if token_file else None,
        ca_pem=ca_pem,
        client_cert_pem=cert,
        client_key_pem=key,
        insecure=insecure,
        username=_string(user, "username", in_user),
        password=_string(user, "password", in_user),
        exec_plugin=exec_plugin,
    )


def in_cluster_config(environ: Mapping[str, str] | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR) -> ApiConfig | None:
    """The service-account configuration, or ``None`` when not running in a pod."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token_file = sa_dir / "token"
    if not host or not port or not token_file.is_file():
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    ca_file = sa_dir / "ca.crt"
    try:
        ca_pem = ca_file.read_text() if ca_file.is_file() else None
    except OSError as exc:
        raise InvalidSettings(f"in-cluster: cannot read {ca_file} ({exc.strerror})") from exc
    return ApiConfig(
        server=f"https://{host}:{port}",
        source="in-cluster service account",
        token_file=token_file,
        ca_pem=ca_pem,
    )


def build_ssl_context(config: ApiConfig) -> ssl.SSLContext:
    """Client context trusting only the configured CA (or the system's when none is given)."""
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=config.ca_pem)
    except ssl.SSLError as exc:
        raise InvalidSettings(f"{config.source}: the certificate authority is not a PEM certificate") from exc
    if config.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.client_cert_pem is not None and config.client_key_pem is not None:
        # load_cert_chain only reads files: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="noe-kube-") as tmp:
            cert_path, key_path = Path(tmp, "c"), Path(tmp, "k")
            for p, data in ((cert_path, config.client_cert_pem), (key_path, config.client_key_pem)):
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            try:
                context.load_cert_chain(str(cert_path), str(key_path))
            except ssl.SSLError as exc:
                raise InvalidSettings(f"{config.source}: the client certificate and key do not load") from exc
    return context


def discover(kubeconfig: Path | None, environ: Mapping[str, str] | None = None) -> ApiConfig | None:
    """``--kubeconfig`` when given, else the in-cluster service account, else ``None``."""
    if kubeconfig is not None:
        return load_kubeconfig(kubeconfig)
    return in_cluster_config(environ)
