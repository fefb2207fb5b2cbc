"""The registry cache as every process opens it: the flags' bounds, and ``--cache-url`` read once."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from noe_core.cli.parser import NoeArgumentParser, add_flags
from noe_core.errors import InvalidSettings
from noe_core.registry.settings import RegistrySettings
from noe_web.flags import SHARED_CACHE_BOUNDED_FLAGS
from noe_web.registry_cache import open_shared, shared_cache_config, sized

SECRET = "s3cret-Pa55"


def _parse(*argv: str) -> argparse.Namespace:
    parser = NoeArgumentParser(prog="noe test")
    add_flags(parser, SHARED_CACHE_BOUNDED_FLAGS)
    return parser.parse_args(list(argv))


def test_the_bounds_of_the_flags_go_into_the_settings() -> None:
    ns = _parse("--max-cached-images", "10", "--max-cached-tags", "20")
    settings = sized(RegistrySettings(cache_ttl=60.0), ns)
    assert (settings.max_cached_images, settings.max_cached_tags, settings.cache_ttl) == (10, 20, 60.0)


def test_without_a_url_there_is_no_shared_level() -> None:
    ns = _parse()
    assert shared_cache_config(ns) is None
    assert open_shared(None, RegistrySettings()) is None


def test_a_companion_without_the_url_is_a_usage_error(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    with pytest.raises(InvalidSettings, match=r"^argument --cache-key-file: .* needs --cache-url"):
        shared_cache_config(_parse("--cache-key-file", str(key)))


def test_a_url_needs_the_shared_key_and_never_shows_its_password(tmp_path: Path) -> None:
    with pytest.raises(InvalidSettings, match="needs --cache-key-file") as caught:
        shared_cache_config(_parse("--cache-url", f"redis://:{SECRET}@cache:6379/0"))
    assert SECRET not in str(caught.value)
    ca = tmp_path / "ca.pem"
    ca.write_text("not read yet")
    with pytest.raises(InvalidSettings, match=r"needs a rediss:// \(TLS\) --cache-url") as caught:
        shared_cache_config(_parse("--cache-url", f"redis://:{SECRET}@cache:6379/0", "--cache-ca-file", str(ca)))
    assert SECRET not in str(caught.value)
