"""``--cache-url`` read once: every accepted shape, and no error or rendering that shows the password."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidSettings
from noe_core.registry.cache.url import CacheURL, parse_cache_url, redact

SECRET = "s3cr3t-p@ss"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://localhost", CacheURL("localhost")),
        ("redis://valkey.noe.svc:6380/2", CacheURL("valkey.noe.svc", 6380, 2)),
        ("redis://:pw@10.0.0.1:6379/0", CacheURL("10.0.0.1", 6379, 0, password="pw")),
        ("rediss://noe:pw@cache.example.com/1", CacheURL("cache.example.com", 6379, 1, True, "noe", "pw")),
        ("redis://:p%40ss%2Fw@[::1]:7000", CacheURL("::1", 7000, 0, password="p@ss/w")),
        ("REDIS://Host.Example:1/", CacheURL("Host.Example", 1, 0)),
    ],
)
def test_accepted_urls(text: str, expected: CacheURL) -> None:
    assert parse_cache_url(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        f"http://:{SECRET}@host:6379",
        f"redis://:{SECRET}@:6379/0",
        f"redis://:{SECRET}@host:0",
        f"redis://:{SECRET}@host:65536",
        f"redis://:{SECRET}@host:port",
        f"redis://:{SECRET}@host/16",
        f"redis://:{SECRET}@host/db",
        f"redis://:{SECRET}@host?ssl=true",
        f"redis://:{SECRET}@ho st",
        f"redis://{SECRET}@host",
        f"redis:/{SECRET}",
        f"{SECRET}",
    ],
)
def test_a_refused_url_is_described_without_its_password(text: str) -> None:
    with pytest.raises(InvalidSettings) as caught:
        parse_cache_url(text)
    assert SECRET not in str(caught.value) and "s3cr3t" not in str(caught.value)


def test_the_password_is_never_rendered() -> None:
    url = parse_cache_url(f"rediss://noe:{SECRET.replace('@', '%40')}@cache:6380/3")
    assert url.password == SECRET
    for shown in (repr(url), str(url), url.redacted(), f"{url}"):
        assert "s3cr3t" not in shown
    assert url.redacted() == "rediss://noe:***@cache:6380/3"
    assert CacheURL("::1").redacted() == "redis://[::1]:6379/0"
    assert redact("Error connecting to redis://:hunter2@h:1/0 and rediss://u:x@h") == (
        "Error connecting to redis://:***@h:1/0 and rediss://u:***@h"
    )
