"""HTTP to registries: scheme and trust, the auth handshake, tokens, redirects, retries.

This is the only module that sends HTTP requests (over a ``requests.Session``
handed in). One :class:`Transport` serves every registry of a process and
caches what it learns:

* **scheme and trust** — HTTPS, verified against the system bundle plus
  ``--registry-ca-file`` (see :func:`trusting_adapter`); a host matching
  ``--insecure-registries`` is tried over HTTPS without verification and, when
  it does not speak TLS, over plain HTTP (remembered per host);
* **auth** — anonymous first, unless the host matches ``--private-registries``
  (or is known to demand Basic auth). A 401 carries a challenge: Bearer →
  a token from the realm (``service``, ``scope=repository:<name>:pull``,
  Basic credentials when the candidate has them; ``token`` or
  ``access_token``; ``expires_in`` honoured, 60 s when absent), cached per
  (host, repository, credential identity) and only ever sent to that host;
  Basic → the credential itself. Candidates are tried in order until one
  works, and the one that worked is tried first next time. Once a host is
  known to use Bearer, a new repository's token is fetched before its first
  request, saving the 401 round trip;
* **OAuth2 refresh tokens** (docker's ``identitytoken``, written by
  ``az acr login`` and ``docker login`` against OAuth2 token servers) follow
  distribution's ``oauth.md``: the token is POSTed to the Bearer realm as a form
  (``grant_type=refresh_token``, ``refresh_token``, ``service``,
  ``scope=repository:<name>:pull``, ``client_id=noe-webhook``) and the answer's
  ``access_token`` is cached like any other token. The refresh token goes to
  the realm only — never to a registry, never through a redirect, never as
  Basic auth — so a Basic-only host skips such candidates;
* **redirects** (blob storage) are followed by hand, and ``Authorization`` is
  dropped whenever the target is another origin; HTTPS never downgrades to
  HTTP except for insecure hosts;
* **retries** with exponential backoff for 5xx, 429 and connection errors,
  only while the :class:`~noe_core.deadline.Deadline` allows; ``Retry-After``
  is honoured only when it fits; connect/read timeouts derive from it;
* **bodies** are streamed with a size cap, and every response is closed.

Errors are :class:`~noe_core.errors.RegistryError` / ``AuthError`` with the
registry, the status, whether it is temporary, and what an operator should
check. They never contain a credential or a token: messages are built from
fixed text, hosts, repositories and status codes only.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import certifi
import requests
import requests.adapters

from noe_core.cache import LRUCache, SingleFlight
from noe_core.credentials.keychain import Credential
from noe_core.deadline import Clock, Deadline
from noe_core.errors import AuthError, DeadlineExceeded, ManifestError, RegistryError
from noe_core.hostmatch import host_glob_matches, parse_image_pattern
from noe_core.observer import NullObserver, RegistryObserver
from noe_core.reference import Reference
from noe_core.registry.challenge import Challenge, ChallengeError, parse_challenges, preferred
from noe_core.registry_settings import RegistrySettings

log = logging.getLogger(__name__)

DEFAULT_TOKEN_TTL = 60.0
MAX_TOKEN_BYTES = 1024 * 1024
MAX_ERROR_BODY = 64 * 1024
_MAX_HOSTS = 1024
MAX_RETRY_AFTER = 30.0
"""A ``Retry-After`` longer than this fails at once, even without a deadline (``noe inspect``)."""
MAX_REDIRECTS = 5
OAUTH_CLIENT_ID = "noe-webhook"
"""The ``client_id`` sent with OAuth2 refresh-token grants (distribution's ``oauth.md`` requires one)."""
_TEMPORARY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024

Sleep = Callable[[float], None]


class TLSFailure(RegistryError):
    """The TLS handshake failed (unknown CA, or the host does not speak TLS)."""


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


class _TrustAdapter(requests.adapters.HTTPAdapter):
    def __init__(self, ca_file: str | None, **kwargs: Any) -> None:
        self._context: ssl.SSLContext | None = None
        if ca_file:
            context = ssl.create_default_context(cafile=certifi.where())
            try:
                context.load_verify_locations(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                from noe_core.errors import InvalidSettings  # noqa: PLC0415 - error path only

                raise InvalidSettings(f"--registry-ca-file {ca_file}: cannot load: {exc}") from None
            self._context = context
        super().__init__(**kwargs)

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: bool | str, cert: str | tuple[str, str] | None = None
    ) -> tuple[Any, Any]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if self._context is not None and verify is True:
            pool_kwargs["ssl_context"] = self._context
        return host_params, pool_kwargs


@dataclass(frozen=True)
class _Bearer:
    realm: str
    service: str


@dataclass(frozen=True)
class _Candidate:
    credential: Credential | None

    @property
    def identity(self) -> str:
        return "" if self.credential is None else self.credential.identity

    @property
    def is_refresh_token(self) -> bool:
        return self.credential is not None and self.credential.is_refresh_token

    def describe(self) -> str:
        if self.credential is None:
            return "anonymous access"
        if self.credential.is_refresh_token:
            return f"the identity token of {self.credential}"
        return f"credential {self.credential}"


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


def _oauth_error(body: bytes) -> str:
    """The RFC 6749 ``error`` code (``invalid_grant``…) of a token endpoint's answer, when it is one."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ""
    code = doc.get("error") if isinstance(doc, dict) else None
    # Only a short identifier: a hostile server could echo what it was sent.
    if isinstance(code, str) and 0 < len(code) <= 40 and code.replace("_", "").isalpha() and code.islower():
        return code
    return ""


def _error_code(body: bytes) -> str:
    """The distribution error code (``MANIFEST_UNKNOWN``…) of an error body, when there is one."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ""
    if isinstance(doc, dict):
        errors = doc.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            code = errors[0].get("code")
            if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) <= 64:
                return code
    return ""


