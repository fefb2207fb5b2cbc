"""The platforms file: exact keys, globs in file order, error entries, precise load errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from noe_core.errors import InvalidSettings
from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.image.platform import parse_platform
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "platforms.json"


def test_exact_key_wins_then_first_matching_glob() -> None:
    static = StaticPlatforms.from_mapping(
        {
            "registry.corp/legacy/*": ["linux/amd64"],
            "registry.corp/*": ["linux/arm64"],
            "registry.corp/legacy/special:1": ["linux/arm64/v8", "unknown/unknown"],
            "broken:1": {"error": "503 from registry"},
            "pinned:1": {"platforms": ["linux/amd64"], "digest": "sha256:" + "0" * 64},
        }
    )
    assert static.get("registry.corp/legacy/app:2") == ImagePlatforms((parse_platform("linux/amd64"),))
    assert static.get("registry.corp/other:1") == ImagePlatforms((parse_platform("linux/arm64"),))
    special = static.get("registry.corp/legacy/special:1")
    assert isinstance(special, ImagePlatforms) and len(special.platforms) == 2
    assert static.get("broken:1") == LookupFailure("503 from registry")
    pinned = static.get("pinned:1")
    assert isinstance(pinned, ImagePlatforms) and pinned.digest.startswith("sha256:")
    assert static.get("docker.io/library/nginx:1") is None
    assert static.lookups(["broken:1", "nope"]) == {"broken:1": LookupFailure("503 from registry")}


def test_keys_are_matched_as_written() -> None:
    static = StaticPlatforms.from_mapping({"nginx:1.27": ["linux/amd64"]})
    assert static.get("docker.io/library/nginx:1.27") is None


def test_load_json_and_yaml(tmp_path: Path) -> None:
    static = StaticPlatforms.load(EXAMPLE)
    assert isinstance(static.get("nginx:1.27"), ImagePlatforms)
    yaml_file = tmp_path / "platforms.yaml"
    yaml_file.write_text("app:1:\n  - linux/amd64\n'team/*':\n  error: no credentials\n")
    loaded = StaticPlatforms.load(yaml_file)
    assert loaded.get("team/x:1") == LookupFailure("no credentials")
    assert len(loaded) == 2
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert len(StaticPlatforms.load(empty)) == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected a mapping"),
        ({"a": "linux/amd64"}, "image 'a': expected a list"),
        ({"a": ["linux/amd64", "linux//x"]}, "image 'a': invalid platform"),
        ({"a": {"error": ""}}, "image 'a': 'error' must be a non-empty string"),
        ({"a": {"error": "x", "platforms": []}}, "cannot be combined"),
        ({"a": {"platform": []}}, "unknown field"),
        ({"a": {"digest": "sha256:0"}}, "give 'platforms' or 'error'"),
        ({"": ["linux/amd64"]}, "non-empty strings"),
        ({"a": {"artifactType": ""}}, "'artifactType' must be a non-empty string"),
        ({"a": {"artifactType": "x", "platforms": []}}, "can only be combined with 'digest'"),
    ],
)
def test_malformed_mapping(data: object, message: str) -> None:
    with pytest.raises(InvalidSettings, match=message):
        StaticPlatforms.from_mapping(data, "p.json")


def test_malformed_files_are_named(tmp_path: Path) -> None:
    bad_json = tmp_path / "p.json"
    bad_json.write_text("{nope")
    with pytest.raises(InvalidSettings, match=r"p\.json is not valid JSON/YAML"):
        StaticPlatforms.load(bad_json)
    bad_key = tmp_path / "q.yaml"
    bad_key.write_text("img:1: 5\n")
    with pytest.raises(InvalidSettings, match=r"q\.yaml: image 'img:1'"):
        StaticPlatforms.load(bad_key)
    with pytest.raises(InvalidSettings, match="cannot read platforms file"):
        StaticPlatforms.load(tmp_path / "missing.json")


def test_an_artifact_is_declared_by_its_type() -> None:
    static = StaticPlatforms.from_mapping({"models/*": {"artifactType": "application/vnd.example.model.v1"}})
    found = static.get("models/llama:1")
    assert isinstance(found, ImagePlatforms) and found.is_artifact
    assert found.artifact_type == "application/vnd.example.model.v1" and found.platforms == ()
