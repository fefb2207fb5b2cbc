"""The auth handshake: challenges, Bearer tokens (and their cache), Basic, OAuth2 refresh tokens.

What go-containerregistry splits into its ``bearer`` and ``basic`` wrappers.
A 401 carries a challenge: Bearer → a token from the realm (``service``,
``scope=repository:<name>:pull``, Basic credentials when the candidate has
them; ``token`` or ``access_token``; ``expires_in`` honoured, 60 s when
absent), cached per (host, repository, credential identity) and only ever sent
to that host; Basic → the credential itself. Once a host is known to use
Bearer, a new repository's token is fetched before its first request, saving
the 401 round trip.

**OAuth2 refresh tokens** (docker's ``identitytoken``, written by ``az acr
login`` and ``docker login`` against OAuth2 token servers) follow
distribution's ``oauth.md``: the token is POSTed to the Bearer realm as a form
(``grant_type=refresh_token``, ``refresh_token``, ``service``,
``scope=repository:<name>:pull``, ``client_id=noe-webhook``) and the answer's
``access_token`` is cached like any other token. The refresh token goes to the
realm only — never to a registry, never through a redirect, never as Basic
auth — so a Basic-only host skips such candidates.

Requests go through the :class:`~noe_core.registry.sender.Sender`; errors name
hosts, repositories and statuses, never a credential or a token. Each token
request is a ``registry token`` span (registry, repository, realm host, grant
kind) around the token server's exchanges, on the sender's tracer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from noe_core.credentials.keychain import Credential
from noe_core.errors import AuthError, ChallengeError, RegistryError
from noe_core.registry.challenge import Challenge, parse_challenges, preferred
from noe_core.registry.observer import NullObserver, RegistryObserver
from noe_core.registry.sender import MAX_HOSTS, TEMPORARY_STATUSES, HTTPResult, Sender
from noe_core.util.deadline import Clock, Deadline
from noe_core.util.lru import LRUCache, SingleFlight
from noe_core.util.safe_load import load_json

log = logging.getLogger(__name__)

DEFAULT_TOKEN_TTL = 60.0
MAX_TOKEN_BYTES = 1024 * 1024
OAUTH_CLIENT_ID = "noe-webhook"
"""The ``client_id`` sent with OAuth2 refresh-token grants (distribution's ``oauth.md`` requires one)."""


@dataclass(frozen=True)
class _Bearer:
    realm: str
    service: str


@dataclass(frozen=True)
class Candidate:
    """One way to ask a registry: anonymously (``credential`` None) or with a credential."""

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


def _oauth_error(body: bytes) -> str:
    """The RFC 6749 ``error`` code (``invalid_grant``…) of a token endpoint's answer, when it is one."""
    try:
        doc = load_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ""
    code = doc.get("error") if isinstance(doc, dict) else None
    # Only a short identifier: a hostile server could echo what it was sent.
    if isinstance(code, str) and 0 < len(code) <= 40 and code.replace("_", "").isalpha() and code.islower():
        return code
    return ""


class Authenticator:
    """What to send as ``Authorization`` to each host, and the tokens that answer its challenges."""

    def __init__(
        self, sender: Sender, *, observer: RegistryObserver | None = None, clock: Clock = time.monotonic
    ) -> None:
        self._sender = sender
        self._observer: RegistryObserver = observer if observer is not None else NullObserver()
        # What each registry host taught us about its auth scheme; bounded, since pods name any host.
        self._bearer_hosts: LRUCache[str, _Bearer] = LRUCache(MAX_HOSTS, clock=clock)
        self._basic_hosts: LRUCache[str, bool] = LRUCache(MAX_HOSTS, clock=clock)
        self._tokens: LRUCache[tuple[str, str, str], str] = LRUCache(4096, clock=clock)
        self._token_flight: SingleFlight[tuple[str, str, str], str] = SingleFlight()

    def is_basic(self, host: str) -> bool:
        """Whether ``host`` is known to ask for Basic auth (a refresh token has nothing to send there)."""
        return host in self._basic_hosts

    def forget(self, host: str, repository: str, candidate: Candidate) -> None:
        """Drop the token cached for ``candidate`` after the registry refused it."""
        self._tokens.pop((host, repository, candidate.identity))

    def learn(self, result: HTTPResult, host: str) -> Challenge | None:
        """The challenge of a 401/403 answer, remembering the host's scheme; None without one."""
        header = result.header("www-authenticate")
        if not header:
            return None
        challenge = preferred(parse_challenges(header, registry=host))
        if challenge is None:
            raise AuthError(
                f"registry {host} asks for an authentication scheme noe does not support (only Bearer and Basic are)",
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

    def known_authorization(self, host: str, repository: str, candidate: Candidate, deadline: Deadline) -> str | None:
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

    def answer(
        self, challenge: Challenge, host: str, repository: str, candidate: Candidate, deadline: Deadline
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

    def _token(self, bearer: _Bearer, host: str, repository: str, candidate: Candidate, deadline: Deadline) -> str:
        key = (host, repository, candidate.identity)
        cached = self._tokens.get(key)
        if cached is not None:
            return cached
        token, _ = self._token_flight.do(
            key, lambda: self._fetch_token(bearer, host, repository, candidate, deadline), deadline
        )
        return token

    def _fetch_token(
        self, bearer: _Bearer, host: str, repository: str, candidate: Candidate, deadline: Deadline
    ) -> str:
        """A new token from the realm, in a span of its own: its exchanges are the token server's."""
        grant = (
            "anonymous" if candidate.credential is None else "refresh_token" if candidate.is_refresh_token else "basic"
        )
        attributes = {
            "noe.registry": host,
            "noe.repository": repository,
            "server.address": urlsplit(bearer.realm).hostname or "",
            "noe.token.grant": grant,
        }
        with self._sender.tracer.span("registry token", attributes):
            return self._ask_token(bearer, host, repository, candidate, deadline)

    def _ask_token(self, bearer: _Bearer, host: str, repository: str, candidate: Candidate, deadline: Deadline) -> str:
        parts = urlsplit(bearer.realm)
        realm_host = parts.netloc
        if parts.scheme not in ("https", "http") or not realm_host:
            raise ChallengeError("the Bearer realm is not an http(s) URL", registry=host)
        if parts.scheme == "http" and not (self._sender.is_insecure(realm_host) or self._sender.is_insecure(host)):
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
        result = self._sender.send(
            "GET",
            url,
            headers=headers,
            deadline=deadline,
            limit=MAX_TOKEN_BYTES,
            registry=realm_host,
            follow_redirects=False,
        )
        if result.status in (401, 403):
            self._observer.token_fetch(host, "denied")
            raise AuthError(
                f"the token server of {host} refused {candidate.describe()} for {repository} "
                f"(HTTP {result.status}): check the credentials for {host}",
                registry=host,
                status=result.status,
            )
        return self._keep_token(
            result, realm_host, (host, repository, candidate.identity), fields=("token", "access_token")
        )

    def _refresh(
        self,
        bearer: _Bearer,
        host: str,
        repository: str,
        credential: Credential,
        deadline: Deadline,
        *,
        query: Mapping[str, str],
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
        result = self._sender.send(
            "POST",
            bearer.realm,
            headers=headers,
            deadline=deadline,
            limit=MAX_TOKEN_BYTES,
            registry=realm_host,
            follow_redirects=False,
            data=urlencode(form).encode("ascii"),
        )
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
        return self._keep_token(
            result, realm_host, (host, repository, credential.identity), fields=("access_token", "token")
        )

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
                temporary=result.status in TEMPORARY_STATUSES,
            )
        try:
            doc = load_json(result.body.decode("utf-8"))
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