class Transport:
    """Authenticated, retrying, size-capped HTTP to registries; thread-safe."""

    def __init__(
        self,
        session: requests.Session,
        *,
        settings: RegistrySettings,
        observer: RegistryObserver | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        self._session = session
        self._settings = settings
        self._observer: RegistryObserver = observer if observer is not None else NullObserver()
        self._clock = clock
        self._sleep = sleep
        self._private = tuple(parse_image_pattern(p) for p in settings.private_registries)
        # What each registry host taught us (plain HTTP, its auth scheme); bounded, since pods name any host.
        self._plain_http: LRUCache[str, bool] = LRUCache(_MAX_HOSTS, clock=clock)
        self._bearer_hosts: LRUCache[str, _Bearer] = LRUCache(_MAX_HOSTS, clock=clock)
        self._basic_hosts: LRUCache[str, bool] = LRUCache(_MAX_HOSTS, clock=clock)
        self._tokens: LRUCache[tuple[str, str, str], str] = LRUCache(4096, clock=clock)
        self._working: LRUCache[tuple[str, str], str] = LRUCache(4096, clock=clock)
        self._token_flight: SingleFlight[tuple[str, str, str], str] = SingleFlight()

    # -- policy ---------------------------------------------------------------------------

    def is_insecure(self, host: str) -> bool:
        return any(host_glob_matches(p, host) for p in self._settings.insecure_registries)

    def is_private(self, reference: Reference) -> bool:
        return any(p.matches(reference) for p in self._private)

    def _candidates(
        self, host: str, repository: str, reference: Reference, credentials: Sequence[Credential]
    ) -> list[_Candidate]:
        basic_host = host in self._basic_hosts
        # A refresh token is only ever exchanged at a Bearer realm: on a Basic host it has nothing to send.
        creds = [_Candidate(c) for c in credentials if not (basic_host and c.is_refresh_token)]
        skip_anonymous = bool(creds) and (basic_host or self.is_private(reference))
        order = creds if skip_anonymous else [_Candidate(None), *creds]
        worked = self._working.get((host, repository))
        if worked is not None:
            order.sort(key=lambda c: c.identity != worked)
        return order

    # -- public ---------------------------------------------------------------------------

    def fetch(
        self,
        method: str,
        reference: Reference,
        path: str,
        *,
        deadline: Deadline,
        credentials: Sequence[Credential] = (),
        accept: str | None = None,
        max_bytes: int | None = None,
    ) -> HTTPResult:
        """``method`` on ``/v2/<repository>/<path>`` of ``reference``'s registry, authenticated.

        Returns the final answer for any status except 401/403 (which raise
        :class:`AuthError` once every candidate has failed) and temporary
        failures that outlast the retries (which raise :class:`RegistryError`).
        """
        host = reference.api_host
        repository = reference.repository
        limit = self._settings.max_manifest_bytes if max_bytes is None else max_bytes
        headers = {"Accept": accept} if accept else {}
        status = 401
        tried: list[str] = []
        notes: list[str] = []

        def refused(candidate: _Candidate, exc: AuthError) -> None:
            tried.append(candidate.describe())
            if candidate.is_refresh_token and str(exc) not in notes:
                notes.append(str(exc))

        for candidate in self._candidates(host, repository, reference, credentials):
            if candidate.is_refresh_token and host in self._basic_hosts:
                # Learnt from an earlier candidate's challenge: nothing to send Basic in its name.
                continue
            try:
                authorization = self._known_authorization(host, repository, candidate, deadline)
            except AuthError as exc:
                # The token server refused this candidate: nothing more is sent in its name (asking
                # again, or asking the registry without it, would log in twice with a wrong password).
                if exc.status in (401, 403):
                    status = exc.status
                refused(candidate, exc)
                continue
            result = self._request(method, host, f"/v2/{repository}/{path}", headers=headers,
                                   authorization=authorization, deadline=deadline, limit=limit)
            if result.status not in (401, 403):
                self._remember(host, repository, candidate)
                return result
            status = result.status
            tried.append(candidate.describe())
            if authorization is not None and authorization.startswith("Bearer "):
                self._tokens.pop((host, repository, candidate.identity))
            if result.status == 403 and not result.header("www-authenticate"):
                continue
            challenge = self._challenge(result, host)
            if challenge is None:
                continue
            if authorization is not None and challenge.error != "invalid_token":
                # This candidate's credentials were already presented and refused (for a token:
                # insufficient scope); asking again would get the same answer.
                continue
            try:
                retry_auth = self._answer(challenge, host, repository, candidate, deadline)
            except AuthError as exc:
                log.debug("token refused for %s on %s: %s", candidate.describe(), host, exc)
                refused(candidate, exc)
                continue
            if retry_auth is None or retry_auth == authorization:
                continue
            result = self._request(method, host, f"/v2/{repository}/{path}", headers=headers,
                                   authorization=retry_auth, deadline=deadline, limit=limit)
            if result.status not in (401, 403):
                self._remember(host, repository, candidate)
                return result
            status = result.status
            if retry_auth.startswith("Bearer "):
                self._tokens.pop((host, repository, candidate.identity))
        self._observer.error(host, "auth")
        raise AuthError(
            f"registry {host} refused access to {repository} (HTTP {status}) after trying "
            f"{', '.join(tried) or 'no credentials'}: check the image name, and that an "
            "imagePullSecret, --docker-config or credential provider holds credentials for "
            f"{reference.registry} with pull access"
            + "".join(f"; {note}" for note in notes),
            registry=host,
            status=status,
        )

    # -- auth -----------------------------------------------------------------------------

    def _remember(self, host: str, repository: str, candidate: _Candidate) -> None:
        self._working.set((host, repository), candidate.identity)

    def _challenge(self, result: HTTPResult, host: str) -> Challenge | None:
        header = result.header("www-authenticate")
        if not header:
            return None
        challenge = preferred(parse_challenges(header, registry=host))
        if challenge is None:
            raise AuthError(
                f"registry {host} asks for an authentication scheme noe does not support "
                "(only Bearer and Basic are)",
                registry=host,
                status=result.status,
            )
        if challenge.scheme == "bearer":
            if not challenge.realm:
                raise ChallengeError("Bearer challenge without a realm", registry=host)
            self._bearer_hosts.set(host, _Bearer(challenge.realm, challenge.service))
        else:
            self._basic_hosts.set(host, True)
        return challenge

    def _known_authorization(
        self, host: str, repository: str, candidate: _Candidate, deadline: Deadline
    ) -> str | None:
        """What to send on the first try: a cached token, a proactive one, or Basic for known hosts.

        Raises :class:`AuthError` when the token server refuses the candidate.
        """
        token = self._tokens.get((host, repository, candidate.identity))
        if token is not None:
            return f"Bearer {token}"
        bearer = self._bearer_hosts.get(host)
        basic = host in self._basic_hosts
        if bearer is not None:
            return f"Bearer {self._token(bearer, host, repository, candidate, deadline)}"
        if basic and candidate.credential is not None and not candidate.is_refresh_token:
            return candidate.credential.basic_header()
        return None

    def _answer(
        self, challenge: Challenge, host: str, repository: str, candidate: _Candidate, deadline: Deadline
    ) -> str | None:
        """The ``Authorization`` answering ``challenge``; None when the candidate has nothing to send.

        Raises :class:`AuthError` when the token server refuses the candidate.
        """
        if challenge.scheme == "basic":
            if candidate.credential is None or candidate.is_refresh_token:
                return None
            return candidate.credential.basic_header()
        bearer = _Bearer(challenge.realm, challenge.service)
        return f"Bearer {self._token(bearer, host, repository, candidate, deadline)}"

    def _token(
        self, bearer: _Bearer, host: str, repository: str, candidate: _Candidate, deadline: Deadline
    ) -> str:
        key = (host, repository, candidate.identity)
        cached = self._tokens.get(key)
        if cached is not None:
            return cached
        token, _ = self._token_flight.do(
            key, lambda: self._fetch_token(bearer, host, repository, candidate, deadline), deadline
        )
        return token

    def _fetch_token(
        self, bearer: _Bearer, host: str, repository: str, candidate: _Candidate, deadline: Deadline
    ) -> str:
        parts = urlsplit(bearer.realm)
        realm_host = parts.netloc
        if parts.scheme not in ("https", "http") or not realm_host:
            raise ChallengeError("the Bearer realm is not an http(s) URL", registry=host)
        if parts.scheme == "http" and not (self.is_insecure(realm_host) or self.is_insecure(host)):
            raise AuthError(
                f"registry {host} sends clients to a token server over plain HTTP ({realm_host}); "
                "noe refuses to send credentials there unless it is listed in --insecure-registries",
                registry=host,
            )
        query: dict[str, str] = {"scope": f"repository:{repository}:pull"}
        if bearer.service:
            query["service"] = bearer.service
        headers: dict[str, str] = {"Accept": "application/json"}
        credential = candidate.credential
        if credential is not None and credential.is_refresh_token:
            return self._refresh(bearer, host, repository, credential, deadline, query=query)
        separator = "&" if parts.query else "?"
        url = f"{bearer.realm}{separator}{urlencode(query)}"
        if credential is not None:
            headers["Authorization"] = credential.basic_header()
        result = self._send_with_retries("GET", url, headers=headers, deadline=deadline,
                                         limit=MAX_TOKEN_BYTES, registry=realm_host, follow_redirects=False)
        if result.status in (401, 403):
            self._observer.token_fetch(host, "denied")
            raise AuthError(
                f"the token server of {host} refused {candidate.describe()} for {repository} "
                f"(HTTP {result.status}): check the credentials for {host}",
                registry=host,
                status=result.status,
            )
        return self._keep_token(result, realm_host, (host, repository, candidate.identity),
                                fields=("token", "access_token"))

    def _refresh(
        self, bearer: _Bearer, host: str, repository: str, credential: Credential, deadline: Deadline,
        *, query: Mapping[str, str],
    ) -> str:
        """An access token for ``credential``'s OAuth2 refresh token (distribution's ``oauth.md``).

        The refresh token travels in a form body POSTed to the realm itself:
        never in a URL (proxies and access logs keep those), never redirected.
        """
        realm_host = urlsplit(bearer.realm).netloc
        form = {
            "grant_type": "refresh_token",
            "refresh_token": credential.identity_token,
            "client_id": OAUTH_CLIENT_ID,
            **query,
        }
        headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
        result = self._send_with_retries("POST", bearer.realm, headers=headers, deadline=deadline,
                                         limit=MAX_TOKEN_BYTES, registry=realm_host, follow_redirects=False,
                                         data=urlencode(form).encode("ascii"))
        if result.status in (400, 401, 403):
            self._observer.token_fetch(host, "denied")
            code = _oauth_error(result.body)
            raise AuthError(
                f"the token server of {host} ({realm_host}) refused the identity token (OAuth2 refresh "
                f"token) of {credential} for {repository} (HTTP {result.status}{f', {code}' if code else ''}): "
                "it has expired, was revoked, or was issued for another registry; log in again "
                f"(docker login {host}, or az acr login for Azure) and update that docker config or "
                "pull Secret",
                registry=host,
                status=result.status,
            )
        if result.status in (404, 405):
            self._observer.token_fetch(host, "denied")
            raise AuthError(
                f"the token server of {host} ({realm_host}) does not accept OAuth2 refresh tokens "
                f"(HTTP {result.status} to POST), so the identity token of {credential} cannot be used: "
                f"give noe a username and password for {host} instead",
                registry=host,
                status=result.status,
            )
        return self._keep_token(result, realm_host, (host, repository, credential.identity),
                                fields=("access_token", "token"))

    def _keep_token(
        self, result: HTTPResult, realm_host: str, key: tuple[str, str, str], *, fields: tuple[str, str]
    ) -> str:
        """The token in a token server's answer (``fields`` in order of preference), cached under ``key``.

        ``key`` is (registry host, repository, credential identity).
        """
        host = key[0]
        if result.status != 200:
            self._observer.token_fetch(host, "error")
            raise RegistryError(
                f"the token server of {host} ({realm_host}) answered HTTP {result.status}: "
                "check that the registry's auth service is up",
                registry=host,
                status=result.status,
                temporary=result.status in _TEMPORARY_STATUSES,
            )
        try:
            doc = json.loads(result.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            doc = None
        token = None
        expires: object = None
        if isinstance(doc, dict):
            token = doc.get(fields[0]) or doc.get(fields[1])
            expires = doc.get("expires_in")
        if not isinstance(token, str) or not token or any(c.isspace() for c in token):
            self._observer.token_fetch(host, "error")
            raise RegistryError(
                f"the token server of {host} ({realm_host}) answered without a usable token",
                registry=host,
                status=result.status,
            )
        ttl = DEFAULT_TOKEN_TTL
        if isinstance(expires, int | float) and not isinstance(expires, bool) and expires > 0:
            ttl = float(expires)
        # Leave a margin so that a token does not expire on its way to the registry.
        ttl = ttl - 5 if ttl > 10 else ttl / 2
        self._tokens.set(key, token, ttl)
        self._observer.token_fetch(host, "ok")
        return token

    # -- HTTP -----------------------------------------------------------------------------

    def _scheme(self, host: str) -> str:
        return "http" if self._plain_http.get(host) else "https"

    def _request(
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
        all_headers = dict(headers)
        if authorization is not None:
            all_headers["Authorization"] = authorization
        scheme = self._scheme(host)
        try:
            return self._send_with_retries(method, f"{scheme}://{host}{path}", headers=all_headers,
                                           deadline=deadline, limit=limit, registry=host)
        except RegistryError as exc:
            fallback = scheme == "https" and isinstance(exc, TLSFailure) and self.is_insecure(host)
            if not fallback:
                raise
        self._plain_http.set(host, True)
        log.info("registry %s does not speak TLS; using plain HTTP (listed in --insecure-registries)", host)
        return self._send_with_retries(method, f"http://{host}{path}", headers=all_headers,
                                       deadline=deadline, limit=limit, registry=host)

    def _send_with_retries(
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
        attempt = 0
        while True:
            deadline.check(registry, f"{method} request")
            failure: RegistryError
            try:
                result = self._send(method, url, headers=headers, deadline=deadline, limit=limit,
                                    registry=registry, follow_redirects=follow_redirects, data=data)
            except RegistryError as exc:
                if not exc.temporary or isinstance(exc, DeadlineExceeded):
                    raise
                failure = exc
                wait = None
            else:
                if result.status not in _TEMPORARY_STATUSES:
                    return result
                failure = self._status_error(result, registry)
                wait = _parse_retry_after(result.header("retry-after"), time.time())
            attempt += 1
            if attempt > self._settings.max_retries:
                raise failure
            backoff = wait if wait is not None else min(2.0, 0.05 * (2 ** attempt)) * (0.5 + random.random())  # noqa: S311
            if backoff > MAX_RETRY_AFTER or not deadline.allows(backoff + 0.01):
                if deadline.expired:
                    raise DeadlineExceeded(
                        f"registry {registry} did not answer usefully before the deadline ({failure})",
                        registry=registry,
                    ) from None
                raise failure
            self._sleep(backoff)

    def _status_error(self, result: HTTPResult, registry: str) -> RegistryError:
        code = _error_code(result.body)
        detail = f" ({code})" if code else ""
        if result.status == 429:
            self._observer.error(registry, "rate_limited")
            return RegistryError(
                f"registry {registry} is rate-limiting requests (HTTP 429){detail}: configure credentials "
                "for it or a pull-through mirror with --registry-proxies",
                registry=registry, status=429, temporary=True,
            )
        self._observer.error(registry, "server")
        return RegistryError(
            f"registry {registry} answered HTTP {result.status}{detail}: the registry is failing or "
            "overloaded; check its status",
            registry=registry, status=result.status, temporary=True,
        )

    def _send(
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
    ) -> HTTPResult:
        """One exchange; redirects are followed only when ``follow_redirects`` (never with a ``data`` body)."""
        current = url
        current_headers = dict(headers)
        current_headers.setdefault("User-Agent", self._settings.user_agent)
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(current)
            target = parts.netloc
            insecure = self.is_insecure(target)
            timeout = deadline.timeout(self._settings.request_timeout)
            try:
                response = self._session.request(
                    method, current, headers=current_headers, data=data, timeout=(timeout, timeout),
                    stream=True, allow_redirects=False, verify=not insecure,
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
                    if tls else "check that the registry is reachable from the webhook"
                )
                self._observer.error(registry, "tls" if tls else "connection")
                kind = TLSFailure if tls else RegistryError
                raise kind(
                    f"cannot reach registry {target}: {reason}; {hint}",
                    registry=registry, temporary=not tls,
                ) from None
            with response:
                status = response.status_code
                self._observer.request(target, method, status)
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
                    current = following
                    continue
                if method == "HEAD":
                    body = b""
                elif status < 300:
                    body = self._read(response, limit, deadline, target, registry)
                else:
                    # An error page only yields the registry's error code: its head is enough.
                    body = self._read(response, min(limit, MAX_ERROR_BODY), deadline, target, registry,
                                      truncate=True)
                return HTTPResult(status, lowered, body, current)
        raise RegistryError(
            f"registry {registry} redirected more than {MAX_REDIRECTS} times", registry=registry
        )

    def _read(
        self, response: requests.Response, cap: int, deadline: Deadline, target: str, registry: str,
        *, truncate: bool = False,
    ) -> bytes:
        """The body, at most ``cap`` bytes: beyond it a :class:`ManifestError`, or (``truncate``) the first ``cap``."""
        length = response.headers.get("Content-Length", "")
        if not truncate and length.isdigit() and int(length) > cap:
            raise ManifestError(
                f"registry {target} sent a body of {int(length)} bytes, more than the {cap}-byte limit"
            )
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
    code = _error_code(result.body)
    detail = f" ({code})" if code else ""
    if result.status == 404:
        return RegistryError(
            f"registry {host} has no {what} for {reference} (HTTP 404{detail}): check the image name, "
            "tag or digest",
            registry=host, status=404,
        )
    return RegistryError(
        f"registry {host} answered HTTP {result.status}{detail} for the {what} of {reference}",
        registry=host, status=result.status, temporary=result.status in _TEMPORARY_STATUSES,
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
