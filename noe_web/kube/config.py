"""Where the Kubernetes API is and how to authenticate: kubeconfig files merged as kubectl merges them, or
the in-cluster service account.

Which kubeconfig, as kubectl decides (:func:`find_kubeconfig`): ``--kubeconfig
FILE`` alone; else every file ``$KUBECONFIG`` lists (``os.pathsep``-separated;
missing ones skipped), merged; else ``~/.kube/config`` for the commands a person
runs (``noe report``, ``kubectl noe``) — never for the long-running ``serve``,
``controller`` and ``certs``, which must not act on whatever cluster a laptop's
current context names. The merge is kubectl's: the first file to define a
cluster, user or context of a name wins it whole; ``current-context`` comes from
the first file that sets one; relative paths are read from the directory of the
file that holds them. When no file defines anything, the in-cluster service
account (``KUBERNETES_SERVICE_HOST``/``PORT``, the token and CA under
``/var/run/secrets/kubernetes.io/serviceaccount``) is used, as client-go does.

The chosen context (``--context NAME``, else ``current-context``) — token, token
file, client certificate and key as data or files, an ``exec`` credential plugin
(:mod:`noe_web.kube.exec_plugin`), certificate authority as data or file,
``insecure-skip-tls-verify``, its default namespace — becomes one
:class:`ApiConfig`. TLS material given as data is loaded into an
:class:`ssl.SSLContext` held in memory; nothing of it is left on disk.
Every problem is an :class:`InvalidSettings` of one line naming the file.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping
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
KUBECONFIG_VARIABLE = "KUBECONFIG"
DEFAULT_NAMESPACE = "default"


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
    namespace: str = DEFAULT_NAMESPACE
    """The context's namespace (in a pod: the pod's own), else ``default``: what ``-n`` defaults to, as in kubectl."""

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


# ---------------------------------------------------------------------------------------- the merge


@dataclass(frozen=True)
class Stanza:
    """One named cluster, user or context, and the file that defined it (its relative paths are read from there)."""

    name: str
    item: Mapping[str, Any]
    origin: Path
    label: str
    """How errors name its file: ``--kubeconfig FILE``, ``$KUBECONFIG file FILE`` or ``kubeconfig FILE``."""

    def body(self, section: str) -> Mapping[str, Any]:
        """The ``cluster:``/``user:``/``context:`` mapping under the name."""
        body = self.item.get(section)
        if not isinstance(body, dict):
            raise InvalidSettings(f"{self.label}: {section} {self.name!r} has no {section} section")
        return body


def _parse_file(path: Path, label: str) -> Mapping[str, Any]:
    """One kubeconfig document; an empty file is an empty config, as kubectl reads it."""
    try:
        doc = load_yaml(path.read_text())
    except OSError as exc:
        raise InvalidSettings(f"{label}: cannot read it ({exc.strerror})") from exc
    except UnicodeDecodeError:
        raise InvalidSettings(f"{label}: not UTF-8 text") from None
    except TooComplex as exc:
        raise InvalidSettings(f"{label}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise InvalidSettings(f"{label}: not valid YAML") from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidSettings(f"{label}: not a kubeconfig document")
    return doc


def _stanzas(doc: Mapping[str, Any], section: str, origin: Path, label: str) -> dict[str, Stanza]:
    """``clusters``/``users``/``contexts`` of one file by name; within a file the first of a name counts."""
    items = doc.get(f"{section}s")
    if items is not None and not isinstance(items, list):
        raise InvalidSettings(f"{label}: {section}s must be a list")
    found: dict[str, Stanza] = {}
    for item in items or ():
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            found.setdefault(item["name"], Stanza(item["name"], item, origin, label))
    return found


@dataclass(frozen=True)
class KubeConfig:
    """Kubeconfig files merged with kubectl's rules: the first file to name a stanza, or set current-context, wins."""

    where: str
    """How errors name it: ``--kubeconfig FILE``, ``$KUBECONFIG (FILE, …)`` or ``kubeconfig ~/.kube/config``."""
    files: tuple[Path, ...] = ()
    clusters: Mapping[str, Stanza] = field(default_factory=dict)
    users: Mapping[str, Stanza] = field(default_factory=dict)
    contexts: Mapping[str, Stanza] = field(default_factory=dict)
    current_context: str | None = None

    @property
    def empty(self) -> bool:
        """Nothing defined (no file, or files without a stanza or current-context): kubectl then tries in-cluster."""
        return not (self.clusters or self.users or self.contexts or self.current_context)

    def _context_names(self) -> str:
        return ", ".join(sorted(self.contexts)) or "none"

    def api_config(self, context: str | None = None) -> ApiConfig:
        """Resolve ``context`` (default: current-context) to the API server and credentials it names."""
        if not self.files:
            raise InvalidSettings(f"{self.where}: none of these files exists")
        name = context or self.current_context
        if not name:
            raise InvalidSettings(
                f"{self.where}: no current-context set; give --context NAME (contexts: {self._context_names()})"
            )
        if name not in self.contexts:
            raise InvalidSettings(f"{self.where}: no context named {name!r} (contexts: {self._context_names()})")
        context_stanza = self.contexts[name]
        ctx = context_stanza.body("context")
        in_context = f"context {name!r}"
        cluster_name = _string(ctx, "cluster", in_context) or ""
        if cluster_name not in self.clusters:
            raise InvalidSettings(f"{self.where}: no cluster named {cluster_name!r} ({in_context} uses it)")
        user_name = _string(ctx, "user", in_context)
        if user_name and user_name not in self.users:
            raise InvalidSettings(f"{self.where}: no user named {user_name!r} ({in_context} uses it)")
        return _resolve(
            self.clusters[cluster_name],
            self.users[user_name] if user_name else None,
            namespace=_string(ctx, "namespace", in_context) or DEFAULT_NAMESPACE,
            source=f"kubeconfig {context_stanza.origin} context {name}",
        )


