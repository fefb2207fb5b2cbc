"""The Kubernetes API client: Secret GET (cached), Event POST, lists, watches, any call, as one identity.

Authentication comes from an :class:`~noe_web.kube.config.ApiConfig`. Tokens
are read from their file again whenever the file changes, so projected tokens
that the kubelet rotates keep working; an ``exec`` plugin's token is kept until
it expires. The session ignores the process environment (proxies,
``REQUESTS_CA_BUNDLE``, ``~/.netrc``). Errors are :mod:`noe_web.kube.errors`.

Used by: the webhook (Secret GET, Event POST), ``noe report`` (paginated lists),
``noe certs`` (any call) and ``noe controller`` (lists, watches, patches,
evictions, logs: :meth:`KubeClient.call`, :meth:`KubeClient.watch`,
:meth:`KubeClient.get_text`).
"""

from __future__ import annotations

import json
import ssl
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InsecureRequestWarning

from noe_core.errors import DeadlineExceeded
from noe_core.registry.tracer import NULL_TRACER, Span, Tracer, request_attributes
from noe_core.util.deadline import Deadline
from noe_core.util.lru import LRUCache, SingleFlight
from noe_core.util.safe_load import load_json_cut
from noe_core.util.watched_file import WatchedFiles
from noe_web.kube.config import ApiConfig, build_ssl_context
from noe_web.kube.errors import (
    CredentialPluginFailed,
    Forbidden,
    Gone,
    KubeError,
    NotFound,
    TooLargeResourceVersion,
    Unavailable,
    error_for_status,
)
from noe_web.kube.exec_plugin import ExecCredentialError, ExecCredentialSource
from noe_web.kube.list_schema import ListSchema
from noe_web.kube.list_stream import read_list

USER_AGENT = "noe-webhook"
TOO_LARGE = "ResourceVersionTooLarge"
"""The cause the API server gives (with 504) for a ``resourceVersion`` it has not reached yet."""
CHUNK = 1 << 16
UNAVAILABLE_TTL = 2.0
_RETRY = object()


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
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self._tracer = tracer
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
            attributes = request_attributes(method, urlsplit(url.split("?", 1)[0]))
            if attempt:
                attributes["http.request.resend_count"] = attempt
            # A watch's span covers its opening: the stream is the caller's to read.
            with self._tracer.span(f"kubernetes {method}", attributes, client=True) as span:
                answer = self._attempt(
                    method,
                    path,
                    url,
                    data,
                    span,
                    attempt=attempt,
                    limit=limit,
                    content_type=content_type,
                    params=params,
                    text=text,
                    stream=stream,
                )
            if answer is not _RETRY:
                return answer
        raise Unavailable(f"{method} {path}: unauthorized")  # pragma: no cover - loop always returns

    def _attempt(
        self,
        method: str,
        path: str,
        url: str,
        data: str | None,
        span: Span,
        *,
        attempt: int,
        limit: float | tuple[float, float],
        content_type: str,
        params: Mapping[str, str] | None,
        text: bool,
        stream: bool,
    ) -> Any:
        """One request and its answer; :data:`_RETRY` when a refreshed token may get another answer."""
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
        status = resp.status_code
        span.set("http.response.status_code", status)
        if status >= 400:
            span.fail(str(status))
        if stream and 200 <= status < 300:
            return resp  # the caller reads and closes it
        with resp:
            span.set("http.response.body.size", len(resp.content))
            if status == 401 and attempt == 0 and (self.config.token_file or self._exec) is not None:
                return _RETRY  # the token may have rotated or expired early: read it or run the plugin again
            if 200 <= status < 300 and text:
                return resp.text
            if 200 <= status < 300:
                try:
                    # one hostile custom resource in a list must not make the whole list unreadable
                    return load_json_cut(resp.content)
                except ValueError as exc:
                    raise Unavailable(f"{method} {path}: the answer is not JSON", status=status) from exc
            if status == 404:
                raise NotFound(f"{method} {path}: not found", status=status)
            reason = _status_reason(resp)
            error = TooLargeResourceVersion if reason == TOO_LARGE else error_for_status(status)
            raise error(f"{method} {path}: {status} {reason}".rstrip(), status=status)

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

    def list_streamed(
        self,
        path: str,
        params: Mapping[str, str],
        on_item: Callable[[dict[str, Any]], None],
        *,
        timeout: float,
        schema: ListSchema | None = None,
    ) -> dict[str, Any]:
        """One list request whose items are decoded and handed to ``on_item`` one at a time as they arrive.

        Returns the list's ``metadata`` (``resourceVersion``, ``continue``). The
        answer is never held whole (:mod:`noe_web.kube.list_stream`), so a server
        that ignores ``limit`` costs no more memory than one that pages; a page is
        decoded by ``schema`` when one is given, only as far as the caller keeps.
        """
        resp = self._request("GET", path, params=params, stream=True, timeout=timeout)
        try:
            rest = read_list(
                resp.iter_content(CHUNK),
                lambda item: on_item(item) if isinstance(item, dict) else None,
                schema=schema,
            )
        except requests.RequestException as exc:
            raise Unavailable(f"GET {path}: broken off ({type(exc).__name__})") from exc
        except ValueError as exc:
            raise Unavailable(f"GET {path}: the answer is not a list of objects ({exc})") from exc
        finally:
            resp.close()
        meta = rest.get("metadata")
        return meta if isinstance(meta, dict) else {}

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

    def watch(
        self,
        path: str,
        params: Mapping[str, str],
        *,
        timeout: float,
        on_open: Callable[[], None] = lambda: None,
        schema: ListSchema | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The watch events of ``path`` (``watch=1`` added), one decoded object per line, until the server ends it.

        ``timeout`` bounds the wait for each line; an ``ERROR`` event carrying a
        410 Status raises :class:`Gone`. ``on_open`` is called once the server has accepted the watch.
        With ``schema``, an event's item is decoded only as far as the caller keeps.
        """
        resp = self._request("GET", path, params={**params, "watch": "1"}, stream=True, timeout=timeout)
        on_open()
        try:
            for line in resp.iter_lines(CHUNK):  # what has arrived, up to 64 KiB a read (requests reads 512 bytes)
                if not line:
                    continue
                event = schema.decode_event(line) if schema is not None else None
                if event is None:
                    try:
                        event = load_json_cut(line)
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


def _status_reason(resp: requests.Response) -> str:
    """The Status's reason; :data:`TOO_LARGE` when one of its causes says so (the reason is then ``Timeout``)."""
    try:
        body = resp.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    if isinstance(causes, list) and any(isinstance(c, dict) and c.get("reason") == TOO_LARGE for c in causes):
        return TOO_LARGE
    return str(body["reason"]) if isinstance(body.get("reason"), str) else ""
