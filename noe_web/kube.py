"""The Kubernetes API: read a Secret and write an Event (the webhook), list collections (``noe report``).

Configuration comes from a kubeconfig file (``--kubeconfig``: its current
context; token, token file, client certificate and key as data or files, an
``exec`` credential plugin (noe_web/kube_exec.py), certificate authority as
data or file, ``insecure-skip-tls-verify``) or from
the pod's service account (``KUBERNETES_SERVICE_HOST``/``PORT`` and the token
and CA under ``/var/run/secrets/kubernetes.io/serviceaccount``). Tokens are
read from their file again whenever the file changes, so projected tokens that
the kubelet rotates keep working.

TLS material given as data is loaded into an :class:`ssl.SSLContext` held in
memory; nothing of it is written to disk. The session ignores the process
environment (proxies, ``REQUESTS_CA_BUNDLE``, ``~/.netrc``).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import ssl
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import requests
import yaml
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InsecureRequestWarning

from noe_core import fields
from noe_core.cache import LRUCache, SingleFlight
from noe_core.deadline import Deadline
from noe_core.errors import DeadlineExceeded, InvalidSettings
from noe_core.safe_load import TooComplex, load_yaml
from noe_core.watched_file import WatchedFiles
from noe_web.kube_exec import ExecCredentialError, ExecCredentialSource, ExecPlugin

log = logging.getLogger("noe.kube")

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
USER_AGENT = "noe-webhook"
UNAVAILABLE_TTL = 2.0


class KubeError(Exception):
    """A Kubernetes API call that did not give what was asked."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        self.status = status
        super().__init__(message)


class NotFound(KubeError):
    """404: the object does not exist."""


class Forbidden(KubeError):
    """401/403: the webhook's identity may not do this."""


class Unavailable(KubeError):
    """No answer, a timeout or a 5xx."""


class CredentialPluginFailed(Forbidden):
    """The kubeconfig's exec credential plugin gave no token: no request could be authenticated."""


class TooManyRequests(Unavailable):
    """429: throttled, or an eviction refused by a PodDisruptionBudget; try again later."""


class Conflict(KubeError):
    """409: the object changed since it was read (stale ``resourceVersion``), or already exists."""


class Invalid(KubeError):
    """422: the request was refused as invalid (a failed JSON Patch ``test`` means the object changed)."""


class Gone(KubeError):
    """410: the ``resourceVersion`` a list or watch asked for is too old; list again."""


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


