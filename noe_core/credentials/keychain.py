"""Credentials for registries, and the keychains that find them for an image.

Modelled on go-containerregistry's ``authn``: a :class:`Keychain` answers "which
credentials may open this image?" and knows nothing of HTTP. Unlike ``authn``,
a keychain returns *every* candidate, most specific first, because Kubernetes
does too: the kubelet tries each pull-secret entry matching an image until one
works, so a wrong robot account on ``*.corp`` must not hide the right one on
``reg.corp/team``. An empty answer means anonymous access (:data:`ANONYMOUS`).

Secrets never leave a :class:`Credential` except through :meth:`Credential.basic_header`
and the attributes themselves: ``repr``/``str`` show who and where from, never
the password, so credentials can be logged and put in exception messages.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from noe_core.errors import CredentialError, InvalidSettings
from noe_core.name.hostmatch import ImagePattern, parse_image_pattern
from noe_core.name.reference import Reference
from noe_core.util.watched_file import WatchedFiles

log = logging.getLogger(__name__)

# Fingerprints are keyed with a per-process secret: stable for the process's
# caches, yet a fingerprint seen in a log or a metric label cannot be used to
# test password guesses offline (a bare sha256 of a short password could).
_FINGERPRINT_KEY: Final = secrets.token_bytes(32)


@dataclass(frozen=True, repr=False)
class Credential:
    """A username and secret for one registry, and where it came from.

    ``identity_token`` is docker's ``identitytoken``: an OAuth2 refresh token
    (Azure Container Registry, ``docker login`` against some token servers).
    When set, the transport gets a registry token by POSTing
    ``grant_type=refresh_token`` to the Bearer realm instead of sending
    ``username``/``password`` (which it never sends for such a credential, not
    even as Basic auth); :attr:`is_refresh_token` tells it so.
    """

    username: str
    password: str = field(repr=False)
    source: str = ""
    identity_token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        for name in ("username", "password", "source", "identity_token"):
            if not isinstance(getattr(self, name), str):
                raise CredentialError(f"credential from {self.source!r}: {name} must be a string")
        if ":" in self.username:
            # Basic auth joins with ':' and registries split at the first one.
            raise CredentialError(f"credential from {self.source!r}: the username must not contain ':'")

    @property
    def is_refresh_token(self) -> bool:
        """Whether this is an OAuth2 refresh token (docker ``identitytoken``) rather than a password."""
        return bool(self.identity_token)

    @property
    def fingerprint(self) -> str:
        """Short non-secret digest of username and secret: equal only for the same credential."""
        return self.keyed_fingerprint(_FINGERPRINT_KEY)[:16]

    def keyed_fingerprint(self, key: bytes) -> str:
        """HMAC-SHA256 of username and secret under ``key``: a cache shared between processes
        (:mod:`noe_core.registry.cache.sqlite`) brings its own key, so its fingerprints agree
        across workers and restarts while a fingerprint alone still cannot test password guesses."""
        message = "\0".join((self.username, self.password, self.identity_token)).encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    @property
    def identity(self) -> str:
        """Stable, non-secret id for cache keys and logs: source, username and fingerprint.

        A rotated password gives a new identity, so tokens cached for the old
        one are never reused with the new one by mistake.
        """
        return f"{self.source}|{self.username}|{self.fingerprint}"

    def basic_header(self) -> str:
        """The ``Authorization`` header value for HTTP Basic authentication."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def __repr__(self) -> str:
        kind = "identitytoken" if self.is_refresh_token else "password"
        return f"Credential(username={self.username!r}, source={self.source!r}, {kind}=<redacted>)"

    def __str__(self) -> str:
        return f"{self.username or '<token>'} from {self.source or 'an unnamed source'}"


@runtime_checkable
class Keychain(Protocol):
    """Finds the credentials that may open an image.

    ``timeout`` is the time the caller can still spend, in seconds (``None`` =
    no limit); keychains that do I/O (exec plugins) must not exceed it. The
    answer is ordered, most specific first; empty means anonymous access.
    """

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        """Ordered credential candidates for ``reference``."""
        ...


class _Anonymous:
    """The keychain that knows no credentials."""

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        return ()

    def __repr__(self) -> str:
        return "ANONYMOUS"


ANONYMOUS: Final[Keychain] = _Anonymous()


