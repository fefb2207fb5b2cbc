"""``WWW-Authenticate`` parsing (RFC 7235), pure.

A registry that wants credentials answers 401 with one or more challenges::

    WWW-Authenticate: Bearer realm="https://auth.example/token",service="registry.example",
                      scope="repository:team/app:pull,push", Basic realm="fallback"

The grammar is ``challenge = scheme [ token68 / #auth-param ]`` and challenges
are themselves separated by commas, so a comma may end a parameter or start
a new challenge: a name followed by ``=`` is a parameter, anything else is the
next scheme. Values are tokens or quoted strings (``\\"`` escapes). Registries
are not always strict, so an unquoted value runs up to the next comma or
space (``realm=https://auth.example/token`` is accepted).

Anything that does not parse raises :class:`ChallengeError` (an
:class:`~noe_core.errors.AuthError` naming the registry), never another
exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from noe_core.errors import ChallengeError

__all__ = ["MAX_HEADER", "Challenge", "ChallengeError", "parse_challenges", "preferred"]

_TCHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_TOKEN68 = frozenset("-._~+/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WS = " \t"
MAX_HEADER = 16 * 1024


@dataclass(frozen=True)
class Challenge:
    """One challenge: ``scheme`` lower-cased, parameter names lower-cased."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    token68: str = ""

    @property
    def realm(self) -> str:
        return self.params.get("realm", "")

    @property
    def service(self) -> str:
        return self.params.get("service", "")

    @property
    def scope(self) -> str:
        return self.params.get("scope", "")

    @property
    def error(self) -> str:
        """``insufficient_scope``, ``invalid_token``… when the registry says why."""
        return self.params.get("error", "")


class _Parser:
    def __init__(self, text: str, registry: str) -> None:
        self.text = text
        self.pos = 0
        self.registry = registry

    def fail(self, reason: str) -> ChallengeError:
        return ChallengeError(f"{reason} at character {self.pos}", registry=self.registry)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.peek() and self.peek() in _WS:
            self.pos += 1

    def skip_separators(self) -> None:
        while self.peek() and (self.peek() in _WS or self.peek() == ","):
            self.pos += 1

    def token(self) -> str:
        start = self.pos
        while self.peek() and self.peek() in _TCHARS:
            self.pos += 1
        return self.text[start : self.pos]

    def quoted(self) -> str:
        assert self.peek() == '"'
        self.pos += 1
        out: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise self.fail("unterminated quoted string")
            self.pos += 1
            if char == '"':
                return "".join(out)
            if char == "\\":
                escaped = self.peek()
                if not escaped:
                    raise self.fail("unterminated escape in quoted string")
                self.pos += 1
                out.append(escaped)
            elif char in "\r\n\0":
                raise self.fail("control character in quoted string")
            else:
                out.append(char)

    def bare_value(self) -> str:
        start = self.pos
        while self.peek() and self.peek() not in ', \t"':
            if ord(self.peek()) < 0x20 or self.peek() == "\x7f":
                raise self.fail("control character in value")
            self.pos += 1
        return self.text[start : self.pos]

    def parse(self) -> tuple[Challenge, ...]:
        challenges: list[Challenge] = []
        self.skip_separators()
        while self.pos < len(self.text):
            challenges.append(self.challenge())
            self.skip_separators()
        if not challenges:
            raise self.fail("no challenge")
        return tuple(challenges)

    def challenge(self) -> Challenge:
        scheme = self.token()
        if not scheme:
            raise self.fail(f"expected an authentication scheme, found {self.peek()!r}")
        if self.peek() and self.peek() not in _WS + ",":
            raise self.fail(f"unexpected {self.peek()!r} after scheme {scheme[:40]!r}")
        self.skip_ws()
        params: dict[str, str] = {}
        token68 = self.try_token68()
        if token68:
            return Challenge(scheme.lower(), MappingProxyType(params), token68)
        while self.peek() and self.peek() != ",":
            mark = self.pos
            name = self.token()
            self.skip_ws()
            if not name or self.peek() != "=":
                if params or (mark == self.pos and not name):
                    # The start of the next challenge (or garbage, reported by the caller's loop).
                    self.pos = mark
                    break
                raise self.fail(f"expected name=value after scheme {scheme[:40]!r}")
            self.pos += 1
            self.skip_ws()
            value = self.quoted() if self.peek() == '"' else self.bare_value()
            key = name.lower()
            if key in params:
                raise self.fail(f"parameter {key[:40]!r} given twice")
            params[key] = value
            self.skip_ws()
            if self.peek() == ",":
                self.pos += 1
                self.skip_separators()
                mark = self.pos
                name = self.token()
                self.skip_ws()
                is_param = bool(name) and self.peek() == "="
                self.pos = mark
                if not is_param:
                    break
            elif self.peek():
                raise self.fail(f"expected ',' after parameter {key[:40]!r}, found {self.peek()!r}")
        return Challenge(scheme.lower(), MappingProxyType(params))

    def try_token68(self) -> str:
        """A token68 credential blob (``Negotiate abc==``): only when no ``name=value`` follows."""
        start = self.pos
        while self.peek() and self.peek() in _TOKEN68:
            self.pos += 1
        if self.pos == start:
            return ""
        while self.peek() == "=":
            self.pos += 1
        end = self.pos
        self.skip_ws()
        if self.text[end - 1] == "=" and self.peek() not in ("", ","):
            # "name=value": not a token68 blob.
            self.pos = start
            return ""
        if self.text[end - 1] != "=" and self.peek() not in ("", ","):
            self.pos = start
            return ""
        if self.text[end - 1] != "=" and self.peek() in ("", ","):
            # A lone word: the next challenge's scheme or a token68 without padding. A scheme
            # followed by a bare word is a token68 only when no parameter follows it.
            return self.text[start:end]
        return self.text[start:end]


def parse_challenges(header: str, *, registry: str = "") -> tuple[Challenge, ...]:
    """Every challenge in a ``WWW-Authenticate`` value (several headers may be joined by ``,``)."""
    if not isinstance(header, str):
        raise ChallengeError("not a string", registry=registry)
    if len(header) > MAX_HEADER:
        raise ChallengeError(f"longer than {MAX_HEADER} characters", registry=registry)
    return _Parser(header, registry).parse()


def preferred(challenges: tuple[Challenge, ...]) -> Challenge | None:
    """The challenge noe answers: Bearer before Basic; ``None`` when neither is offered."""
    for scheme in ("bearer", "basic"):
        for challenge in challenges:
            if challenge.scheme == scheme:
                return challenge
    return None
