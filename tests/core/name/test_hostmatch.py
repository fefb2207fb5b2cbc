"""Kubelet image-matching rules and host globs, as tables."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidSettings
from noe_core.name.hostmatch import (
    host_glob_matches,
    image_matches,
    parse_image_pattern,
    parse_image_patterns,
    parse_patterns,
    specificity,
)
from noe_core.name.reference import parse_reference

IMAGE_MATCHES = [
    # `*` is exactly one DNS label
    ("*.corp", "a.corp/app", True),
    ("*.corp", "a.b.corp/app", False),
    ("*.corp", "corp/app", False),
    ("*.*.corp", "a.b.corp/app", True),
    ("a.*.corp", "a.b.corp/app", True),
    ("123.dkr.ecr.*.amazonaws.com", "123.dkr.ecr.eu-west-1.amazonaws.com/app:1", True),
    ("*.dkr.ecr.*.amazonaws.com", "123.dkr.ecr.eu-west-1.amazonaws.com/app", True),
    ("*.dkr.ecr.*.amazonaws.com", "123.dkr.ecr.eu-west-1.amazonaws.com.cn/app", False),
    ("*-docker.pkg.dev", "europe-docker.pkg.dev/p/r/i", True),
    ("reg?.corp", "reg1.corp/x", True),
    ("reg?.corp", "reg12.corp/x", False),
    # ports must match exactly, a pattern without port matches only images without port
    ("reg.corp", "reg.corp/app", True),
    ("reg.corp", "reg.corp:5000/app", False),
    ("reg.corp:5000", "reg.corp:5000/app", True),
    ("reg.corp:5000", "reg.corp/app", False),
    ("reg.corp:5000", "reg.corp:5001/app", False),
    ("*.corp:443", "a.corp:443/app", True),
    ("localhost:5000", "localhost:5000/x", True),
    ("[::1]:5000", "[::1]:5000/x", True),
    ("[::1]", "[::1]:5000/x", False),
    # path: prefix by whole components
    ("reg.corp/team", "reg.corp/team/app", True),
    ("reg.corp/team", "reg.corp/team", True),
    ("reg.corp/team", "reg.corp/teamx/app", False),
    ("reg.corp/team/", "reg.corp/team/app", True),
    ("reg.corp/team/app", "reg.corp/team", False),
    ("reg.corp/team", "other.corp/team/app", False),
    ("*.corp/team", "a.corp/team/app", True),
    # schemes are ignored
    ("https://reg.corp", "reg.corp/app", True),
    ("http://reg.corp/team", "reg.corp/team/app", True),
    # Docker Hub and its aliases
    ("docker.io", "nginx", True),
    ("docker.io", "docker.io/library/nginx:1.25", True),
    ("index.docker.io", "nginx", True),
    ("registry-1.docker.io", "library/nginx", True),
    ("docker.io", "index.docker.io/library/nginx", True),
    ("docker.io/myorg", "myorg/app", True),
    ("docker.io/myorg", "otherorg/app", False),
    ("docker.io/library", "nginx", True),
    ("docker.io", "quay.io/x", False),
    ("docker.io:443", "nginx", False),
    # hosts are case-insensitive
    ("REG.Corp", "reg.corp/app", True),
    ("reg.corp", "REG.corp/app", True),
    # the image's tag and digest do not matter
    ("reg.corp/app", "reg.corp/app@sha256:" + "a" * 64, True),
]


@pytest.mark.parametrize(("pattern", "image", "expected"), IMAGE_MATCHES)
def test_image_matches(pattern: str, image: str, expected: bool) -> None:
    assert image_matches(pattern, image) is expected
    assert image_matches(parse_image_pattern(pattern), parse_reference(image)) is expected


DOCKER_CONFIG_KEYS = [
    ("https://index.docker.io/v1/", "nginx", True),
    ("https://index.docker.io/v1/", "myorg/app", True),
    ("https://index.docker.io/v1/", "quay.io/x", False),
    ("https://reg.corp/v2/", "reg.corp/app", True),
    ("https://reg.corp/v2/team", "reg.corp/team/app", True),
    ("https://reg.corp/v2/team", "reg.corp/other/app", False),
    ("reg.corp/v1/", "reg.corp/app", True),
]


@pytest.mark.parametrize(("key", "image", "expected"), DOCKER_CONFIG_KEYS)
def test_docker_config_keys(key: str, image: str, expected: bool) -> None:
    assert parse_image_pattern(key, docker_config_key=True).matches(image) is expected


def test_v2_is_a_path_outside_docker_config_keys() -> None:
    assert not image_matches("reg.corp/v2/", "reg.corp/app")
    assert image_matches("reg.corp/v2/", "reg.corp/v2/app")


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        "  ",
        "reg corp",
        "ftp://reg.corp",
        "reg.corp:port",
        "reg.corp:*",
        "reg..corp",
        "reg.corp/team/*",
        "a:b:c",
        "[::1",
        "reg.corp/UPPER",
        "re$g.corp",
    ],
)
def test_bad_image_patterns(pattern: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_image_pattern(pattern)
    assert "pattern" in str(info.value)


def test_specificity_orders_most_specific_first() -> None:
    patterns = ["*.corp", "reg.corp", "reg.corp/team", "reg.corp/team/app", "r?g.corp"]
    ordered = sorted(patterns, key=specificity, reverse=True)
    assert ordered == ["reg.corp/team/app", "reg.corp/team", "reg.corp", "*.corp", "r?g.corp"]
    assert specificity("reg.corp:5000") > specificity("reg.corp")


def test_parse_image_patterns() -> None:
    parsed = parse_image_patterns(" *.corp, 123.dkr.ecr.*.amazonaws.com ,,")
    assert [pattern.text for pattern in parsed] == ["*.corp", "123.dkr.ecr.*.amazonaws.com"]
    assert parse_image_patterns("") == ()


HOST_GLOBS = [
    ("*.gcr.io", "eu.gcr.io", True),
    ("*.gcr.io", "a.b.gcr.io", True),  # shell-style: `*` crosses dots here
    ("*.gcr.io", "gcr.io", False),
    ("127.0.0.1:*", "127.0.0.1:5000", True),
    ("127.0.0.1:*", "127.0.0.1", False),
    ("localhost:5000", "localhost:5000", True),
    ("localhost:5000", "localhost:5001", False),
    ("reg?.corp", "reg1.corp", True),
    ("[::1]:5000", "[::1]:5000", True),  # brackets are literal, not a character class
    ("[::1]:5000", "::1", False),
    ("docker.io", "docker.io", True),
    ("index.docker.io", "docker.io", True),
    ("docker.io", "registry-1.docker.io", True),
    ("REG.CORP", "reg.corp", True),
    ("*", "anything.example:1", True),
    ("reg.corp", "reg.corp.evil", False),
    ("a.b", "axb", False),  # dots are literal
]


@pytest.mark.parametrize(("pattern", "host", "expected"), HOST_GLOBS)
def test_host_glob_matches(pattern: str, host: str, expected: bool) -> None:
    assert host_glob_matches(pattern, host) is expected


def test_parse_patterns() -> None:
    assert parse_patterns("a, b ,,c") == ("a", "b", "c")
    assert parse_patterns("") == ()
    with pytest.raises(InvalidSettings):
        parse_patterns("a b,c")
