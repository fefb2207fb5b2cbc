"""The manifest walk against a real registry: every platform entry, deleted children, nested indexes, digests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from noe_core.errors import DigestMismatch
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.name.reference import parse_reference
from noe_core.registry.access import AccessGrants
from noe_core.registry.manifest_walk import ManifestWalk
from noe_core.registry.observer import CountingObserver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import Transport, make_session
from noe_core.util.deadline import Deadline
from tests.support import images
from tests.support.images import PushedImage
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.registry


WalkOf = Callable[..., ManifestWalk]


@pytest.fixture
def walk_of() -> Iterator[WalkOf]:
    sessions = []

    def build(**kw: object) -> ManifestWalk:
        settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), **kw)  # type: ignore[arg-type]
        session = make_session(settings)
        sessions.append(session)
        observer = CountingObserver()
        transport = Transport(session, settings=settings, observer=observer)
        access = AccessGrants(ttl=settings.cache_ttl, maxsize=settings.max_cached_tags)
        return ManifestWalk(transport, settings=settings, observer=observer, access=access)

    yield build
    for session in sessions:
        session.close()


def _read(walk: ManifestWalk, image: PushedImage) -> ImagePlatforms:
    """Resolve ``image`` by tag the way the resolver does on a miss: GET the manifest, then walk it."""
    target = parse_reference(image.reference)
    assert target.tag is not None
    deadline = Deadline.after(20)
    result = walk.fetch_manifest(target, target.tag, (), deadline)
    return walk.describe(target, image.digest, result, (), deadline)


def _keys(found: ImagePlatforms) -> list[str]:
    return [str(p) for p in found.platforms]


def test_deleted_child_is_dropped_and_nested_index_followed(
    walk_of: WalkOf, pushed_images: dict[str, PushedImage]
) -> None:
    walk = walk_of()
    deleted = _read(walk, pushed_images["index-deleted-child"])
    assert _keys(deleted) == ["linux/amd64"]
    nested = _read(walk, pushed_images["nested-index"])
    assert sorted(_keys(nested)) == ["linux/amd64", "linux/arm64/v8", "linux/s390x"]
    assert len(nested.manifests) == 3 and nested.digest == pushed_images["nested-index"].digest


def test_without_verification_a_deleted_child_is_kept_and_no_head_is_sent(
    walk_of: WalkOf, registry: RegistryServer, pushed_images: dict[str, PushedImage]
) -> None:
    walk = walk_of(verify_platform_manifests=False)
    mark = registry.mark()
    found = _read(walk, pushed_images["index-deleted-child"])
    assert registry.count(since=mark) == 1
    assert sorted(_keys(found)) == ["linux/amd64", "linux/arm64/v8"]


def test_a_body_that_does_not_match_its_digest_is_refused(walk_of: WalkOf) -> None:
    walk = walk_of()
    target = parse_reference("127.0.0.1:5000/team/app:1")
    walk.verify(b"{}", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", target, "manifest")
    with pytest.raises(DigestMismatch, match="corrupting content"):
        walk.verify(
            b"{ }", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", target, "manifest"
        )


def test_levels_builds_and_artifacts_as_the_registry_serves_them(
    walk_of: WalkOf, registry: RegistryServer, pushed_images: dict[str, PushedImage]
) -> None:
    walk = walk_of()
    assert _keys(_read(walk, pushed_images["amd64-v3-index"])) == ["linux/amd64/v3", "linux/arm64/v8"]
    assert _keys(_read(walk, pushed_images["amd64-levels-index"])) == [
        "linux/amd64",
        "linux/amd64/v3",
        "linux/arm64/v8",
    ]
    builds = _read(walk, pushed_images["windows-builds-index"])
    assert _keys(builds) == ["windows(10.0.17763.5458)/amd64", "windows(10.0.20348.2227)/amd64"]
    # an artifact: its manifest says so, and neither its config nor its layer is fetched
    mark = registry.mark()
    artifact = _read(walk, pushed_images["artifact"])
    assert artifact.is_artifact and artifact.artifact_type == "application/vnd.noe.test.model.v1"
    assert artifact.platforms == () and artifact.digest == pushed_images["artifact"].digest
    assert registry.count(path_contains="/blobs/", since=mark) == 0
    # an index of artifacts: the entries' artifactType is enough, nothing behind them is fetched
    mark = registry.mark()
    index = _read(walk, pushed_images["artifact-index"])
    assert index.is_artifact and index.media_type == "application/vnd.oci.image.index.v1+json"
    assert registry.count(since=mark) == 1


def test_an_index_entry_found_to_be_an_artifact_is_left_out(
    walk_of: WalkOf, registry: RegistryServer, unique_repo: str
) -> None:
    # descriptors without platform nor artifactType: the walk reads each manifest to find out
    artifact = images.push_artifact(registry, unique_repo, None)
    image = images.push_oci_single(registry, unique_repo, None, "arm64")
    mixed = images.push_index(registry, unique_repo, "mixed", [artifact.descriptor(), image.descriptor()])
    only = images.push_index(registry, unique_repo, "only", [artifact.descriptor()])
    walk = walk_of()
    found = _read(walk, mixed)
    assert _keys(found) == ["linux/arm64/v8"] and not found.is_artifact
    alone = _read(walk, only)
    assert alone.is_artifact and alone.artifact_type == images.ARTIFACT_TYPE