def read_kubeconfig(paths: Iterable[Path], where: str, *, labels: Mapping[Path, str] | None = None) -> KubeConfig:
    """Read and merge ``paths`` in order; ``where`` names the set in errors, ``labels`` each file."""
    files = tuple(paths)
    clusters: dict[str, Stanza] = {}
    users: dict[str, Stanza] = {}
    contexts: dict[str, Stanza] = {}
    current: str | None = None
    for path in files:
        label = (labels or {}).get(path, f"kubeconfig {path}")
        doc = _parse_file(path, label)
        for section, merged in (("cluster", clusters), ("user", users), ("context", contexts)):
            for name, stanza in _stanzas(doc, section, path, label).items():
                merged.setdefault(name, stanza)  # the first file to define a name keeps it, whole
        named = fields.string(doc.get("current-context"), f"{label}: current-context", error=InvalidSettings)
        current = current or named or None  # the first file that sets one wins
    return KubeConfig(where, files, clusters, users, contexts, current)


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def find_kubeconfig(
    explicit: Path | None, environ: Mapping[str, str] | None = None, *, home: bool = True
) -> KubeConfig | None:
    """The kubeconfig kubectl would read: ``--kubeconfig`` alone, else ``$KUBECONFIG`` merged, else (``home``)
    ``~/.kube/config``; ``None`` when none of them is there to read."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        return _explicit(explicit)
    listed = _unique(Path(entry).expanduser() for entry in env.get(KUBECONFIG_VARIABLE, "").split(os.pathsep) if entry)
    if listed:
        where = f"${KUBECONFIG_VARIABLE} ({', '.join(map(str, listed))})"
        present = [path for path in listed if path.exists()]  # kubectl skips the files that are not there
        return read_kubeconfig(present, where, labels={path: f"${KUBECONFIG_VARIABLE} file {path}" for path in present})
    default = Path(env.get("HOME") or Path.home()) / ".kube" / "config"
    if home and default.is_file():
        return read_kubeconfig([default], f"kubeconfig {default}")
    return None


def _explicit(path: Path) -> KubeConfig:
    """``--kubeconfig FILE``: that file alone, no merge (kubectl's rule)."""
    label = f"--kubeconfig {path}"
    return read_kubeconfig([path], label, labels={path: label})


def load_kubeconfig(path: Path, context: str | None = None) -> ApiConfig:
    """Resolve the (current or given) context of one kubeconfig file."""
    return _explicit(path).api_config(context)


def _resolve(cluster_stanza: Stanza, user_stanza: Stanza | None, *, namespace: str, source: str) -> ApiConfig:
    """One context's cluster and user → :class:`ApiConfig`; relative paths from the file of each."""
    cluster_name, cluster = cluster_stanza.name, cluster_stanza.body("cluster")
    user_name, user = (user_stanza.name, user_stanza.body("user")) if user_stanza else (None, {})
    in_cluster = f"cluster {cluster_name!r}"
    in_user = f"user {user_name!r}"
    server = _string(cluster, "server", in_cluster)
    if server is None or not server.startswith(("https://", "http://")):
        raise InvalidSettings(f"{cluster_stanza.label}: {in_cluster} has no server URL (https://HOST[:PORT])")
    if server.startswith("http://"):
        # kubectl allows it (e.g. a local proxy); say that credentials would travel in clear text.
        log.warning(
            "%s: cluster %r is plain HTTP; the token and Secrets are not encrypted on the wire",
            cluster_stanza.label,
            cluster_name,
        )
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        # a quoted "false" must not turn verification off
        raise InvalidSettings(f"kubeconfig: {in_cluster} insecure-skip-tls-verify must be true or false")
    cluster_base = cluster_stanza.origin.parent
    user_base = user_stanza.origin.parent if user_stanza else cluster_base
    user_label = user_stanza.label if user_stanza else cluster_stanza.label
    ca_pem: str | None = None
    if ca_data := _string(cluster, "certificate-authority-data", in_cluster):
        ca_pem = _b64(ca_data, "certificate-authority-data").decode("ascii", errors="ignore")
    elif ca_path := _string(cluster, "certificate-authority", in_cluster):
        ca_pem = _read(ca_path, cluster_base, "certificate-authority").decode("ascii", errors="ignore")
    cert: bytes | None = None
    key: bytes | None = None
    if cert_data := _string(user, "client-certificate-data", in_user):
        cert = _b64(cert_data, "client-certificate-data")
    elif cert_path := _string(user, "client-certificate", in_user):
        cert = _read(cert_path, user_base, "client-certificate")
    if key_data := _string(user, "client-key-data", in_user):
        key = _b64(key_data, "client-key-data")
    elif key_path := _string(user, "client-key", in_user):
        key = _read(key_path, user_base, "client-key")
    if (cert is None) != (key is None):
        raise InvalidSettings(f"{user_label}: {in_user} has a client certificate without key")
    token = _string(user, "token", in_user)
    token_file = _string(user, "tokenFile", in_user)
    exec_plugin = None
    if not (token or token_file or cert):
        if isinstance(user.get("exec"), dict):
            exec_plugin = ExecPlugin.parse(user["exec"], f"{user_label}: {in_user}", user_base)
        elif user.get("exec") is not None:
            raise InvalidSettings(f"{user_label}: {in_user} exec must be a mapping")
        elif user.get("auth-provider"):
            raise InvalidSettings(
                f"{user_label}: {in_user} uses an auth-provider plugin (removed from kubectl 1.26), "
                "which noe does not run; use the provider's exec plugin, a token or a client certificate"
            )
    return ApiConfig(
        server=server.rstrip("/"),
        source=source,
        token=token,
        token_file=(user_base / token_file) if token_file else None,
        ca_pem=ca_pem,
        client_cert_pem=cert,
        client_key_pem=key,
        insecure=insecure,
        username=_string(user, "username", in_user),
        password=_string(user, "password", in_user),
        exec_plugin=exec_plugin,
        namespace=namespace,
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
        namespace=_pod_namespace(env, sa_dir),
    )


def _pod_namespace(environ: Mapping[str, str], sa_dir: Path) -> str:
    """client-go's in-cluster namespace: ``$POD_NAMESPACE``, else the service account's, else ``default``."""
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return (sa_dir / "namespace").read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


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


def discover(
    kubeconfig: Path | None,
    environ: Mapping[str, str] | None = None,
    *,
    context: str | None = None,
    home: bool = False,
    sa_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ApiConfig | None:
    """The API as kubectl finds it (:func:`find_kubeconfig`; ``home``: also ``~/.kube/config``), else the
    in-cluster service account, else ``None``.

    A kubeconfig that defines nothing gives way to the service account, as in
    client-go; without one either, ``$KUBECONFIG`` naming only missing or empty
    files, or a ``--context`` with no kubeconfig at all, is an error that says so.
    """
    env = os.environ if environ is None else environ
    found = find_kubeconfig(kubeconfig, env, home=home)
    if found is not None and (kubeconfig is not None or context or not found.empty):
        return found.api_config(context or None)
    if context:
        raise InvalidSettings(
            f"--context {context}: no kubeconfig to find it in (give --kubeconfig FILE or set ${KUBECONFIG_VARIABLE})"
        )
    pod = in_cluster_config(env, sa_dir)
    if pod is not None or found is None:
        return pod
    if not found.files:
        raise InvalidSettings(f"no Kubernetes API: {found.where}: none of these files exists")
    raise InvalidSettings(f"no Kubernetes API: {found.where} defines no context, cluster or user")
