"""How noe talks to registries: mirrors, insecure hosts, trust, credentials policy, caching.

:class:`RegistrySettings` is a frozen value built once at start-up (from flags
by :mod:`noe_core.cli.registry_options`) and handed to the resolver. Parsing
helpers turn the flag syntax into it and raise
:class:`~noe_core.errors.InvalidSettings` with a message that names the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from noe_core.errors import InvalidSettings
from noe_core.util.comma_list import parse_comma_list

MIB = 1024 * 1024
DEFAULT_USER_AGENT = "noe-webhook/0.1.0 (Kubernetes architecture-placement webhook)"

_HOST_GLOB = re.compile(r"^[A-Za-z0-9*?.\-\[\]:]+$")
_MIRROR = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)


@dataclass(frozen=True)
class RegistryProxy:
    """``pattern`` (a glob on the registry host) is served by ``mirror`` (``host[:port][/path]``)."""

    pattern: str
    mirror: str

    @property
    def mirror_host(self) -> str:
        return self.mirror.split("/", 1)[0]

    @property
    def mirror_prefix(self) -> str:
        """A repository prefix such as Harbor's proxy-cache project (``""`` when none)."""
        _, _, prefix = self.mirror.partition("/")
        return prefix


@dataclass(frozen=True)
class RegistrySettings:
    """Registry access policy. Defaults are what a cluster without flags gets."""

    registry_proxies: tuple[RegistryProxy, ...] = ()
    insecure_registries: tuple[str, ...] = ()
    registry_ca_file: str | None = None
    private_registries: tuple[str, ...] = ()
    cache_ttl: float = 3600.0
    negative_cache_ttl: float = 30.0
    verify_platform_manifests: bool = True
    max_manifest_bytes: int = 4 * MIB
    max_index_entries: int = 256
    max_parallel: int = 8
    max_cached_images: int = 4096
    max_cached_tags: int = 8192
    request_timeout: float = 10.0
    max_retries: int = 3
    user_agent: str = DEFAULT_USER_AGENT

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.cache_ttl < 0 or self.negative_cache_ttl < 0:
            raise InvalidSettings("cache TTLs must not be negative")
        if self.max_manifest_bytes < 1024:
            raise InvalidSettings("max_manifest_bytes must be at least 1024")
        if self.max_index_entries < 1:
            raise InvalidSettings("max_index_entries must be at least 1")
        if self.max_parallel < 1:
            raise InvalidSettings("max_parallel must be at least 1")
        if self.max_cached_images < 1 or self.max_cached_tags < 1:
            raise InvalidSettings("cache sizes must be at least 1")
        if self.request_timeout <= 0:
            raise InvalidSettings("request_timeout must be positive")
        if self.max_retries < 0:
            raise InvalidSettings("max_retries must not be negative")


def parse_registry_proxies(text: str) -> tuple[RegistryProxy, ...]:
    """``docker.io=mirror.corp,*.gcr.io=gcr-mirror.corp:5000/cache`` → proxies, in order.

    The first matching pattern wins, as in the Go Noe.
    """
    proxies: list[RegistryProxy] = []
    for item in parse_comma_list(text):
        pattern, eq, mirror = item.partition("=")
        pattern, mirror = pattern.strip(), mirror.strip()
        if not eq or not pattern or not mirror:
            raise InvalidSettings(
                f"--registry-proxies entry {item!r} must be REGISTRY_GLOB=MIRROR, e.g. docker.io=mirror.corp"
            )
        if not _HOST_GLOB.match(pattern):
            raise InvalidSettings(f"--registry-proxies pattern {pattern!r} is not a host glob")
        if not _MIRROR.match(mirror):
            raise InvalidSettings(
                f"--registry-proxies mirror {mirror!r} must be host[:port] optionally followed by /path"
            )
        proxies.append(RegistryProxy(pattern, mirror))
    return tuple(proxies)
