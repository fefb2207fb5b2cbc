"""Learning from exec format errors (docs/policies.md "Learning"): the ConfigMap's entries, bounded, and an
architecture taken out of the digest it concerns (index or platform manifest), with a warning."""

from __future__ import annotations

import json

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import ImagePlatforms, LookupResult, fixed
from noe_core.image.learned import (
    LearnedPlatforms,
    data_key,
    digest_of_image_id,
    read_learned,
    recorded,
)
from noe_core.image.platform import parse_platform
from noe_core.policies.settings import PolicySettings

INDEX = "sha256:" + "1" * 64
ARM_MANIFEST = "sha256:" + "2" * 64
AMD_MANIFEST = "sha256:" + "3" * 64
IMAGE = "shop/web:1"
MULTI = ImagePlatforms(
    (parse_platform("linux/amd64"), parse_platform("linux/arm64")), INDEX, "index", (AMD_MANIFEST, ARM_MANIFEST)
)
NODES = [testing.node("amd", "amd64"), testing.node("arm", "arm64")]


def runs_on(learned: LearnedPlatforms) -> tuple[set[str], tuple[str, ...]]:
    review = parse_admission_review(testing.admission_review(testing.pod([IMAGE])))
    inspect = fixed({IMAGE: MULTI})
    admission = admit(review, PolicySettings(), lambda request: learned.apply(inspect(request)))
    obj = admission.decision.obj
    return {n["metadata"]["labels"]["kubernetes.io/arch"] for n in NODES if testing.schedulable(obj, n)}, (
        admission.decision.warnings
    )


def test_digest_of_a_container_status_image_id() -> None:
    assert digest_of_image_id(f"docker-pullable://registry.example/shop/web@{INDEX}") == INDEX
    assert digest_of_image_id(INDEX) == INDEX
    assert digest_of_image_id("registry.example/shop/web:1") is None and digest_of_image_id("") is None


def test_recorded_adds_architectures_and_evidence_and_says_when_nothing_changes() -> None:
    first = recorded({}, INDEX, "aarch64", "shop/web-1", "2026-12-03T10:00:00Z")
    assert first is not None and list(first) == [data_key(INDEX)] == ["sha256-" + "1" * 64]
    assert json.loads(first[data_key(INDEX)]) == {
        "architectures": ["arm64"],
        "evidence": ["shop/web-1"],
        "time": "2026-12-03T10:00:00Z",
    }
    assert recorded(first, INDEX, "arm64", "shop/web-2", "2026-12-03T10:01:00Z") is None  # already known
    both = recorded(first, INDEX, "ppc64le", "shop/web-3", "2026-12-03T10:02:00Z")
    assert both is not None
    assert read_learned(both)[INDEX].architectures == ("arm64", "ppc64le")
    assert read_learned(both)[INDEX].evidence == ("shop/web-1", "shop/web-3")


def test_bounded_oldest_dropped_first_and_hand_edits_skipped() -> None:
    data: dict[str, str] = {"sha256-nothex": "{}", data_key(AMD_MANIFEST): "not json", "other": "x"}
    for minute in range(5):
        digest = f"sha256:{minute:064x}"
        found = recorded(data, digest, "arm64", f"ns/p{minute}", f"2026-12-03T10:0{minute}:00Z", limit=3)
        assert found is not None
        data = found
    learned = read_learned(data)
    assert sorted(learned) == [f"sha256:{m:064x}" for m in (2, 3, 4)]
    assert "other" in data  # not ours: kept


def test_a_learned_index_digest_takes_the_architecture_out_with_a_warning() -> None:
    learned = LearnedPlatforms(read_learned(recorded({}, INDEX, "arm64", "shop/web-7f9-abcde", "t")))
    archs, warnings = runs_on(learned)
    assert archs == {"amd64"}
    assert warnings == (
        f"{IMAGE}: arm64 left out: {INDEX} failed with exec format error on arm64 (pod shop/web-7f9-abcde)",
    )


def test_a_learned_platform_manifest_digest_counts_too_and_other_digests_do_not() -> None:
    assert runs_on(LearnedPlatforms(read_learned(recorded({}, ARM_MANIFEST, "arm64", "shop/p", "t"))))[0] == {"amd64"}
    # the amd64 manifest proven not to run on arm64 says nothing about the arm64 entry
    assert runs_on(LearnedPlatforms(read_learned(recorded({}, AMD_MANIFEST, "arm64", "shop/p", "t")))) == (
        {"amd64", "arm64"},
        (),
    )


def test_deleting_the_entry_undoes_it() -> None:
    data = recorded({}, INDEX, "arm64", "shop/p", "t")
    assert data is not None
    del data[data_key(INDEX)]
    assert runs_on(LearnedPlatforms(read_learned(data)))[0] == {"amd64", "arm64"}
    assert LearnedPlatforms().apply(LookupResult({IMAGE: MULTI})).lookups[IMAGE] is MULTI
