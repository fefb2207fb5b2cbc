"""The shared caches' row for an image's platforms: every field kept on the way back, versioned.

Replicas of different versions share one Redis during a rollout: a row with fields this
version does not know is still read, a row of an older layout too, a newer layout never misread.
"""

from __future__ import annotations

import json

import pytest

from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.platform import Platform
from noe_core.registry.cache.rows import from_row, platforms_row

INDEX = "application/vnd.oci.image.index.v1+json"


def test_a_row_gives_back_the_same_answer() -> None:
    windows = Platform("windows", "amd64", "", "10.0.17763.5696", ("win32k",))
    found = ImagePlatforms((Platform("linux", "arm", "v7"), windows), "sha256:i", INDEX, ("sha256:a", "sha256:w"))
    row = platforms_row(found)
    version_1 = [
        ["linux", "arm", "v7", "", [], "sha256:a"],
        ["windows", "amd64", "", "10.0.17763.5696", ["win32k"], "sha256:w"],
    ]
    assert json.loads(row) == {"v": 2, "platforms": version_1}
    assert from_row("sha256:i", INDEX, row) == found
    assert from_row("sha256:i", INDEX, json.dumps(version_1)) == found  # the store's first rows


def test_fields_a_later_version_adds_are_ignored_not_refused() -> None:
    found = ImagePlatforms((Platform("linux", "arm64"),), "sha256:i", INDEX, ("sha256:a",))
    later = {
        "v": 2,
        "platforms": [["linux", "arm64", "", "", [], "sha256:a", {"level": "v8.2"}]],
        "artifactType": "application/vnd.example",
    }
    assert from_row("sha256:i", INDEX, json.dumps(later)) == found


@pytest.mark.parametrize(
    "row",
    [
        "not json",
        '[["linux", "amd64"]]',
        "[1]",
        '{"a": 1}',
        '{"v": 2}',
        '{"v": 4, "platforms": []}',
        '{"v": 3, "artifactType": "", "platforms": []}',
        '{"v": "2", "platforms": []}',
        '{"v": 2, "platforms": {}}',
        "42",
    ],
)
def test_a_row_this_version_cannot_read_is_an_error_the_caller_catches(row: str) -> None:
    with pytest.raises((ValueError, TypeError)):
        from_row("sha256:i", INDEX, row)


def test_an_artifact_keeps_its_type() -> None:
    found = ImagePlatforms.artifact("application/vnd.cncf.helm.config.v1+json", digest="sha256:c", media_type=INDEX)
    row = platforms_row(found)
    assert json.loads(row) == {"v": 3, "artifactType": "application/vnd.cncf.helm.config.v1+json", "platforms": []}
    assert from_row("sha256:c", INDEX, row) == found
    with pytest.raises(ValueError, match="artifactType"):
        from_row("sha256:c", INDEX, '{"v": 3, "artifactType": 3, "platforms": []}')
    # Only an artifact's row is of version 3: an image's stays readable by the previous release.
    image = ImagePlatforms((Platform("linux", "arm64"),), "sha256:i", INDEX, ("sha256:a",))
    assert json.loads(platforms_row(image))["v"] == 2
