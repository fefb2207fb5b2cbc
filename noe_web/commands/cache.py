"""The shared registry cache levels as the commands open them, and ``noe cache`` for operators.

``noe serve`` opens one :class:`~noe_core.registry.cache.sqlite.CacheStore` per worker on the
same file under ``--cache-dir`` (default ``--state-dir``), so every worker and the next start
see what one of them fetched. With ``--cache-url`` (``noe serve``, ``noe controller``,
``noe report``) a :class:`~noe_core.registry.cache.redis.RedisCache` stands behind it, shared by
every replica and rollout (``shared_cache_config`` reads its flags once, ``open_shared``
connects, in :mod:`noe_web.registry_cache`). ``noe cache stats|list|purge`` read and
trim the node's file while the webhook runs (SQLite WAL: they never block it for long) — or,
with ``--cache-url``, the shared Redis.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from noe_core.cli.parser import add_flags
from noe_core.errors import InvalidSettings, NoeError
from noe_core.name.reference import parse_reference
from noe_core.registry.cache.rows import from_row
from noe_core.registry.cache.sqlite import CachedImage, CacheStore, open_store
from noe_core.registry.settings import RegistrySettings
from noe_web.commands.config import default_state_dir
from noe_web.flags import CACHE_FLAGS
from noe_web.registry_cache import open_shared, shared_cache_config, sized

if TYPE_CHECKING:
    from noe_core.registry.cache.redis import RedisCache


def cache_dir(ns: argparse.Namespace) -> Path:
    """``--cache-dir``, else ``--state-dir``, else the default state directory."""
    return Path(ns.cache_dir or ns.state_dir or default_state_dir())


def open_cache(ns: argparse.Namespace, on_evict: Callable[[str, int], None] | None = None) -> CacheStore | None:
    """The shared store for this process; ``None`` (warned) when the directory cannot hold one."""
    return open_store(cache_dir(ns), max_images=ns.max_cached_images, max_tags=ns.max_cached_tags, on_evict=on_evict)


# -- noe cache ------------------------------------------------------------------------------


def add_cache_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="inspect or purge the registry cache shared by noe serve's workers",
        description="Read the registry cache noe serve keeps under --cache-dir (safe while it runs).",
    )
    commands = parser.add_subparsers(dest="cache_command", metavar="{stats,list,purge}", required=True)
    stats = commands.add_parser("stats", help="entries, size, hit rates are in /metrics; oldest tag")
    listing = commands.add_parser("list", help="cached images: image, digest, platforms, age")
    listing.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    purge = commands.add_parser("purge", help="forget the given images (repositories), or everything")
    purge.add_argument("images", nargs="*", metavar="IMAGE", help="image references; none: purge all")
    for sub in (stats, listing, purge):
        add_flags(sub, CACHE_FLAGS)
    parser.set_defaults(run=run_cache)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _platforms(image: CachedImage) -> list[str]:
    """``os/arch[/variant]`` of each platform the cached row holds (read by the store's one row codec)."""
    try:
        found = from_row(image.digest, image.media_type, image.platforms)
    except (ValueError, TypeError):
        return ["(unreadable)"]
    if found.is_artifact:
        return [f"artifact {found.artifact_type}"]
    return ["/".join(part for part in (p.os, p.architecture, p.variant) if part) for p in found.platforms]


def _open_for_operator(ns: argparse.Namespace) -> CacheStore | RedisCache | int:
    """The level ``noe cache`` reads: Redis with ``--cache-url``, else the node's file; or an exit status."""
    try:
        shared = shared_cache_config(ns)
    except InvalidSettings as exc:
        print(f"noe cache: {exc}", file=sys.stderr)
        return 2
    if shared is not None:
        redis_level = open_shared(shared, sized(RegistrySettings(), ns), warn_at_start=False)
        assert redis_level is not None
        if not redis_level.up:
            redis_level.close()
            print(f"noe cache: {shared.url.redacted()} does not answer: {redis_level.last_error}", file=sys.stderr)
            return 1
        return redis_level
    directory = cache_dir(ns)
    if not directory.is_dir():
        print(f"noe cache: no cache directory {directory} (set --cache-dir or --state-dir)", file=sys.stderr)
        return 2
    store = open_cache(ns)
    if store is None:
        print(f"noe cache: the cache in {directory} cannot be opened (see the warning above)", file=sys.stderr)
        return 2
    return store


def run_cache(ns: argparse.Namespace) -> int:
    store = _open_for_operator(ns)
    if isinstance(store, int):
        return store
    failures: tuple[type[Exception], ...] = (OSError,)
    if store.name == "redis":
        from redis import RedisError  # noqa: PLC0415

        failures = (OSError, RedisError)
    try:
        return _run_cache(ns, store)
    except failures as exc:
        where = store.url.redacted() if store.name == "redis" else store.path  # type: ignore[union-attr]
        print(f"noe cache {ns.cache_command}: {where}: {type(exc).__name__}", file=sys.stderr)
        return 1
    finally:
        store.close()


def _run_cache(ns: argparse.Namespace, store: CacheStore | RedisCache) -> int:
    if ns.cache_command == "stats":
        s = store.stats()
        oldest = "-" if s.oldest_tag_age is None else _age(s.oldest_tag_age)
        print(
            f"{'url' if store.name == 'redis' else 'file'} {s.path}\nimages {s.images}\ntags {s.tags}\n"
            f"credential checks {s.grants}\n"
            f"failures {s.failures}\nbytes {s.bytes}\noldest tag {oldest}"
        )
    elif ns.cache_command == "list":
        images = store.images()
        if ns.output == "json":
            print(
                json.dumps(
                    [
                        {
                            "image": i.context,
                            "digest": i.digest,
                            "tags": list(i.tags),
                            "mediaType": i.media_type,
                            "platforms": _platforms(i),
                            "ageSeconds": round(i.age, 1),
                        }
                        for i in images
                    ],
                    indent=2,
                )
            )
        else:
            for i in images:
                tags = ",".join(i.tags) or "-"
                print(f"{i.context}\t{tags}\t{i.digest}\t{' '.join(_platforms(i))}\t{_age(i.age)}")
    else:
        try:
            contexts = [parse_reference(image).context for image in ns.images]
        except NoeError as exc:
            print(f"noe cache purge: {exc}", file=sys.stderr)
            return 2
        print(f"purged {store.purge(contexts)} entries")
    return 0
