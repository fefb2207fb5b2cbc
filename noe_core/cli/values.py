"""Typed value parsers: one per kind of flag value, shared by every command and every ``NOE_*`` variable.

Each parser is a callable ``str → value`` (an argparse ``type=``) that raises
:class:`BadValue` whose message is the predicate of one sentence —
``is not a number of seconds``, ``must be from 1 to 100`` — so that
:mod:`noe_core.cli.parser` can prefix the flag or variable and the value the user
wrote, and every bad value reads the same way::

    noe mutate: argument --lookup-timeout: 'abc' is not a number of seconds

Syntax-level parsers that already exist elsewhere (architecture aliases, Go
durations, toleration and proxy syntax, image patterns) are reused, never
re-implemented here. Whether a file exists is a fact about the machine the
command runs on, not about the text: :class:`ExistingFile` only reads the path,
and the command checks existence when it builds its settings
(:func:`noe_core.cli.parser.require`), so a Helm chart's arguments can be
parsed on any machine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Generic, TypeVar

from noe_core.errors import InvalidSettings
from noe_core.image.platform import normalize_arch_name, normalize_os
from noe_core.name.hostmatch import parse_image_patterns, parse_patterns
from noe_core.name.kubernetes import is_arch_name, is_dns_subdomain, is_label_key, is_label_value
from noe_core.policies.settings import ArchToleration, parse_arch_tolerations
from noe_core.registry.cache.url import CacheURL, parse_cache_url, redact
from noe_core.registry.settings import RegistryProxy, parse_registry_proxies
from noe_core.report.pricing import parse_prices
from noe_core.util.comma_list import parse_comma_list
from noe_core.util.duration import parse_duration

T = TypeVar("T")

_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "f", "n"})
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_LEADING_FLAG = re.compile(r"^--[a-z0-9-]+:?\s*")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class BadValue(ValueError):
    """A refused value; the message completes ``'<value>' …`` (e.g. ``is not an integer``)."""


def _bounds(minimum: float, maximum: float, *, above: bool = False, unit: str = "") -> str:
    low = f"more than {minimum:g}" if above else f"at least {minimum:g}"
    suffix = f" {unit}" if unit else ""
    if maximum == math.inf:
        return f"must be {low}{suffix}"
    if above:
        return f"must be {low} and at most {maximum:g}{suffix}"
    return f"must be from {minimum:g} to {maximum:g}{suffix}"


@dataclass(frozen=True)
class Seconds:
    """A number of seconds (``10``, ``0.5``) within bounds; ``above`` makes the minimum exclusive."""

    minimum: float = 0.0
    maximum: float = math.inf
    above: bool = False
    metavar: str = "SECONDS"

    def __call__(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise BadValue("is not a number of seconds") from None
        too_low = value <= self.minimum if self.above else value < self.minimum
        if not math.isfinite(value) or too_low or value > self.maximum:
            raise BadValue(_bounds(self.minimum, self.maximum, above=self.above, unit="seconds"))
        return value


@dataclass(frozen=True)
class Integer:
    """A whole number within inclusive bounds."""

    minimum: int = 0
    maximum: float = math.inf
    metavar: str = "N"

    def __call__(self, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise BadValue("is not an integer") from None
        if not self.minimum <= value <= self.maximum:
            raise BadValue(_bounds(self.minimum, self.maximum))
        return value


@dataclass(frozen=True)
class Duration:
    """Seconds as a number (``3600``) or a Go duration (``1h``, ``30s``, ``1h30m``), as the Go Noe's flags.

    The reading is :func:`~noe_core.util.duration.parse_duration`'s (also used for the credential
    provider's cache durations); only its wording is adapted.
    """

    metavar: str = "DURATION"

    def __call__(self, text: str) -> float:
        try:
            return parse_duration(text, "")
        except InvalidSettings as exc:
            raise BadValue(str(exc).strip().removeprefix(repr(text)).strip()) from None


@dataclass(frozen=True)
class Boolean:
    """``true``/``false`` and the usual spellings (``1``, ``yes``, ``on``…), for switches set through variables."""

    metavar: str = "BOOL"

    def __call__(self, text: str) -> bool:
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise BadValue("is not a boolean: use true or false")


@dataclass(frozen=True)
class CommaList(Generic[T]):
    """Comma-separated items (blanks and repeats dropped, order kept), each read by ``item``."""

    item: Callable[[str], T]
    metavar: str = "A,B,..."

    def __call__(self, text: str) -> tuple[T, ...]:
        out: list[T] = []
        for entry in parse_comma_list(text):
            try:
                value = self.item(entry)
            except BadValue as exc:
                raise BadValue(f"holds {entry!r}, which {exc}") from None
            if value not in out:
                out.append(value)
        return tuple(out)


@dataclass(frozen=True)
class Architecture:
    """A CPU architecture as node labels spell it; aliases normalised (``x86_64`` → ``amd64``)."""

    allow_empty: bool = False
    metavar: str = "ARCH"

    def __call__(self, text: str) -> str:
        if not text.strip():
            if self.allow_empty:
                return ""
            raise BadValue("is not an architecture name such as amd64 or arm64")
        arch = normalize_arch_name(text.strip())
        if not is_arch_name(arch):
            raise BadValue("is not an architecture name such as amd64 or arm64")
        return arch


@dataclass(frozen=True)
class OsName:
    """An OS name as node labels spell it (``linux``); aliases normalised (``macos`` → ``darwin``)."""

    metavar: str = "OS"

    def __call__(self, text: str) -> str:
        name = normalize_os(text)
        if not is_arch_name(name):
            raise BadValue("is not an OS name such as linux")
        return name


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of words, compared case-insensitively and returned as the set spells it."""

    choices: tuple[str, ...]

    @property
    def metavar(self) -> str:
        return "{" + ",".join(self.choices) + "}"

    def __call__(self, text: str) -> str:
        folded = {choice.lower(): choice for choice in self.choices}
        found = folded.get(text.strip().lower())
        if found is None:
            raise BadValue(f"must be one of {', '.join(self.choices)}")
        return found


