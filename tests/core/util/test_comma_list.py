"""The one comma-list splitter: items trimmed, blanks and repeats dropped, order kept, for every list flag."""

from __future__ import annotations

import pytest

from noe_core.name.hostmatch import parse_patterns
from noe_core.policies.settings import parse_arch_tolerations
from noe_core.registry.settings import RegistryProxy, parse_registry_proxies
from noe_core.util.comma_list import parse_comma_list


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a, b,,c", ("a", "b", "c")), ("", ()), (" , ", ()), ("a,a,b", ("a", "b")), (" x ", ("x",))],
)
def test_parse_comma_list(text: str, expected: tuple[str, ...]) -> None:
    assert parse_comma_list(text) == expected


def test_every_list_flag_splits_alike() -> None:
    assert parse_patterns(" a ,, b, a") == ("a", "b")
    assert parse_registry_proxies(" docker.io=m.corp ,, docker.io=m.corp") == (RegistryProxy("docker.io", "m.corp"),)
    assert [t.arch for t in parse_arch_tolerations(" arm64=arch=arm64:NoSchedule ,,")] == ["arm64"]
