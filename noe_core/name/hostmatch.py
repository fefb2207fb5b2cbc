"""Which registry (and repository) a configured pattern applies to.

Two matching languages are used by noe's settings, on purpose kept apart:

**Image patterns** (:func:`parse_image_pattern`, :func:`image_matches`) follow the
kubelet, because the same strings come from the kubelet's own inputs — docker
``config.json`` keys, image pull Secrets, ``matchImages`` of credential
providers — and from ``--private-registries``, documented as "kubelet rules".
A credential must apply to exactly the images the kubelet would use it for:

* the host is split into DNS labels; a pattern must have as many labels as the
  image's host, and a ``*`` (or ``?``) matches inside one label only:
  ``*.corp`` matches ``a.corp`` but neither ``corp`` nor ``a.b.corp``;
* ports are compared as strings and must be equal: a pattern without port only
  matches images without port, ``reg.corp:5000`` only matches images on port
  5000 (the kubelet's ``URLsMatch`` does exactly this; wildcards in ports are
  not supported there either, so they are rejected here);
* the pattern's path must be a prefix of the repository, compared by whole
  ``/``-separated components (``reg.corp/team`` covers ``reg.corp/team/app``
  but not ``reg.corp/teamx``; the kubelet compares raw strings here, which
  would hand a team's credential to its neighbour — deliberately stricter);
* ``https://``/``http://`` are ignored, and for docker config keys a leading
  ``/v1/`` or ``/v2/`` is too (``https://index.docker.io/v1/`` is Docker Hub's key);
* ``docker.io``, ``index.docker.io`` and ``registry-1.docker.io`` are one registry;
* host names are compared case-insensitively (DNS is).

**Host globs** (:func:`host_glob_matches`) select a registry host for
``--insecure-registries`` and ``--registry-proxies``: shell-style, ``*`` matches
any run of characters including dots (``*.gcr.io``, ``127.0.0.1:*``), ``?`` one
character; everything else is literal (so ``[::1]:5000`` is an IPv6 host, not a
character class).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from noe_core.errors import InvalidSettings
from noe_core.name.reference import Reference, parse_reference
from noe_core.util.comma_list import parse_comma_list

DOCKER_HUB = "docker.io"
DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_LABEL = re.compile(r"[a-z0-9_*?-]+")
_PORT = re.compile(r"[0-9]{1,5}")
_PATH_COMPONENT = re.compile(r"[a-z0-9._-]+")


def canonical_host(host: str) -> str:
    """``host`` lower-cased, with Docker Hub's aliases folded into ``docker.io``."""
    lowered = host.lower()
    return DOCKER_HUB if lowered in DOCKER_HUB_ALIASES else lowered


def _split_host_port(hostport: str) -> tuple[str, str] | None:
    """``(host, port)`` with ``port == ""`` when absent; ``None`` when unreadable."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            return None
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        if not rest:
            return host, ""
        if not rest.startswith(":"):
            return None
        return host, rest[1:]
    if hostport.count(":") > 1:
        return None
    host, _, port = hostport.partition(":")
    return host, port


@functools.lru_cache(maxsize=1024)
def _glob_regex(glob: str) -> re.Pattern[str]:
    parts = []
    for char in glob:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


@dataclass(frozen=True)
class ImagePattern:
    """A kubelet-style image pattern, parsed once; see the module docstring for the rules."""

    text: str
    labels: tuple[str, ...]
    port: str = ""
    path: tuple[str, ...] = ()

    @property
    def specificity(self) -> tuple[int, int, int, int]:
        """Sort key, larger = more specific: path depth, literal labels, labels, port."""
        literal = sum(1 for label in self.labels if "*" not in label and "?" not in label)
        return (len(self.path), literal, len(self.labels), 1 if self.port else 0)

    def matches(self, image: Reference | str) -> bool:
        """Whether the kubelet would use this pattern's credential for ``image``."""
        reference = image if isinstance(image, Reference) else parse_reference(image)
        split = _split_host_port(reference.registry)
        if split is None:  # pragma: no cover - Reference validated the host
            return False
        host, port = split
        if port != self.port:
            return False
        labels = _host_labels(canonical_host(host))
        if len(labels) != len(self.labels):
            return False
        repository = tuple(reference.repository.split("/"))
        if repository[: len(self.path)] != self.path:
            return False
        pairs = zip(self.labels, labels, strict=True)
        return all(_glob_regex(want).fullmatch(got) is not None for want, got in pairs)

    def __str__(self) -> str:
        return self.text


