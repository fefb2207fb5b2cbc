"""Durations: Go's ``time.Duration`` syntax as Kubernetes writes it, and a flag's seconds or duration."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidSettings
from noe_core.util.duration import parse_duration, parse_go_duration

DURATIONS = [
    ("0", 0.0), ("0s", 0.0), ("5m0s", 300.0), ("1h", 3600.0), ("1h30m", 5400.0), ("1.5h", 5400.0),
    ("300ms", 0.3), ("12h0m0s", 43200.0), ("+2s", 2.0), ("10us", 1e-5), ("7ns", 7e-9),
]  # fmt: skip


@pytest.mark.parametrize(("text", "seconds"), DURATIONS)
def test_parse_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "m", "-1m", "1d", "1h 2m", ".s", "abc"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_go_duration(text)


@pytest.mark.parametrize(("text", "seconds"), [("3600", 3600.0), ("0.5", 0.5), (" 1h30m ", 5400.0), ("250ms", 0.25)])
def test_a_flag_duration_is_seconds_or_go_syntax(text: str, seconds: float) -> None:
    assert parse_duration(text, "--ttl") == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "match"),
    [("abc", "--ttl 'abc' is not a duration"), ("-1", "finite, non-negative"), ("inf", "finite, non-negative")],
)
def test_a_bad_flag_duration_names_the_flag(text: str, match: str) -> None:
    with pytest.raises(InvalidSettings, match=match):
        parse_duration(text, "--ttl")