LOG_LEVEL = Choice(LOG_LEVELS)


@dataclass(frozen=True)
class LabelKey:
    """A Kubernetes label key (optional DNS prefix, ≤63-character name)."""

    metavar: str = "KEY"

    def __call__(self, text: str) -> str:
        if not is_label_key(text):
            raise BadValue("is not a valid label key")
        return text


@dataclass(frozen=True)
class LabelPairs:
    """``key=value,...``: a pod's labels (keys and values as Kubernetes accepts them), as a selector reads them."""

    metavar: str = "KEY=VALUE,..."

    def __call__(self, text: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for entry in parse_comma_list(text):
            key, sep, value = entry.partition("=")
            if not sep or not is_label_key(key.strip()) or not is_label_value(value.strip()):
                raise BadValue(f"holds {entry!r}, which is not a label key=value")
            out[key.strip()] = value.strip()
        return out


@dataclass(frozen=True)
class DnsName:
    """A Kubernetes object name: a DNS label (namespaces, Services) or subdomain (Secrets, configurations)."""

    subdomain: bool = False
    allow_empty: bool = False
    metavar: str = "NAME"

    def __call__(self, text: str) -> str:
        name = text.strip()
        if not name and self.allow_empty:
            return ""
        valid = len(name) <= 253 and is_dns_subdomain(name) if self.subdomain else bool(_DNS_LABEL.match(name))
        if not valid:
            what = "a DNS subdomain" if self.subdomain else "a DNS label"
            raise BadValue(f"is not {what} (lower-case letters, digits and '-')")
        return name


@dataclass(frozen=True)
class FilePath:
    """A path the command creates or may find absent (a state directory, a socket); empty means none."""

    metavar: str = "PATH"

    def __call__(self, text: str) -> Path | None:
        if not text.strip():
            return None
        if "\0" in text:
            raise BadValue("is not a path")
        return Path(text).expanduser()


@dataclass(frozen=True)
class ExistingFile(FilePath):
    """A file that must exist when the command runs; empty means none.

    Only the text is read here: the file is looked for when the command builds
    its settings (:func:`noe_core.cli.parser.require`), so a Helm chart's
    arguments parse on a machine that lacks the node's files.
    """

    metavar: str = "FILE"


@dataclass(frozen=True)
class ExistingDir(FilePath):
    """A directory that must exist when the command runs (see :class:`ExistingFile`)."""

    metavar: str = "DIR"


@dataclass(frozen=True)
class Text:
    """Free text the command interprets itself (a candidate path, stdin's ``-``); nothing to refuse."""

    metavar: str = "TEXT"

    def __call__(self, text: str) -> str:
        return text


@dataclass(frozen=True)
class Line:
    """Text shown to users as written (a warning's hint): one line of printable characters, bounded,
    so it is never cut or garbled where it is shown."""

    max_length: int
    metavar: str = "TEXT"

    def __call__(self, text: str) -> str:
        if not all(char.isprintable() for char in text):
            raise BadValue("must be one line of printable characters")
        if len(text) > self.max_length:
            raise BadValue(f"must be at most {self.max_length} characters (it has {len(text)})")
        return text


@dataclass(frozen=True)
class Syntax(Generic[T]):
    """A value with its own syntax, read by an existing ``parse`` that raises :class:`InvalidSettings`.

    The parse's message is kept as the reason, less the flag and value it starts with (the
    usage error names them already).
    """

    parse: Callable[[str], T]
    metavar: str = "VALUE"

    def __call__(self, text: str) -> T:
        try:
            return self.parse(text)
        except InvalidSettings as exc:
            reason = _LEADING_FLAG.sub("", str(exc)).removeprefix(repr(text)).lstrip(": ")
            raise BadValue(f"is not valid: {reason}") from None


def _image_patterns(text: str) -> tuple[str, ...]:
    """Comma-separated kubelet image patterns, validated now rather than on the first lookup."""
    patterns = parse_patterns(text)
    parse_image_patterns(",".join(patterns))
    return patterns


ARCH_TOLERATIONS: Syntax[tuple[ArchToleration, ...]] = Syntax(parse_arch_tolerations, "ARCH=KEY[=VALUE][:EFFECT],...")
REGISTRY_PROXIES: Syntax[tuple[RegistryProxy, ...]] = Syntax(parse_registry_proxies, "GLOB=MIRROR,...")
IMAGE_PATTERNS: Syntax[tuple[str, ...]] = Syntax(_image_patterns, "PATTERNS")
HOST_GLOBS: Syntax[tuple[str, ...]] = Syntax(parse_patterns, "GLOBS")
ARCH_PRICES: Syntax[dict[str, Fraction]] = Syntax(parse_prices, "ARCH=PRICE,...")


@dataclass(frozen=True)
class SecretURL:
    """A ``redis://`` / ``rediss://`` URL that may hold a password: empty means none.

    :meth:`shown` is how a usage error quotes the value: with the password masked.
    """

    metavar: str = "URL"

    def __call__(self, text: str) -> CacheURL | None:
        if not text.strip():
            return None
        try:
            return parse_cache_url(text)
        except InvalidSettings as exc:
            raise BadValue(str(exc)) from None

    @staticmethod
    def shown(text: str) -> str:
        return redact(text)


ValueParser = Callable[[str], Any]
"""What every kind above is: a callable ``str → value`` raising :class:`BadValue` (a ``ValueError``)."""
