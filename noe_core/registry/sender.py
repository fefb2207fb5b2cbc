"""The HTTP sender: one request to a registry host, made robust, with no notion of credentials.

What go-containerregistry splits into its ``schemer`` and ``retry`` wrappers:

* **scheme and trust** — HTTPS, verified against the system bundle plus
  ``--registry-ca-file`` (see :func:`trusting_adapter`); a host matching
  ``--insecure-registries`` is tried over HTTPS without verification and, when
  it does not speak TLS, over plain HTTP (remembered per host);
* **redirects** (blob storage) are followed by hand, and ``Authorization`` is
  dropped whenever the target is another origin; HTTPS never downgrades to
  HTTP except for insecure hosts;
* **retries** with exponential backoff for 5xx, 429, timeouts and broken-off
  connections, only while the :class:`~noe_core.util.deadline.Deadline` allows;
  ``Retry-After`` is honoured only when it fits; connect/read timeouts derive
  from it. What cannot recover within an admission fails at once: an unknown
  host, a refused connection, a TLS verification failure (and, above this
  layer, 401/403 and 404);
* **bodies** are streamed with a size cap, and every response is closed.

The ``Authorization`` header is the caller's (:mod:`noe_core.registry.auth`
decides it); errors never repeat it.
"""

from __future__ import annotations

import email.utils
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urljoin, urlsplit

import certifi
import requests
import requests.adapters
import urllib3.connection
import urllib3.connectionpool

from noe_core.errors import DeadlineExceeded, InvalidSettings, ManifestError, RegistryError, TLSFailure
from noe_core.name.hostmatch import host_glob_matches
from noe_core.name.reference import Reference
from noe_core.registry import watchdog
from noe_core.registry.observer import NullObserver, RegistryObserver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.tracer import NULL_TRACER, Span, Tracer, request_attributes
from noe_core.util.deadline import Clock, Deadline
from noe_core.util.lru import LRUCache
from noe_core.util.safe_load import load_json

log = logging.getLogger(__name__)

MAX_ERROR_BODY = 64 * 1024
MAX_HOSTS = 1024
"""How many registry hosts' lessons (plain HTTP, auth scheme) are kept: pods may name any host."""
MAX_RETRY_AFTER = 30.0
"""A ``Retry-After`` longer than this fails at once, even without a deadline (``noe inspect``)."""
MAX_REDIRECTS = 5
TEMPORARY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
PERMANENT_REASONS = frozenset({"host name not found", "connection refused"})
"""Connection failures that a retry within one admission cannot mend (DNS and listeners change slowly)."""
_CHUNK = 64 * 1024

Sleep = Callable[[float], None]


@dataclass(frozen=True)
class HTTPResult:
    """A fully read (or, for HEAD, empty) response; nothing left open."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


def trusting_adapter(ca_file: str | None, pool_maxsize: int = 10) -> requests.adapters.HTTPAdapter:
    """An adapter that verifies TLS against certifi's bundle *plus* ``ca_file``.

    ``verify=ca_file`` on a request would trust only that CA and break public
    registries; this keeps both.
    """
    return _TrustAdapter(ca_file, pool_maxsize=pool_maxsize, pool_connections=pool_maxsize)


class _WatchedHTTPConnection(urllib3.connection.HTTPConnection):
    """Registers with the exchange's :mod:`~noe_core.registry.watchdog` before connecting or sending."""

    def connect(self) -> None:
        watchdog.attach(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        watchdog.attach(self)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(_WatchedHTTPConnection, urllib3.connection.HTTPSConnection):
    """The TLS twin: the method order runs the watchdog's registration, then HTTPS's own connect and send."""


class _WatchedHTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class _TrustAdapter(requests.adapters.HTTPAdapter):
    def __init__(self, ca_file: str | None, **kwargs: Any) -> None:
        self._context: ssl.SSLContext | None = None
        if ca_file:
            context = ssl.create_default_context(cafile=certifi.where())
            try:
                context.load_verify_locations(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise InvalidSettings(f"--registry-ca-file {ca_file}: cannot load: {exc}") from None
            self._context = context
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        """Pools whose connections a watchdog can shut down at the exchange's deadline."""
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: bool | str, cert: str | tuple[str, str] | None = None
    ) -> tuple[Any, Any]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if self._context is not None and verify is True:
            pool_kwargs["ssl_context"] = self._context
        return host_params, pool_kwargs


def _sanitize_reason(exc: BaseException) -> str:
    """A short, secret-free reason for a connection failure."""
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS verification failed"
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "connection timed out"
    if isinstance(exc, requests.exceptions.Timeout):
        return "no answer in time"
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "resolution" in text:
        return "host name not found"
    if "reset" in text:
        return "connection reset"
    return "connection failed"


def _parse_retry_after(value: str, now: float) -> float | None:
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _leading_int(value: str) -> int | None:
    head = value.split(";", 1)[0].strip()
    return int(head) if head.isdigit() else None


def error_code(body: bytes) -> str:
    """The distribution error code (``MANIFEST_UNKNOWN``…) of an error body, when there is one."""
    try:
        doc = load_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ""
    if isinstance(doc, dict):
        errors = doc.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            code = errors[0].get("code")
            if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) <= 64:
                return code
    return ""


