"""Text from outside is shown, never acted on: control and bidi characters become escapes."""

from __future__ import annotations

import pytest

from noe_core.util.printable import printable, shorten


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("registry.example/app:1", "registry.example/app:1"),
        ("evil\x1b[2Jimage", "evil\\x1b[2Jimage"),
        ("nul\x00byte", "nul\\x00byte"),
        ("tab\tnew\nline\rcr", "tab\\x09new\\x0aline\\x0dcr"),
        ("del\x7fc1\x85", "del\\x7fc1\\x85"),
        ("gpj.\u202eexe", "gpj.\\u202eexe"),
        ("zero\u200bwidth\ufeffbom\u2066iso\u2069", "zero\\u200bwidth\\ufeffbom\\u2066iso\\u2069"),
        ("ünïcödé ✓ 中文", "ünïcödé ✓ 中文"),
    ],
)
def test_printable(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_shorten_keeps_both_ends_of_a_long_name() -> None:
    name = "registry.example/" + "x" * 100 + ":v1.2.3"
    short = shorten(name, 40)
    assert len(short) == 40 and short.startswith("registry.exa") and short.endswith(":v1.2.3") and "..." in short
    assert shorten("nginx:1", 40) == "nginx:1"