def unique(credentials: Iterable[Credential]) -> tuple[Credential, ...]:
    """Keep the first of credentials with the same secret: trying one twice only costs a round trip."""
    seen: set[str] = set()
    kept: list[Credential] = []
    for credential in credentials:
        if credential.fingerprint not in seen:
            seen.add(credential.fingerprint)
            kept.append(credential)
    return tuple(kept)


class StaticKeychain:
    """Credentials bound to kubelet-style image patterns (see :mod:`noe_core.name.hostmatch`).

    Candidates come out most specific pattern first; equally specific ones keep
    the order they were given in.
    """

    def __init__(self, entries: Iterable[tuple[str | ImagePattern, Credential]] = ()) -> None:
        parsed: list[tuple[ImagePattern, Credential]] = []
        for pattern, credential in entries:
            if not isinstance(credential, Credential):
                raise InvalidSettings(f"keychain entry for {pattern!s}: expected a Credential")
            image_pattern = pattern if isinstance(pattern, ImagePattern) else parse_image_pattern(pattern)
            parsed.append((image_pattern, credential))
        # sorted() is stable: ties keep their configured order.
        self._entries: tuple[tuple[ImagePattern, Credential], ...] = tuple(
            sorted(parsed, key=lambda entry: entry[0].specificity, reverse=True)
        )

    @property
    def entries(self) -> tuple[tuple[ImagePattern, Credential], ...]:
        """The (pattern, credential) pairs, most specific first."""
        return self._entries

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        """Credentials whose pattern covers ``reference``, most specific first."""
        return unique(credential for pattern, credential in self._entries if pattern.matches(reference))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        shown = ", ".join(f"{pattern.text}: {credential!r}" for pattern, credential in self._entries)
        return f"StaticKeychain([{shown}])"


class MultiKeychain:
    """Several keychains asked in order; their answers are concatenated without repeats.

    Order is the caller's statement of priority, e.g. the pod's pull secrets,
    then the service account's, then node files, then credential providers.
    """

    def __init__(self, *keychains: Keychain) -> None:
        self._keychains = tuple(keychains)

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        """Every keychain's candidates in order; later keychains get what is left of ``timeout``."""
        start = time.monotonic()
        found: list[Credential] = []
        for keychain in self._keychains:
            remaining = None if timeout is None else timeout - (time.monotonic() - start)
            if remaining is not None and remaining <= 0:
                log.warning("no time left to ask %r for credentials for %s", keychain, reference)
                break
            found.extend(keychain.resolve(reference, timeout=remaining))
        return unique(found)

    def __repr__(self) -> str:
        return f"MultiKeychain({', '.join(repr(keychain) for keychain in self._keychains)})"


class FileKeychain:
    """A keychain read from a file, read again whenever the file changes.

    Node credential files are rotated in place (by cron jobs, by cloud agents),
    and the webhook runs for months: checking the file's mtime, size and inode
    on each lookup is one ``stat`` and keeps credentials fresh. The first read
    raises (start-up stops on a wrong path); a later unreadable or malformed
    version is logged and the last good one kept, because a rotation caught
    half-written should not drop every credential (see :mod:`noe_core.util.watched_file`).
    """

    def __init__(self, path: str | os.PathLike[str], load: Callable[[bytes, str], Keychain], source: str) -> None:
        self._path = os.fspath(path)
        self._load = load
        self._source = source
        # CredentialError messages name the source and never the secret, so they may be logged.
        self._file = WatchedFiles([self._path], self._read, what=source, keep_on=(CredentialError,))
        try:
            self._file.get()
        except OSError as exc:
            raise InvalidSettings(f"cannot read {source}: {exc.strerror or exc}") from None
        except CredentialError as exc:
            raise InvalidSettings(str(exc)) from None  # at start-up, a malformed file stops it

    @property
    def path(self) -> str:
        return self._path

    def _read(self) -> Keychain:
        with open(self._path, "rb") as handle:
            return self._load(handle.read(), self._source)

    def current(self) -> Keychain:
        """The keychain for the file as it is now (re-read if it changed since last time)."""
        return self._file.get()

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        """Candidates from the file's current content."""
        return self.current().resolve(reference, timeout=timeout)

    def __repr__(self) -> str:
        return f"FileKeychain({self._source!r})"
