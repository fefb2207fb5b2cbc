"""Version tags (noe_core.report.version_tags): which tags are newer releases of the same shape, lowest first."""

from __future__ import annotations

import pytest

from noe_core.report.version_tags import newer_tags, parse_version


@pytest.mark.parametrize(
    ("tag", "numbers", "suffix"),
    [
        ("1.2.3", (1, 2, 3), ""),
        ("v1.2.3", (1, 2, 3), ""),
        ("1.27", (1, 27), ""),
        ("7", (7,), ""),
        ("1.2.3-alpine", (1, 2, 3), "alpine"),
        ("0.9.0-rc.1", (0, 9, 0), "rc.1"),
    ],
)
def test_versions_are_read(tag: str, numbers: tuple[int, ...], suffix: str) -> None:
    version = parse_version(tag)
    assert version is not None and version.numbers == numbers and version.suffix == suffix


@pytest.mark.parametrize("tag", ["latest", "nightly", "1.2.3.4", "01.2", "v", "1.", "sha-abc123", "1.2-", "main-1.2"])
def test_other_tags_are_not_versions(tag: str) -> None:
    assert parse_version(tag) is None


TAGS = [
    "latest",
    "nightly",
    "0.9.0",
    "1.0.0",
    "1.0.1",
    "v1.0.1",  # the same version spelled with a v: the current tag's spelling wins
    "1.0.10",
    "1.0.2",
    "1.1",  # two numbers: another shape (1.1 follows the newest 1.1.x)
    "1.1.0-alpine",  # another flavour
    "1.1.0-rc1",  # a pre-release
    "2.0.0",
    "10.0.0",
]


def test_newer_tags_are_the_same_shape_lowest_first() -> None:
    assert newer_tags("1.0.0", TAGS) == ["1.0.1", "1.0.2", "1.0.10", "2.0.0", "10.0.0"]
    assert newer_tags("v1.0.0", TAGS)[0] == "v1.0.1"
    assert newer_tags("1.0.0-alpine", [*TAGS, "1.0.1-alpine"]) == ["1.0.1-alpine", "1.1.0-alpine"]
    assert newer_tags("1.0", TAGS) == ["1.1"]
    assert newer_tags("10.0.0", TAGS) == []


def test_no_version_no_candidates() -> None:
    assert newer_tags("latest", TAGS) == []
    assert newer_tags("nightly", TAGS) == []