class Sender:
    """Size-capped, retrying HTTP to registry hosts within a deadline; thread-safe."""

    def __init__(
        self,
        session: requests.Session,
        *,
        settings: RegistrySettings,
        observer: RegistryObserver | None = None,
        tracer: Tracer = NULL_TRACER,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        self._session = session
        self._settings = settings
        self._observer: RegistryObserver = observer if observer is not None else NullObserver()
        self.tracer = tracer
        self._sleep = sleep
        self._plain_http: LRUCache[str, bool] = LRUCache(MAX_HOSTS, clock=clock)

    def is_insecure(self, host: str) -> bool:
        """Whether ``host`` matches ``--insecure-registries`` (no TLS verification, plain HTTP allowed)."""
        return any(host_glob_matches(p, host) for p in self._settings.insecure_registries)

    def scheme(self, host: str) -> str:
        """``http`` for an insecure host found not to speak TLS, else ``https``."""
        return "http" if self._plain_http.get(host) else "https"

    def request(
        self,
        method: str,
        host: str,
        path: str,
        *,
        headers: Mapping[str, str],
        authorization: str | None,
        deadline: Deadline,
        limit: int,
    ) -> HTTPResult:
        """``method`` on ``path`` of registry ``host``, falling back to plain HTTP for insecure hosts."""
        all_headers = dict(headers)
        if authorization is not None:
            all_headers["Authorization"] = authorization
        scheme = self.scheme(host)
        try:
            return self.send(
                method, f"{scheme}://{host}{path}", headers=all_headers, deadline=deadline, limit=limit, registry=host
            )
        except RegistryError as exc:
            fallback = scheme == "https" and isinstance(exc, TLSFailure) and self.is_insecure(host)
            if not fallback:
                raise
        self._plain_http.set(host, True)
        log.info("registry %s does not speak TLS; using plain HTTP (listed in --insecure-registries)", host)
        return self.send(
            method, f"http://{host}{path}", headers=all_headers, deadline=deadline, limit=limit, registry=host
        )

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        deadline: Deadline,
        limit: int,
        registry: str,
        follow_redirects: bool = True,
        data: bytes | None = None,
    ) -> HTTPResult:
        """One request to ``url``, retried on temporary failures while the deadline allows."""
        attempt = 0
        while True:
            deadline.check(registry, f"{method} request")
            failure: RegistryError
            try:
                result = self._exchange(
                    method,
                    url,
                    headers=headers,
                    deadline=deadline,
                    limit=limit,
                    registry=registry,
                    follow_redirects=follow_redirects,
                    data=data,
                    attempt=attempt,
                )
            except RegistryError as exc:
                if not exc.temporary or isinstance(exc, DeadlineExceeded):
                    raise
                failure = exc
                wait = None
            else:
                if result.status not in TEMPORARY_STATUSES:
                    return result
                failure = self._status_error(result, registry)
                wait = _parse_retry_after(result.header("retry-after"), time.time())
            attempt += 1
            if attempt > self._settings.max_retries:
                raise failure
            backoff = wait if wait is not None else min(2.0, 0.05 * (2**attempt)) * (0.5 + random.random())  # noqa: S311
            if backoff > MAX_RETRY_AFTER or not deadline.allows(backoff + 0.01):
                if deadline.expired:
                    raise DeadlineExceeded(
                        f"registry {registry} did not answer usefully before the deadline ({failure})",
                        registry=registry,
                    ) from None
                raise failure
            self._sleep(backoff)

    def _status_error(self, result: HTTPResult, registry: str) -> RegistryError:
        code = error_code(result.body)
        detail = f" ({code})" if code else ""
        if result.status == 429:
            self._observer.error(registry, "rate_limited")
            return RegistryError(
                f"registry {registry} is rate-limiting requests (HTTP 429){detail}: configure credentials "
                "for it or a pull-through mirror with --registry-proxies",
                registry=registry,
                status=429,
                temporary=True,
            )
        self._observer.error(registry, "server")
        return RegistryError(
            f"registry {registry} answered HTTP {result.status}{detail}: the registry is failing or "
            "overloaded; check its status",
            registry=registry,
            status=result.status,
            temporary=True,
        )

    def _exchange(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        deadline: Deadline,
        limit: int,
        registry: str,
        follow_redirects: bool,
        data: bytes | None = None,
        attempt: int = 0,
    ) -> HTTPResult:
        """One exchange; redirects are followed only when ``follow_redirects`` (never with a ``data`` body).

        Connect, headers and the whole body share the deadline's wall-clock limit, however the bytes drip.
        """
        with watchdog.watch(deadline.wait_timeout()) as watch:
            result = self._exchange_within(
                method,
                url,
                headers=headers,
                deadline=deadline,
                limit=limit,
                registry=registry,
                follow_redirects=follow_redirects,
                data=data,
                attempt=attempt,
            )
        if watch is not None and watch.fired:  # cut off: what arrived may look complete and is not
            self._observer.error(registry, "deadline")
            raise DeadlineExceeded(
                f"registry {urlsplit(url).netloc} was still answering when the deadline passed", registry=registry
            )
        return result

    def _exchange_within(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        deadline: Deadline,
        limit: int,
        registry: str,
        follow_redirects: bool,
        data: bytes | None = None,
        attempt: int = 0,
    ) -> HTTPResult:
        current = url
        current_headers = dict(headers)
        current_headers.setdefault("User-Agent", self._settings.user_agent)
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(current)
            attributes = request_attributes(method, parts)
            if attempt:
                attributes["http.request.resend_count"] = attempt
            if data is not None:
                attributes["http.request.body.size"] = len(data)
            with self.tracer.span(f"registry {method}", attributes, client=True) as span:
                following = self._hop(
                    method,
                    current,
                    parts,
                    current_headers,
                    span,
                    deadline=deadline,
                    limit=limit,
                    registry=registry,
                    follow_redirects=follow_redirects,
                    data=data,
                )
            if isinstance(following, HTTPResult):
                return following
            current = following
        raise RegistryError(f"registry {registry} redirected more than {MAX_REDIRECTS} times", registry=registry)

    def _hop(
        self,
        method: str,
        current: str,
        parts: SplitResult,
        current_headers: dict[str, str],
        span: Span,
        *,
        deadline: Deadline,
        limit: int,
        registry: str,
        follow_redirects: bool,
        data: bytes | None,
    ) -> HTTPResult | str:
        """One request and its answer, read: the result, or the URL a redirect sends the next hop to.

        Drops ``Authorization`` from ``current_headers`` when the redirect leaves the origin.
        """
        target = parts.netloc
        insecure = self.is_insecure(target)
        timeout = deadline.timeout(self._settings.request_timeout)
        try:
            response = self._session.request(
                method,
                current,
                headers=current_headers,
                data=data,
                timeout=(timeout, timeout),
                stream=True,
                allow_redirects=False,
                verify=not insecure,
            )
        except requests.exceptions.RequestException as exc:
            self._observer.request(target, method, 0)
            reason = _sanitize_reason(exc)
            if deadline.expired:
                self._observer.error(registry, "deadline")
                raise DeadlineExceeded(
                    f"registry {target} did not answer before the deadline ({reason})", registry=registry
                ) from None
            tls = isinstance(exc, requests.exceptions.SSLError)
            hint = (
                "trust its CA with --registry-ca-file, or list it in --insecure-registries"
                if tls
                else "check that the registry is reachable from the webhook"
            )
            self._observer.error(registry, "tls" if tls else "connection")
            kind = TLSFailure if tls else RegistryError
            raise kind(
                f"cannot reach registry {target}: {reason}; {hint}",
                registry=registry,
                temporary=not tls and reason not in PERMANENT_REASONS,
            ) from None
        with response:
            status = response.status_code
            self._observer.request(target, method, status)
            span.set("http.response.status_code", status)
            if status >= 400:
                span.fail(str(status))
            lowered = {k.lower(): v for k, v in response.headers.items()}
            self._record_rate_limit(target, lowered)
            if follow_redirects and data is None and status in _REDIRECTS and "location" in lowered:
                following = urljoin(current, lowered["location"])
                new = urlsplit(following)
                if new.scheme not in ("http", "https"):
                    raise RegistryError(f"registry {target} redirected to a non-HTTP URL", registry=registry)
                if parts.scheme == "https" and new.scheme == "http" and not self.is_insecure(new.netloc):
                    raise RegistryError(
                        f"registry {target} redirected from HTTPS to plain HTTP ({new.netloc}); refused",
                        registry=registry,
                    )
                if (new.scheme, new.netloc) != (parts.scheme, parts.netloc):
                    current_headers.pop("Authorization", None)
                return following
            if method == "HEAD":
                body = b""
            elif status < 300:
                body = self._read(response, limit, deadline, target, registry)
            else:
                # An error page only yields the registry's error code: its head is enough.
                body = self._read(response, min(limit, MAX_ERROR_BODY), deadline, target, registry, truncate=True)
            if method != "HEAD":
                span.set("http.response.body.size", len(body))
            return HTTPResult(status, lowered, body, current)

    def _read(
        self,
        response: requests.Response,
        cap: int,
        deadline: Deadline,
        target: str,
        registry: str,
        *,
        truncate: bool = False,
    ) -> bytes:
        """The body, at most ``cap`` bytes: beyond it a :class:`ManifestError`, or (``truncate``) the first ``cap``."""
        length = response.headers.get("Content-Length", "")
        if not truncate and length.isdigit() and int(length) > cap:
            raise ManifestError(f"registry {target} sent a body of {int(length)} bytes, more than the {cap}-byte limit")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_content(_CHUNK):
                size += len(chunk)
                if size > cap:
                    if truncate:
                        chunks.append(chunk[: len(chunk) - (size - cap)])
                        break
                    raise ManifestError(f"registry {target} sent more than the {cap}-byte limit")
                chunks.append(chunk)
                if deadline.expired:
                    raise DeadlineExceeded(
                        f"registry {target} was still sending when the deadline passed", registry=registry
                    )
        except requests.exceptions.RequestException as exc:
            reason = _sanitize_reason(exc)
            if deadline.expired:
                raise DeadlineExceeded(
                    f"registry {target} did not finish answering before the deadline ({reason})",
                    registry=registry,
                ) from None
            raise RegistryError(
                f"registry {target} broke off its answer: {reason}", registry=registry, temporary=True
            ) from None
        return b"".join(chunks)

    def _record_rate_limit(self, host: str, headers: Mapping[str, str]) -> None:
        remaining = headers.get("ratelimit-remaining")
        limit = headers.get("ratelimit-limit")
        if remaining is None or limit is None:
            return
        rem, lim = _leading_int(remaining), _leading_int(limit)
        if rem is not None and lim is not None:
            self._observer.rate_limit(host, rem, lim)


def status_error(result: HTTPResult, reference: Reference, what: str) -> RegistryError:
    """An operator-actionable error for an unexpected final status."""
    host = reference.api_host
    code = error_code(result.body)
    detail = f" ({code})" if code else ""
    if result.status == 404:
        return RegistryError(
            f"registry {host} has no {what} for {reference} (HTTP 404{detail}): check the image name, tag or digest",
            registry=host,
            status=404,
        )
    return RegistryError(
        f"registry {host} answered HTTP {result.status}{detail} for the {what} of {reference}",
        registry=host,
        status=result.status,
        temporary=result.status in TEMPORARY_STATUSES,
    )


def make_session(settings: RegistrySettings) -> requests.Session:
    """A session for registry traffic: no environment (proxies, CA bundle variables, .netrc), pools sized.

    ``trust_env`` is off because ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``
    would silently replace the trust configured here.
    """
    session = requests.Session()
    session.trust_env = False
    adapter = trusting_adapter(settings.registry_ca_file, pool_maxsize=max(10, settings.max_parallel * 2))
    session.mount("https://", adapter)
    session.mount("http://", trusting_adapter(None, pool_maxsize=max(10, settings.max_parallel * 2)))
    return session