def _host_labels(host: str) -> tuple[str, ...]:
    # An IPv6 literal is one label: its colons and brackets are not DNS structure.
    return (host,) if host.startswith("[") else tuple(host.split("."))


def parse_image_pattern(text: str, *, docker_config_key: bool = False) -> ImagePattern:
    """Read one kubelet image pattern; raises :class:`InvalidSettings` naming the pattern.

    ``docker_config_key=True`` also drops a leading ``/v1/`` or ``/v2/`` path, as
    the kubelet and docker do for ``config.json`` keys.
    """
    if not isinstance(text, str):
        raise InvalidSettings(f"image pattern {text!r} must be a string")
    original = text
    text = text.strip()
    if not text:
        raise InvalidSettings("empty image pattern")
    if any(char.isspace() for char in text):
        raise InvalidSettings(f"image pattern {original!r} contains whitespace")
    scheme = _SCHEME.match(text)
    if scheme:
        if scheme.group(0).lower() not in ("https://", "http://"):
            raise InvalidSettings(f"image pattern {original!r}: only http:// and https:// may prefix a host")
        text = text[scheme.end() :]
    hostport, slash, path_text = text.partition("/")
    if docker_config_key and slash and (path_text.startswith(("v1/", "v2/")) or path_text in ("v1", "v2")):
        path_text = path_text[3:]
    split = _split_host_port(hostport)
    if split is None or not split[0]:
        raise InvalidSettings(f"image pattern {original!r}: cannot read a host[:port] in {hostport!r}")
    host, port = split
    if port and not _PORT.fullmatch(port):
        raise InvalidSettings(
            f"image pattern {original!r}: port {port!r} must be a number (ports match exactly, no wildcards)"
        )
    host = host.lower()
    if host.startswith("["):
        labels: tuple[str, ...] = (host,)
    else:
        labels = tuple(host.split("."))
        for label in labels:
            if not _LABEL.fullmatch(label):
                raise InvalidSettings(
                    f"image pattern {original!r}: host label {label!r} must be letters, digits, '-', "
                    "or the wildcards '*' and '?'"
                )
        if not port and ".".join(labels) in DOCKER_HUB_ALIASES:
            labels = tuple(DOCKER_HUB.split("."))
    path = tuple(component for component in path_text.split("/") if component)
    for component in path:
        if not _PATH_COMPONENT.fullmatch(component):
            raise InvalidSettings(
                f"image pattern {original!r}: path component {component!r} must be a literal repository "
                "component (wildcards are only supported in the host)"
            )
    return ImagePattern(original.strip(), labels, port, path)


def image_matches(pattern: str | ImagePattern, image: str | Reference) -> bool:
    """Whether a kubelet-style ``pattern`` covers ``image`` (a string is parsed as a reference)."""
    parsed = pattern if isinstance(pattern, ImagePattern) else parse_image_pattern(pattern)
    return parsed.matches(image)


def specificity(pattern: str | ImagePattern) -> tuple[int, int, int, int]:
    """Sort key for candidates, larger = more specific (sort with ``reverse=True``)."""
    parsed = pattern if isinstance(pattern, ImagePattern) else parse_image_pattern(pattern)
    return parsed.specificity


def parse_image_patterns(text: str) -> tuple[ImagePattern, ...]:
    """A comma-separated list of image patterns (``--private-registries``); blanks are skipped."""
    return tuple(parse_image_pattern(item) for item in parse_patterns(text))


def host_glob_matches(pattern: str, host: str) -> bool:
    """Shell-style match of a registry host (``*.gcr.io``, ``127.0.0.1:*``), case-insensitive.

    Docker Hub's aliases are one host on both sides, so ``docker.io=mirror`` and
    ``index.docker.io=mirror`` mean the same proxy rule.
    """
    return _glob_regex(canonical_host(pattern.strip())).fullmatch(canonical_host(host)) is not None


def parse_patterns(text: str) -> tuple[str, ...]:
    """A comma-separated flag value as patterns (:func:`parse_comma_list`); a pattern holding whitespace is refused."""
    items = parse_comma_list(text)
    for item in items:
        if any(char.isspace() for char in item):
            raise InvalidSettings(f"pattern {item!r} contains whitespace")
    return items
