"""The registry cache as every noe process opens it: its bounds, and the Redis level shared by the replicas.

``noe serve``, ``noe controller``, ``noe report`` and ``noe cache`` read the same flags
(:data:`~noe_web.flags.SHARED_CACHE_FLAGS`, the bounds of
:data:`~noe_web.flags.SHARED_CACHE_BOUNDED_FLAGS`): :func:`sized` puts the bounds in the
registry settings, and :func:`shared_cache_config` reads ``--cache-url`` and its companions once
into one :class:`SharedCacheConfig`: a malformed URL, a missing or short key, or a CA file
without TLS is a usage error of one line (exit 2) that never shows the password.
:func:`open_shared` builds the :class:`~noe_core.registry.cache.redis.RedisCache` for this
process (``redis`` is imported only then).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noe_core.cli.parser import require, usage_error
from noe_core.errors import InvalidSettings
from noe_core.registry.cache.url import CacheURL
from noe_core.registry.settings import RegistrySettings
from noe_web.flags import CACHE_CA_FILE, CACHE_KEY_FILE, CACHE_URL

if TYPE_CHECKING:
    from noe_core.registry.cache.redis import RedisCache, RedisObserver


def sized(settings: RegistrySettings, ns: argparse.Namespace) -> RegistrySettings:
    """``settings`` with the cache bounds of the flags."""
    return dataclasses.replace(settings, max_cached_images=ns.max_cached_images, max_cached_tags=ns.max_cached_tags)


@dataclass(frozen=True)
class SharedCacheConfig:
    """``--cache-url`` and its companions, checked: where Redis is, the shared key, TLS trust, the timeout."""

    url: CacheURL
    key: bytes = field(repr=False)
    ca_file: Path | None
    timeout: float

    def describe(self) -> dict[str, Any]:
        """For the start-up line: never the password, never the key."""
        return {"url": self.url.redacted(), "ca_file": str(self.ca_file) if self.ca_file else None}


def shared_cache_config(ns: argparse.Namespace) -> SharedCacheConfig | None:
    """The ``--cache-url`` settings, or ``None``; raises :class:`InvalidSettings` (one line, exit 2)."""
    url: CacheURL | None = getattr(ns, CACHE_URL.dest, None)
    ca_file = require(ns, CACHE_CA_FILE)
    key_file = require(ns, CACHE_KEY_FILE)
    if url is None:
        if ca_file is not None or key_file is not None:
            given = CACHE_CA_FILE if ca_file is not None else CACHE_KEY_FILE
            raise usage_error(ns, given, f"needs {CACHE_URL.name} (NOE_CACHE_URL)")
        return None
    if ca_file is not None and not url.tls:
        raise usage_error(ns, CACHE_CA_FILE, f"needs a rediss:// (TLS) {CACHE_URL.name}")
    if key_file is None:
        raise InvalidSettings(
            f"argument {CACHE_URL.name}: needs {CACHE_KEY_FILE.name}, a key of at least 32 bytes that every "
            "replica mounts from the same Secret (credential fingerprints must agree across replicas)"
        )
    try:
        from noe_core.registry.cache.redis import SharedKeyError, load_shared_key  # noqa: PLC0415
    except ImportError as exc:  # the redis client is an extra
        raise InvalidSettings(
            f"argument {CACHE_URL.name}: needs the redis client: pip install 'noe-webhook[redis]' "
            f"(module {exc.name} is missing)"
        ) from None

    try:
        key = load_shared_key(key_file)
    except SharedKeyError as exc:
        raise InvalidSettings(f"argument {CACHE_KEY_FILE.name}: {exc}") from None
    return SharedCacheConfig(url, key, ca_file, ns.cache_timeout)


def open_shared(
    config: SharedCacheConfig | None,
    settings: RegistrySettings,
    *,
    observer: RedisObserver | None = None,
    warn_at_start: bool = True,
) -> RedisCache | None:
    """The Redis level for this process (off, and reconnecting, when Redis does not answer yet)."""
    if config is None:
        return None
    from noe_core.registry.cache.redis import RedisCache, RedisLimits  # noqa: PLC0415

    limits = RedisLimits(settings.max_cached_images, settings.max_cached_tags, settings.cache_ttl)
    return RedisCache(
        config.url,
        key=config.key,
        limits=limits,
        timeout=config.timeout,
        ca_file=config.ca_file,
        observer=observer,
        warn_at_start=warn_at_start,
    )