class _ContextAdapter(HTTPAdapter):
    """Uses one prepared SSL context; trust comes from it alone, never from certifi."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        super().__init__(pool_connections=2, pool_maxsize=8)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # The context already carries the CA and the client certificate.
        return


class _TokenSource:
    """A bearer token, read again from its file whenever the file changes (the kubelet rotates it)."""

    def __init__(self, token: str | None, token_file: Path | None) -> None:
        self._static = token
        self._file = (
            None
            if token_file is None
            else WatchedFiles(
                [token_file], lambda: token_file.read_text().strip() or None, what=f"service account token {token_file}"
            )
        )

    def get(self, *, force: bool = False) -> str | None:
        if self._file is None:
            return self._static
        try:
            token = self._file.get(force=force)
        except OSError:
            token = None  # not readable yet: the static token, if any, until it is
        return token or self._static


class KubeClient:
    """Secret GET (with a short bounded cache) and Event POST against one API server."""

    def __init__(
        self,
        config: ApiConfig,
        *,
        secret_cache_ttl: float = 30.0,
        secret_cache_size: int = 256,
        timeout: float = 5.0,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self._tokens = _TokenSource(config.token, config.token_file)
        self._exec = (
            ExecCredentialSource(
                config.exec_plugin, server=config.server, ca_pem=config.ca_pem, insecure=config.insecure
            )
            if config.exec_plugin is not None
            else None
        )
        self._session = requests.Session()
        self._session.trust_env = False
        self._session.headers["User-Agent"] = USER_AGENT
        self._session.headers["Accept"] = "application/json"
        self._session.mount("https://", _ContextAdapter(build_ssl_context(config)))
        if config.insecure:
            # Asked for by the kubeconfig and said once at start-up; not once per request.
            warnings.filterwarnings("ignore", category=InsecureRequestWarning)
        if config.username and config.password:
            self._session.auth = (config.username, config.password)
        # Found Secrets, and briefly the errors (KubeError) of missing or forbidden ones.
        self._secrets: LRUCache[tuple[str, str], dict[str, Any] | KubeError] | None = (
            LRUCache(secret_cache_size) if secret_cache_size > 0 and secret_cache_ttl > 0 else None
        )
        self._secret_ttl = secret_cache_ttl
        # Concurrent admissions naming one Secret share one GET.
        self._secret_flight: SingleFlight[tuple[str, str], dict[str, Any]] = SingleFlight(shared=(KubeError,))
        # A missing or forbidden Secret is remembered for less time than a found one.
        self._negative_ttl = min(secret_cache_ttl, 10.0)

    def close(self) -> None:
        self._session.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        timeout: float | None = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        text: bool = False,
        stream: bool = False,
    ) -> Any:
        url = self.config.server + path
        limit: float | tuple[float, float] = self.timeout if timeout is None else max(0.05, min(timeout, self.timeout))
        if stream and timeout is not None:
            limit = (self.timeout, timeout)  # connect as any call; a watch then stays open longer
        data = None if json_body is None else json.dumps(json_body)
        for attempt in (0, 1):
            headers = {} if data is None else {"Content-Type": content_type}
            token = self._token(refresh=attempt == 1)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            try:
                resp = self._session.request(
                    method,
                    url,
                    data=data,
                    headers=headers,
                    params=params,
                    timeout=limit,
                    verify=not self.config.insecure,
                    allow_redirects=False,
                    stream=stream,
                )
            except requests.RequestException as exc:
                raise Unavailable(f"{method} {path}: no answer from the Kubernetes API ({type(exc).__name__})") from exc
            if stream and 200 <= resp.status_code < 300:
                return resp  # the caller reads and closes it
            with resp:
                status = resp.status_code
                if status == 401 and attempt == 0 and (self.config.token_file or self._exec) is not None:
                    continue  # the token may have rotated or expired early: read it or run the plugin again
                if 200 <= status < 300 and text:
                    return resp.text
                if 200 <= status < 300:
                    try:
                        return resp.json()
                    except ValueError as exc:
                        raise Unavailable(f"{method} {path}: the answer is not JSON", status=status) from exc
                reason = _status_reason(resp)
                if status == 404:
                    raise NotFound(f"{method} {path}: not found", status=status)
                if status in (401, 403):
                    raise Forbidden(f"{method} {path}: {status} {reason}".rstrip(), status=status)
                special = _STATUS_ERRORS.get(status)
                if special is not None:
                    raise special(f"{method} {path}: {status} {reason}".rstrip(), status=status)
                raise Unavailable(f"{method} {path}: {status} {reason}".rstrip(), status=status)
        raise Unavailable(f"{method} {path}: unauthorized")  # pragma: no cover - loop always returns

    def _token(self, *, refresh: bool) -> str | None:
        if self._exec is None:
            return self._tokens.get(force=refresh)
        try:
            return self._exec.token(refresh=refresh)
        except ExecCredentialError as exc:
            raise CredentialPluginFailed(f"{self.config.source}: {exc}") from None

    def get_secret(self, namespace: str, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        """The Secret as the API returns it; raises :class:`NotFound`, :class:`Forbidden`, :class:`Unavailable`."""
        key = (namespace, name)
        cached = None if self._secrets is None else self._secrets.get(key)
        if isinstance(cached, KubeError):
            raise cached.with_traceback(None)  # the same object each hit: do not pile up tracebacks
        if cached is not None:
            return dict(cached)
        deadline = Deadline.never() if timeout is None else Deadline.after(timeout)
        try:
            secret, _ = self._secret_flight.do(key, lambda: self._fetch_secret(key, timeout), deadline)
        except DeadlineExceeded:
            raise Unavailable(f"GET Secret {namespace}/{name}: no answer from the Kubernetes API in time") from None
        return dict(secret)

    def _fetch_secret(self, key: tuple[str, str], timeout: float | None) -> dict[str, Any]:
        namespace, name = key
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(name, safe='')}"
        try:
            secret = self._request("GET", path, timeout=timeout)
        except (NotFound, Forbidden) as exc:
            self._remember(key, exc, self._negative_ttl)
            raise
        except Unavailable as exc:
            # An API that is down must not cost every admission its full wait: remember it briefly.
            self._remember(key, exc, min(self._negative_ttl, UNAVAILABLE_TTL))
            raise
        if not isinstance(secret, dict):
            raise Unavailable(f"GET {path}: the answer is not an object")
        self._remember(key, secret, self._secret_ttl)
        return secret

    def _remember(self, key: tuple[str, str], value: dict[str, Any] | KubeError, ttl: float) -> None:
        if self._secrets is not None:
            self._secrets.set(key, value, ttl)

    def list_objects(
        self, path: str, *, page_size: int = 500, timeout: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every item of the collection at ``path`` (``/api/v1/pods``), read page by page.

        Uses ``limit`` and ``continue`` as kubectl does, so a large cluster is never
        one huge answer. Items come without ``kind`` (the API leaves it on the list).
        Raises :class:`KubeError`; an expired ``continue`` token (410) says to run again.
        """
        token = ""
        while True:
            query = {"limit": str(page_size), **({"continue": token} if token else {})}
            try:
                body = self._request("GET", f"{path}?{urlencode(query)}", timeout=timeout)
            except Gone as exc:
                raise Gone(
                    f"GET {path}: the list changed too much while it was read (410 Expired); run again",
                    status=410,
                ) from exc
            items = body.get("items") if isinstance(body, dict) else None
            if not isinstance(items, list):
                raise Unavailable(f"GET {path}: the answer is not a list of objects")
            for item in items:
                if isinstance(item, dict):
                    yield item
            metadata = body.get("metadata")
            following = metadata.get("continue") if isinstance(metadata, dict) else None
            if not following or not isinstance(following, str):
                return
            token = following

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
        self._request("POST", path, json_body=event)

    # --- what the controller uses: any object, lists, watches, patches, logs ---------------------
    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """One API call answered with JSON; errors as :class:`KubeError` subclasses by status."""
        return self._request(method, path, json_body=body, params=params, content_type=content_type, timeout=timeout)

    def get_text(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """A plain-text answer (pod logs)."""
        return str(self._request("GET", path, params=params, text=True))

    def watch(self, path: str, params: Mapping[str, str], *, timeout: float) -> Iterator[dict[str, Any]]:
        """The watch events of ``path`` (``watch=1`` added), one decoded object per line, until the server ends it.

        ``timeout`` bounds the wait for each line; an ``ERROR`` event carrying a
        410 Status raises :class:`Gone`.
        """
        resp = self._request("GET", path, params={**params, "watch": "1"}, stream=True, timeout=timeout)
        try:
            for line in resp.iter_lines():
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise Unavailable(f"watch {path}: a line is not JSON") from exc
                if not isinstance(event, dict):
                    raise Unavailable(f"watch {path}: an event is not an object")
                if event.get("type") == "ERROR":
                    found = event.get("object")
                    status: dict[str, Any] = found if isinstance(found, dict) else {}
                    code = int(status.get("code") or 0)
                    message = str(status.get("message") or "")
                    raise (Gone if code == 410 else Unavailable)(f"watch {path}: {code} {message}", status=code)
                yield event
        except requests.RequestException as exc:
            raise Unavailable(f"watch {path}: broken off ({type(exc).__name__})") from exc
        finally:
            resp.close()


_STATUS_ERRORS: dict[int, type[KubeError]] = {409: Conflict, 410: Gone, 422: Invalid, 429: TooManyRequests}


def _status_reason(resp: requests.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return ""
    if isinstance(body, dict) and isinstance(body.get("reason"), str):
        return str(body["reason"])
    return ""


def discover(kubeconfig: Path | None, environ: Mapping[str, str] | None = None) -> ApiConfig | None:
    """``--kubeconfig`` when given, else the in-cluster service account, else ``None``."""
    if kubeconfig is not None:
        return load_kubeconfig(kubeconfig)
    return in_cluster_config(environ)
