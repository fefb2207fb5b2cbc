"""Image references, read with the distribution reference grammar.

A pod names its images the way ``docker pull`` does (``nginx``,
``ghcr.io/org/img:1.2``, ``localhost:5000/a@sha256:…``). The kubelet expands
those short names before pulling, so the webhook must expand them the same way
or it would inspect a different image than the one that will run:

* the first ``/``-separated component is a registry host when it contains
  ``.`` or ``:``, is ``localhost``, or has an upper-case letter (a repository
  never can, so distribution reads it as a host); otherwise the registry is
  ``docker.io`` (``index.docker.io`` is the same registry and is normalised);
* on ``docker.io`` a one-component repository is an official image and gains
  the ``library/`` prefix;
* with neither tag nor digest the tag is ``latest``; with only a digest the tag
  stays ``None`` (the digest alone names the image, and inventing ``latest``
  would print a tag the user never wrote);
* ``name:tag@digest`` keeps both, but the digest is what gets pulled, so
  :attr:`Reference.identifier` is the digest.

Only ``sha256`` digests of 64 lower-case hex characters are accepted: that is
the one algorithm registries and the kubelet use, and anything else is far more
likely a typo than a real image. Host names follow the domain grammar and are
not lower-cased (distribution does not either); IPv6 hosts go in brackets
(``[::1]:5000/x``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from noe_core.errors import InvalidReference

DEFAULT_REGISTRY = "docker.io"
DOCKER_HUB_API_HOST = "registry-1.docker.io"
DEFAULT_TAG = "latest"
NAME_TOTAL_LENGTH_MAX = 255

_LEGACY_DOCKER_HUB = "index.docker.io"
_OFFICIAL_PREFIX = "library/"

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = re.compile(rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_WHITESPACE = re.compile(r"\s")


@dataclass(frozen=True)
class Reference:
    """A fully expanded image reference; ``str()`` prints it back so that it parses to itself.

    Constructing one directly validates and normalises the fields the same way
    :func:`parse_reference` does (``index.docker.io``, ``library/``, default tag
    ``latest``), so every instance obeys the grammar and prints canonically.
    """

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        shown = _show(self.registry, self.repository, self.tag, self.digest)
        registry = _check_registry(shown, self.registry)
        repository = _check_repository(shown, registry, self.repository)
        if self.tag is not None and not _TAG.fullmatch(self.tag):
            raise InvalidReference(shown, f"tag {self.tag!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}")
        if self.digest is not None:
            _check_digest(shown, self.digest)
        if self.tag is None and self.digest is None:
            object.__setattr__(self, "tag", DEFAULT_TAG)
        object.__setattr__(self, "registry", registry)
        object.__setattr__(self, "repository", repository)

    @property
    def api_host(self) -> str:
        """The host that serves the registry API (Docker Hub's differs from its name)."""
        return DOCKER_HUB_API_HOST if self.registry == DEFAULT_REGISTRY else self.registry

    @property
    def identifier(self) -> str:
        """What to ask the registry for: the digest when there is one, since that is what gets pulled."""
        if self.digest is not None:
            return self.digest
        assert self.tag is not None  # guaranteed by __post_init__
        return self.tag

    @property
    def context(self) -> str:
        """``registry/repository``: the name without tag or digest (cache and credential key)."""
        return f"{self.registry}/{self.repository}"

    def with_registry(self, host: str) -> Reference:
        """The same image on another registry host, e.g. a pull-through mirror."""
        return Reference(host, self.repository, self.tag, self.digest)

    def with_digest(self, digest: str) -> Reference:
        """The same repository pinned to ``digest`` (the tag is kept for display)."""
        return Reference(self.registry, self.repository, self.tag, digest)

    def __str__(self) -> str:
        return _show(self.registry, self.repository, self.tag, self.digest)


def _show(registry: str, repository: str, tag: str | None, digest: str | None) -> str:
    text = f"{registry}/{repository}"
    if tag is not None:
        text += f":{tag}"
    if digest is not None:
        text += f"@{digest}"
    return text


def _check_registry(text: str, registry: str) -> str:
    if not isinstance(registry, str) or not registry:
        raise InvalidReference(text, "empty registry host")
    if not _HOST.fullmatch(registry):
        raise InvalidReference(
            text, f"registry {registry!r} is not a host name, IPv4 or [IPv6] address with optional :port"
        )
    if not _looks_like_host(registry):
        # printed as "registry/repo" it would read back as a Docker Hub repository
        raise InvalidReference(
            text,
            f"registry {registry!r} would be read as a Docker Hub namespace; "
            "a registry host needs a '.', a ':port' or to be 'localhost'",
        )
    return DEFAULT_REGISTRY if registry == _LEGACY_DOCKER_HUB else registry


def _check_repository(text: str, registry: str, repository: str) -> str:
    if not isinstance(repository, str) or not repository:
        raise InvalidReference(text, "empty repository name")
    for component in repository.split("/"):
        if not component:
            raise InvalidReference(text, "empty path component (a leading, trailing or doubled '/')")
        if not _PATH_COMPONENT.fullmatch(component):
            if component.lower() != component:
                raise InvalidReference(text, f"repository component {component!r} must be lower case")
            raise InvalidReference(
                text,
                f"repository component {component!r} must be lower-case letters and digits "
                "separated by '.', '_', '__' or '-'",
            )
    if registry == DEFAULT_REGISTRY and "/" not in repository:
        repository = _OFFICIAL_PREFIX + repository
    if len(registry) + 1 + len(repository) > NAME_TOTAL_LENGTH_MAX:
        raise InvalidReference(text, f"the full name is longer than {NAME_TOTAL_LENGTH_MAX} characters")
    return repository


def _check_digest(text: str, digest: str) -> None:
    if not isinstance(digest, str):
        raise InvalidReference(text, "the digest must be a string")
    if _DIGEST.fullmatch(digest):
        return
    algorithm, sep, encoded = digest.partition(":")
    if not sep:
        raise InvalidReference(text, f"digest {digest!r} must be 'sha256:' followed by 64 hex characters")
    if algorithm != "sha256":
        raise InvalidReference(text, f"digest algorithm {algorithm!r} is not supported; only sha256 is")
    if len(encoded) != 64:
        raise InvalidReference(text, f"a sha256 digest has 64 hex characters, not {len(encoded)}")
    raise InvalidReference(text, "a sha256 digest must be lower-case hexadecimal")


def _looks_like_host(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost" or component.lower() != component


def parse_reference(text: str) -> Reference:
    """Read an image reference as the kubelet does, expanding short Docker Hub names.

    Raises :class:`~noe_core.errors.InvalidReference` naming the first rule broken.
    """
    if not isinstance(text, str):
        raise InvalidReference(repr(text), "an image reference must be a string")
    if len(text) <= REMEMBERED_LENGTH:
        return _remembered(text)
    return _parse(text)


REMEMBERED = 4096
"""References parsed once and remembered (an explicit cache, per process): every lookup of an image parses it,
and the controller looks up each pod's images, the same few hundred for a cluster's pods."""
REMEMBERED_LENGTH = 512
"""Longer texts are parsed each time, so the cache's size stays bounded (a reference that fails is never kept)."""


@functools.lru_cache(maxsize=REMEMBERED)
def _remembered(text: str) -> Reference:
    return _parse(text)


def _parse(text: str) -> Reference:
    if not text:
        raise InvalidReference(text, "empty image reference")
    if _WHITESPACE.search(text):
        raise InvalidReference(text, "contains whitespace")
    name, at, digest = text.partition("@")
    if at:
        if "@" in digest:
            raise InvalidReference(text, "more than one '@'")
        if not digest:
            raise InvalidReference(text, "empty digest after '@'")
        _check_digest(text, digest)
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag: str | None = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not tag:
            raise InvalidReference(text, "empty tag after ':'")
        if not _TAG.fullmatch(tag):
            raise InvalidReference(
                text, f"tag {tag!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}} (at most 128 characters)"
            )
    if not name:
        raise InvalidReference(text, "empty repository name")
    first, slash_found, rest = name.partition("/")
    if slash_found and _looks_like_host(first):
        registry, repository = first, rest
        if not repository:
            raise InvalidReference(text, "empty repository name after the registry host")
    else:
        registry, repository = DEFAULT_REGISTRY, name
    if tag is None and not at:
        tag = DEFAULT_TAG
    try:
        return Reference(registry, repository, tag, digest if at else None)
    except InvalidReference as exc:
        raise InvalidReference(text, exc.reason) from None
