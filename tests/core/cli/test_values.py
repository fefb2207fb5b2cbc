"""The value parsers behind every flag: what each accepts, what it returns, how it words a refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from noe_core.cli import values
from noe_core.policies.settings import ArchToleration


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        (values.Seconds(0, 300, above=True), " 2.5 ", 2.5),
        (values.Seconds(0, 600), "0", 0.0),
        (values.Integer(1, 100), "40", 40),
        (values.Duration(), "1h30m", 5400.0),
        (values.Duration(), "3600", 3600.0),
        (values.Duration(), "250ms", 0.25),
        (values.Boolean(), "Off", False),
        (values.Boolean(), "yes", True),
        (values.Architecture(), "x86_64", "amd64"),
        (values.Architecture(), "aarch64", "arm64"),
        (values.Architecture(allow_empty=True), "", ""),
        (values.OsName(), "macOS", "darwin"),
        (values.CommaList(values.Architecture()), "x86_64, arm64,,amd64", ("amd64", "arm64")),
        (values.Choice(("soft", "required")), "Required", "required"),
        (values.LOG_LEVEL, "debug", "DEBUG"),
        (values.DnsName(subdomain=True, allow_empty=True), "", ""),
        (values.ExistingFile(), "", None),
        (values.ExistingFile(), "~/x.json", Path("~/x.json").expanduser()),
        (
            values.ARCH_TOLERATIONS,
            "arm64=arch=arm64:NoSchedule",
            (ArchToleration("arm64", "arch", "arm64", "NoSchedule"),),
        ),
        (values.IMAGE_PATTERNS, "*.corp, 123.dkr.ecr.*.amazonaws.com", ("*.corp", "123.dkr.ecr.*.amazonaws.com")),
        (values.Line(20), "ask #platform: 42", "ask #platform: 42"),
        (values.Line(20), "", ""),
    ],
)
def test_accepted(kind: values.ValueParser, text: str, expected: object) -> None:
    assert kind(text) == expected


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        (values.Seconds(0, 300, above=True), "abc", "is not a number of seconds"),
        (values.Seconds(0, 300, above=True), "0", "must be more than 0 and at most 300 seconds"),
        (values.Seconds(0.1, 29), "30", "must be from 0.1 to 29 seconds"),
        (values.Seconds(), "inf", "must be at least 0 seconds"),
        (values.Integer(1, 100), "1.5", "is not an integer"),
        (values.Integer(1, 100), "0", "must be from 1 to 100"),
        (values.Duration(), "-1s", "is not a duration"),
        (values.Boolean(), "maybe", "is not a boolean: use true or false"),
        (values.Architecture(), "", "is not an architecture name"),
        (values.CommaList(values.LabelKey()), "team,bad key!", "holds 'bad key!', which is not a valid label key"),
        (values.Choice(("yaml", "json")), "xml", "must be one of yaml, json"),
        (values.Line(10), "two\nlines", "must be one line of printable characters"),
        (values.Line(10), "eleven char", "must be at most 10 characters (it has 11)"),
        (values.DnsName(), "Not_A_Name", "is not a DNS label"),
        (values.ARCH_TOLERATIONS, "arm64", "is not valid: must read arch=key=value:effect"),
        (values.REGISTRY_PROXIES, "nonsense", "is not valid: entry 'nonsense' must be REGISTRY_GLOB=MIRROR"),
    ],
)
def test_refused_with_a_predicate(kind: values.ValueParser, text: str, message: str) -> None:
    with pytest.raises(values.BadValue) as info:
        kind(text)
    assert str(info.value).startswith(message), str(info.value)
