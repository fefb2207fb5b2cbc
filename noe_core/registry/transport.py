"""Authenticated HTTP to registries: the candidate loop over credentials.

One :class:`Transport` serves every registry of a process. It composes the
:class:`~noe_core.registry.sender.Sender` (scheme and trust, redirects,
retries, capped reads) and the :class:`~noe_core.registry.auth.Authenticator`
(challenges, tokens, Basic, OAuth2 refresh tokens), the way
go-containerregistry stacks small ``RoundTripper`` wrappers, and adds what
neither knows: which credentials to try, in which order.

Anonymous access comes first, unless the host matches ``--private-registries``
(or is known to demand Basic auth). Candidates are tried in order until one
works, and the one that worked is tried first next time. A candidate the token
server refuses is not presented again (asking the registry without it, or
asking again, would log in twice with a wrong password).

Errors are :class:`~noe_core.errors.RegistryError` / ``AuthError`` with the
registry, the status, whether it is temporary, and what an operator should
check. They never contain a credential or a token: messages are built from
fixed text, hosts, repositories and status codes only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import requests

from noe_core.credentials.keychain import Credential
from noe_core.errors import AuthError, TLSFailure
from noe_core.name.hostmatch import parse_image_pattern
from noe_core.name.reference import Reference
from noe_core.registry.auth import OAUTH_CLIENT_ID, Authenticator, Candidate
from noe_core.registry.observer import NullObserver, RegistryObserver
from noe_core.registry.sender import HTTPResult, Sender, Sleep, make_session, status_error, trusting_adapter
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.tracer import NULL_TRACER, Tracer
from noe_core.util.deadline import Clock, Deadline
from noe_core.util.lru import LRUCache

__all__ = [
    "OAUTH_CLIENT_ID",
    "Candidate",
    "HTTPResult",
    "TLSFailure",
    "Transport",
    "make_session",
    "status_error",
    "trusting_adapter",
]

log = logging.getLogger(__name__)

_REFUSED = frozenset({401, 403})


class Transport:
    """Authenticated, retrying, size-capped HTTP to registries; thread-safe."""

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
        self._observer: RegistryObserver = observer if observer is not None else NullObserver()
        self.sender = Sender(
            session, settings=settings, observer=self._observer, tracer=tracer, clock=clock, sleep=sleep
        )
        self.auth = Authenticator(self.sender, observer=self._observer, clock=clock)
        self._settings = settings
        self._private = tuple(parse_image_pattern(p) for p in settings.private_registries)
        self._working: LRUCache[tuple[str, str], str] = LRUCache(4096, clock=clock)

    # -- policy ---------------------------------------------------------------------------

    def is_insecure(self, host: str) -> bool:
        return self.sender.is_insecure(host)

    def is_private(self, reference: Reference) -> bool:
        return any(p.matches(reference) for p in self._private)

    def _candidates(
        self, host: str, repository: str, reference: Reference, credentials: Sequence[Credential]
    ) -> list[Candidate]:
        basic_host = self.auth.is_basic(host)
        # A refresh token is only ever exchanged at a Bearer realm: on a Basic host it has nothing to send.
        creds = [Candidate(c) for c in credentials if not (basic_host and c.is_refresh_token)]
        skip_anonymous = bool(creds) and (basic_host or self.is_private(reference))
        order = creds if skip_anonymous else [Candidate(None), *creds]
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
        return self.fetch_as(
            method, reference, path, deadline=deadline, credentials=credentials, accept=accept, max_bytes=max_bytes
        )[0]

    def fetch_as(
        self,
        method: str,
        reference: Reference,
        path: str,
        *,
        deadline: Deadline,
        credentials: Sequence[Credential] = (),
        accept: str | None = None,
        max_bytes: int | None = None,
    ) -> tuple[HTTPResult, Candidate]:
        """:meth:`fetch`, and the candidate the registry accepted (anonymous or a credential).

        The resolver needs to know *who* could read an image before it shares
        the answer with other requests (see :mod:`noe_core.registry.access`).
        """
        host = reference.api_host
        repository = reference.repository
        limit = self._settings.max_manifest_bytes if max_bytes is None else max_bytes
        headers = {"Accept": accept} if accept else {}
        status = 401
        tried: list[str] = []
        notes: list[str] = []

        def refused(candidate: Candidate, exc: AuthError) -> None:
            tried.append(candidate.describe())
            if candidate.is_refresh_token and str(exc) not in notes:
                notes.append(str(exc))

        def send_as(candidate: Candidate, authorization: str | None) -> HTTPResult:
            """Send; remember a candidate that worked, forget a token the registry refused."""
            result = self.sender.request(
                method,
                host,
                f"/v2/{repository}/{path}",
                headers=headers,
                authorization=authorization,
                deadline=deadline,
                limit=limit,
            )
            if result.status not in _REFUSED:
                self._working.set((host, repository), candidate.identity)
            elif authorization is not None and authorization.startswith("Bearer "):
                self.auth.forget(host, repository, candidate)
            return result

        for candidate in self._candidates(host, repository, reference, credentials):
            if candidate.is_refresh_token and self.auth.is_basic(host):
                # Learnt from an earlier candidate's challenge: nothing to send Basic in its name.
                continue
            try:
                authorization = self.auth.known_authorization(host, repository, candidate, deadline)
            except AuthError as exc:
                # The token server refused this candidate: nothing more is sent in its name (asking
                # again, or asking the registry without it, would log in twice with a wrong password).
                if exc.status in _REFUSED:
                    status = exc.status
                refused(candidate, exc)
                continue
            result = send_as(candidate, authorization)
            if result.status not in _REFUSED:
                return result, candidate
            status = result.status
            tried.append(candidate.describe())
            if result.status == 403 and not result.header("www-authenticate"):
                continue
            challenge = self.auth.learn(result, host)
            if challenge is None:
                continue
            if authorization is not None and challenge.error != "invalid_token":
                # This candidate's credentials were already presented and refused (for a token:
                # insufficient scope); asking again would get the same answer.
                continue
            try:
                retry_auth = self.auth.answer(challenge, host, repository, candidate, deadline)
            except AuthError as exc:
                log.debug("token refused for %s on %s: %s", candidate.describe(), host, exc)
                refused(candidate, exc)
                continue
            if retry_auth is None or retry_auth == authorization:
                continue
            result = send_as(candidate, retry_auth)
            if result.status not in _REFUSED:
                return result, candidate
            status = result.status
        self._observer.error(host, "auth")
        raise AuthError(
            f"registry {host} refused access to {repository} (HTTP {status}) after trying "
            f"{', '.join(tried) or 'no credentials'}: check the image name, and that an "
            "imagePullSecret, --docker-config or credential provider holds credentials for "
            f"{reference.registry} with pull access" + "".join(f"; {note}" for note in notes),
            registry=host,
            status=status,
        )
