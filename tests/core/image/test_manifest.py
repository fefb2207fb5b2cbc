"""Manifest parsing: realistic fixtures, the media-type decision, malformed bodies, fuzzing."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noe_core.errors import ManifestError, NoeError, UnsupportedManifest
from noe_core.image.manifest import (
    ACCEPT_MANIFESTS,
    MAX_INDEX_ENTRIES,
    Descriptor,
    ImageManifest,
    Index,
    MediaType,
    is_valid_digest,
    parse_config,
    parse_manifest,
    sha256_digest,
)
from noe_core.image.platform import Platform, parse_platform
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "manifests"
D = "sha256:" + "a" * 64
D2 = "sha256:" + "b" * 64


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def platforms(index: Index) -> list[str]:
    return [str(d.platform) for d in index.runnable()]


# --- media types -------------------------------------------------------------------------------


def test_media_type_values_and_kinds() -> None:
    assert MediaType.OCI_INDEX == "application/vnd.oci.image.index.v1+json"
    assert MediaType.DOCKER_MANIFEST_LIST == "application/vnd.docker.distribution.manifest.list.v2+json"
    assert str(MediaType.OCI_MANIFEST) == "application/vnd.oci.image.manifest.v1+json"
    assert {m for m in MediaType if m.is_index} == {MediaType.OCI_INDEX, MediaType.DOCKER_MANIFEST_LIST}
    assert {m for m in MediaType if m.is_image} == {MediaType.OCI_MANIFEST, MediaType.DOCKER_MANIFEST}
    assert {m for m in MediaType if m.is_config} == {MediaType.OCI_CONFIG, MediaType.DOCKER_CONFIG}
    assert {m for m in MediaType if m.is_schema1} == {
        MediaType.DOCKER_SCHEMA1,
        MediaType.DOCKER_SCHEMA1_SIGNED,
    }
    assert MediaType.lookup("application/vnd.docker.distribution.manifest.v1+prettyjws") is not None
    assert MediaType.lookup("text/html") is None


def test_accept_header_lists_the_four_types_indexes_first() -> None:
    types = [t.strip() for t in ACCEPT_MANIFESTS.split(",")]
    assert types == [
        MediaType.OCI_INDEX.value,
        MediaType.DOCKER_MANIFEST_LIST.value,
        MediaType.OCI_MANIFEST.value,
        MediaType.DOCKER_MANIFEST.value,
    ]


# --- fixtures ------------------------------------------------------------------------------------


def test_buildx_oci_index_skips_attestations() -> None:
    index = parse_manifest(fixture("buildx-oci-index.json"), MediaType.OCI_INDEX.value)
    assert isinstance(index, Index)
    assert index.media_type == MediaType.OCI_INDEX
    assert len(index.manifests) == 4
    assert platforms(index) == ["linux/amd64", "linux/arm64/v8"]
    attestations = [d for d in index.manifests if d.is_attestation]
    assert len(attestations) == 2
    for att in attestations:
        assert att.platform is not None and att.platform.is_unknown
        assert not att.is_runnable_image
        assert att.annotations["vnd.docker.reference.digest"] in {d.digest for d in index.runnable()}
    assert index.runnable()[1].platform == parse_platform("linux/arm64")


def test_docker_manifest_list_five_platforms() -> None:
    index = parse_manifest(fixture("docker-manifest-list.json"), MediaType.DOCKER_MANIFEST_LIST.value)
    assert isinstance(index, Index)
    assert index.media_type == MediaType.DOCKER_MANIFEST_LIST
    assert platforms(index) == ["linux/amd64", "linux/arm/v7", "linux/arm64/v8", "linux/ppc64le", "linux/s390x"]
    assert all(d.size == 1570 and is_valid_digest(d.digest) for d in index.manifests)


def test_docker_single_manifest_and_its_arm64_config() -> None:
    manifest = parse_manifest(fixture("docker-manifest-arm64.json"), MediaType.DOCKER_MANIFEST.value)
    assert isinstance(manifest, ImageManifest)
    assert manifest.media_type == MediaType.DOCKER_MANIFEST
    assert manifest.is_runnable_image
    config = fixture("docker-config-arm64.json")
    assert manifest.config.media_type == MediaType.DOCKER_CONFIG
    assert manifest.config.digest == sha256_digest(config)
    assert manifest.config.size == len(config)
    assert len(manifest.layers) == 1
    platform = parse_config(config)
    assert platform == Platform.of("linux", "arm64")
    assert str(platform) == "linux/arm64/v8"


def test_oci_manifest_and_its_amd64_config() -> None:
    manifest = parse_manifest(fixture("oci-manifest-amd64.json"), MediaType.OCI_MANIFEST.value)
    assert isinstance(manifest, ImageManifest)
    assert manifest.is_runnable_image
    config = fixture("oci-config-amd64.json")
    assert manifest.config.digest == sha256_digest(config)
    assert [layer.media_type for layer in manifest.layers] == ["application/vnd.oci.image.layer.v1.tar+gzip"] * 2
    assert parse_config(config) == Platform.of("linux", "amd64")


def test_buildkit_cache_index_has_no_runnable_entry() -> None:
    index = parse_manifest(fixture("buildkit-cache-index.json"), MediaType.OCI_INDEX.value)
    assert isinstance(index, Index)
    assert len(index.manifests) == 3
    assert index.runnable() == ()
    assert index.manifests[-1].media_type == "application/vnd.buildkit.cacheconfig.v0"


def test_buildkit_cache_manifest_is_not_an_image() -> None:
    manifest = parse_manifest(fixture("buildkit-cache-manifest.json"), MediaType.OCI_MANIFEST.value)
    assert isinstance(manifest, ImageManifest)
    assert not manifest.is_runnable_image


def test_windows_index_keeps_os_version() -> None:
    index = parse_manifest(fixture("windows-index.json"), None)
    assert isinstance(index, Index)
    assert platforms(index) == [
        "linux/amd64",
        "windows(10.0.17763.5576)/amd64",
        "windows(10.0.20348.2340)/amd64",
    ]
    win = index.manifests[1].platform
    assert win is not None and win.os_version == "10.0.17763.5576"
    assert win.to_json() == {"os": "windows", "architecture": "amd64", "os.version": "10.0.17763.5576"}


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "application/json",
        MediaType.DOCKER_SCHEMA1_SIGNED.value,
        MediaType.DOCKER_SCHEMA1.value,
        "application/vnd.docker.distribution.manifest.v1+prettyjws; charset=utf-8",
    ],
)
def test_schema1_is_refused_with_advice(content_type: str | None) -> None:
    with pytest.raises(UnsupportedManifest) as info:
        parse_manifest(fixture("docker-schema1-signed.json"), content_type)
    assert "rebuild" in str(info.value)
    assert "buildx" in str(info.value)
    assert isinstance(info.value, ManifestError)


def test_schema1_by_header_needs_no_valid_body() -> None:
    with pytest.raises(UnsupportedManifest):
        parse_manifest(b"not json", MediaType.DOCKER_SCHEMA1_SIGNED.value)


def test_schema1_without_version_is_recognised_by_its_fields() -> None:
    doc = json.loads(fixture("docker-schema1-signed.json"))
    del doc["schemaVersion"]
    with pytest.raises(UnsupportedManifest):
        parse_manifest(body(doc), None)


# --- which media type decides --------------------------------------------------------------------


INDEX_DOC = {"schemaVersion": 2, "manifests": [{"mediaType": MediaType.OCI_MANIFEST.value, "digest": D, "size": 1}]}
IMAGE_DOC = {
    "schemaVersion": 2,
    "config": {"mediaType": MediaType.OCI_CONFIG.value, "digest": D, "size": 2},
    "layers": [],
}


@pytest.mark.parametrize(
    ("doc", "content_type", "expected"),
    [
        (INDEX_DOC, MediaType.DOCKER_MANIFEST_LIST.value, MediaType.DOCKER_MANIFEST_LIST),
        (INDEX_DOC, "application/vnd.oci.image.index.v1+json; charset=utf-8", MediaType.OCI_INDEX),
        (INDEX_DOC, " Application/Vnd.OCI.Image.Index.v1+JSON ", MediaType.OCI_INDEX),
        (INDEX_DOC, None, MediaType.OCI_INDEX),
        (INDEX_DOC, "application/octet-stream", MediaType.OCI_INDEX),
        ({**INDEX_DOC, "mediaType": MediaType.DOCKER_MANIFEST_LIST.value}, None, MediaType.DOCKER_MANIFEST_LIST),
        (
            {**INDEX_DOC, "mediaType": MediaType.DOCKER_MANIFEST_LIST.value},
            "text/plain",
            MediaType.DOCKER_MANIFEST_LIST,
        ),
        ({**INDEX_DOC, "mediaType": MediaType.DOCKER_MANIFEST_LIST.value}, "", MediaType.DOCKER_MANIFEST_LIST),
        # header wins over the body when both name an index
        (
            {**INDEX_DOC, "mediaType": MediaType.DOCKER_MANIFEST_LIST.value},
            MediaType.OCI_INDEX.value,
            MediaType.OCI_INDEX,
        ),
        (IMAGE_DOC, MediaType.DOCKER_MANIFEST.value, MediaType.DOCKER_MANIFEST),
        (IMAGE_DOC, None, MediaType.OCI_MANIFEST),
        ({**IMAGE_DOC, "mediaType": MediaType.DOCKER_MANIFEST.value}, "application/json", MediaType.DOCKER_MANIFEST),
        # an unknown body mediaType does not matter when the header is precise
        ({**IMAGE_DOC, "mediaType": "application/x-custom"}, MediaType.OCI_MANIFEST.value, MediaType.OCI_MANIFEST),
    ],
)
def test_media_type_decision(doc: dict[str, Any], content_type: str | None, expected: MediaType) -> None:
    parsed = parse_manifest(body(doc), content_type)
    assert parsed.media_type == expected
    assert isinstance(parsed, Index) == expected.is_index


def test_layers_are_optional() -> None:
    doc = {k: v for k, v in IMAGE_DOC.items() if k != "layers"}
    parsed = parse_manifest(body(doc), None)
    assert isinstance(parsed, ImageManifest)
    assert parsed.layers == ()


def test_empty_index_is_valid() -> None:
    parsed = parse_manifest(body({"schemaVersion": 2, "manifests": []}), MediaType.OCI_INDEX.value)
    assert parsed == Index(MediaType.OCI_INDEX.value, ())


# --- malformed bodies ----------------------------------------------------------------------------


def entry(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"mediaType": MediaType.OCI_MANIFEST.value, "digest": D, "size": 10}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()

BAD = [
    # body, content type, a fragment of the message
    (b"", None, "not valid JSON"),
    (b"<html>502 Bad Gateway</html>", None, "not valid JSON"),
    (b"\xff\xfe{}", None, "not UTF-8"),
    (b"[]", None, "must be a JSON object, not an array"),
    (b"null", None, "not null"),
    (b'"x"', None, "not a string"),
    (b"3", None, "not a number"),
    (b"{}", None, "neither"),
    (b'{"schemaVersion": 2}', None, "neither"),
    (b'{"schemaVersion": "2", "manifests": []}', None, "'schemaVersion' must be an integer"),
    (b'{"schemaVersion": true, "manifests": []}', None, "'schemaVersion' must be an integer"),
    (b'{"schemaVersion": 3, "manifests": []}', None, "unsupported schemaVersion 3"),
    (b'{"manifests": [], "x": NaN}', None, "NaN"),
    (b'{"manifests": [], "x": 1' + b"0" * 5000 + b"}", None, "not valid JSON"),
    (b"[" * 100000 + b"]" * 100000, None, "nested too deeply"),
    (body({"manifests": {}}), None, "'manifests' must be an array, not an object"),
    (body({"manifests": None, "mediaType": MediaType.OCI_INDEX.value}), None, "must be an array, not null"),
    (body({"mediaType": MediaType.OCI_INDEX.value}), None, "missing 'manifests'"),
    (body({"manifests": [1]}), None, "manifests[0]: must be an object, not a number"),
    (body({"manifests": [entry(mediaType=_DROP)]}), None, "manifests[0]: missing 'mediaType'"),
    (body({"manifests": [entry(mediaType=7)]}), None, "'mediaType' must be a string"),
    (body({"manifests": [entry(digest=_DROP)]}), None, "missing 'digest'"),
    (body({"manifests": [entry(digest="sha256:abc")]}), None, "not 'sha256:'"),
    (body({"manifests": [entry(digest="sha256:" + "A" * 64)]}), None, "lower-case hex"),
    (body({"manifests": [entry(digest="md5:" + "a" * 32)]}), None, "digest"),
    (body({"manifests": [entry(digest=["x"])]}), None, "'digest' must be a string"),
    (body({"manifests": [entry(size=_DROP)]}), None, "'size' must be a non-negative integer"),
    (body({"manifests": [entry(size=-1)]}), None, "'size' must be a non-negative integer"),
    (body({"manifests": [entry(size="10")]}), None, "'size'"),
    (body({"manifests": [entry(size=1.5)]}), None, "'size'"),
    (body({"manifests": [entry(size=True)]}), None, "'size'"),
    (body({"manifests": [entry(platform="linux/amd64")]}), None, "manifests[0].platform: must be an object"),
    (
        body({"manifests": [entry(platform={"os": "linux", "architecture": 64})]}),
        None,
        "'architecture' must be a string",
    ),
    (body({"manifests": [entry(platform={"os": ["linux"]})]}), None, "'os' must be a string"),
    (body({"manifests": [entry(platform={"os": "w", "os.version": 10})]}), None, "'os.version' must be a string"),
    (body({"manifests": [entry(platform={"os": "w", "os.features": "win32k"})]}), None, "'os.features'"),
    (body({"manifests": [entry(annotations=[])]}), None, "manifests[0].annotations: must be an object"),
    (body({"manifests": [entry(annotations={"a": 1})]}), None, "'a' must be a string"),
    (body({"manifests": [entry(artifactType=1)]}), None, "'artifactType' must be a string"),
    (body({"manifests": [entry(), entry(size=None)]}), None, "manifests[1]"),
    (body({"mediaType": MediaType.OCI_MANIFEST.value}), None, "missing 'config'"),
    (body(INDEX_DOC), MediaType.OCI_MANIFEST.value, "missing 'config'"),
    (body({**INDEX_DOC, "mediaType": MediaType.OCI_INDEX.value}), MediaType.OCI_MANIFEST.value, "contradicts"),
    (body({**IMAGE_DOC, "mediaType": MediaType.OCI_INDEX.value}), MediaType.DOCKER_MANIFEST.value, "contradicts"),
    (body({**IMAGE_DOC, "config": "sha256:x"}), None, "config: must be an object, not a string"),
    (body({**IMAGE_DOC, "config": {"mediaType": MediaType.OCI_CONFIG.value, "size": 1}}), None, "missing 'digest'"),
    (body({**IMAGE_DOC, "layers": {}}), None, "'layers' must be an array"),
    (body({**IMAGE_DOC, "layers": [{"digest": D}]}), None, "layers[0]: missing 'mediaType'"),
    (body(IMAGE_DOC), "text/html", "Content-Type 'text/html' is not an image manifest"),
    (body(IMAGE_DOC), MediaType.OCI_CONFIG.value, "is not an image manifest or index"),
    (
        body({**IMAGE_DOC, "mediaType": "application/vnd.oci.artifact.manifest.v1+json"}),
        None,
        "is not an image manifest or index",
    ),
    (body({**IMAGE_DOC, "mediaType": MediaType.DOCKER_CONFIG.value}), None, "image config, not a manifest"),
    (body({**IMAGE_DOC, "mediaType": 2}), None, "'mediaType' must be a string"),
    (fixture("oci-config-amd64.json"), None, "image config blob"),
]


@pytest.mark.parametrize(("data", "content_type", "fragment"), BAD)
def test_malformed_manifests(data: bytes, content_type: str | None, fragment: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, content_type)
    assert type(info.value) is ManifestError
    assert fragment in str(info.value)


def test_index_entry_limit() -> None:
    at_limit = body({"manifests": [entry()] * MAX_INDEX_ENTRIES})
    parsed = parse_manifest(at_limit, None)
    assert isinstance(parsed, Index) and len(parsed.manifests) == MAX_INDEX_ENTRIES
    with pytest.raises(ManifestError, match="more than 1000"):
        parse_manifest(body({"manifests": [entry()] * (MAX_INDEX_ENTRIES + 1)}), None)


def test_not_bytes() -> None:
    with pytest.raises(ManifestError, match="expected bytes"):
        parse_manifest("{}", None)  # type: ignore[arg-type]
    assert isinstance(parse_manifest(bytearray(body(INDEX_DOC)), None), Index)


# --- descriptors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("descriptor", "runnable"),
    [
        (Descriptor(MediaType.OCI_MANIFEST.value, D, 1, Platform.of("linux", "amd64")), True),
        (Descriptor(MediaType.DOCKER_MANIFEST.value, D, 1, Platform.of("linux", "aarch64")), True),
        (Descriptor(MediaType.OCI_INDEX.value, D, 1), True),  # nested index
        (Descriptor(MediaType.OCI_MANIFEST.value, D, 1), True),  # no platform: the config will say
        (Descriptor(MediaType.OCI_MANIFEST.value, D, 1, Platform.of("unknown", "unknown")), False),
        (Descriptor(MediaType.OCI_MANIFEST.value, D, 1, Platform.of("linux", "unknown")), False),
        (
            Descriptor(
                MediaType.OCI_MANIFEST.value,
                D,
                1,
                Platform.of("linux", "amd64"),
                {"vnd.docker.reference.type": "attestation-manifest"},
            ),
            False,
        ),
        (Descriptor(MediaType.OCI_MANIFEST.value, D, 1, artifact_type="application/vnd.dev.cosign"), False),
        (Descriptor("application/vnd.docker.image.rootfs.diff.tar.gzip", D, 1), False),
        (Descriptor(MediaType.OCI_CONFIG.value, D, 1), False),
        (Descriptor(MediaType.DOCKER_SCHEMA1_SIGNED.value, D, 1, Platform.of("linux", "amd64")), False),
    ],
)
def test_descriptor_runnable(descriptor: Descriptor, runnable: bool) -> None:
    assert descriptor.is_runnable_image is runnable


def test_descriptor_is_frozen_hashable_and_normalises_platform() -> None:
    raw = body({"manifests": [entry(platform={"os": "Linux", "architecture": "x86_64"}, annotations={"k": "v"})]})
    parsed = parse_manifest(raw, None)
    assert isinstance(parsed, Index)
    desc = parsed.manifests[0]
    assert desc.platform == Platform.of("linux", "amd64")
    assert str(desc.platform) == "linux/amd64"
    assert desc.annotations == {"k": "v"}
    assert hash(desc) == hash(Descriptor(desc.media_type, desc.digest, desc.size, desc.platform))
    with pytest.raises(AttributeError):
        desc.size = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        desc.annotations["k"] = "w"  # type: ignore[index]


def test_platform_os_features_are_kept() -> None:
    raw = body({"manifests": [entry(platform={"os": "windows", "architecture": "amd64", "os.features": ["win32k"]})]})
    parsed = parse_manifest(raw, None)
    assert isinstance(parsed, Index)
    platform = parsed.manifests[0].platform
    assert platform is not None and platform.os_features == ("win32k",)


# --- config blobs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"os": "linux", "architecture": "amd64"}, Platform.of("linux", "amd64")),
        ({"os": "linux", "architecture": "aarch64"}, Platform.of("linux", "arm64")),
        ({"os": "linux", "architecture": "arm", "variant": "v6"}, Platform.of("linux", "arm", "v6")),
        (
            {"os": "windows", "architecture": "amd64", "os.version": "10.0.20348.2340"},
            Platform.of("windows", "amd64", os_version="10.0.20348.2340"),
        ),
        ({"architecture": "amd64"}, Platform("", "amd64")),
        ({}, Platform("", "")),
        ({"os": None, "architecture": "s390x"}, Platform("", "s390x")),
    ],
)
def test_parse_config(doc: dict[str, Any], expected: Platform) -> None:
    platform = parse_config(body(doc))
    assert platform == expected
    assert platform.os_version == expected.os_version


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"architecture": 1}', "'architecture' must be a string"),
        (b'{"os": {}}', "'os' must be a string"),
        (b'{"variant": false}', "'variant' must be a string"),
        (b'{"os.version": 10}', "'os.version' must be a string"),
        (b'{"os.features": [1]}', "'os.features'"),
        (b"\x80", "not UTF-8"),
    ],
)
def test_parse_config_malformed(data: bytes, fragment: str) -> None:
    with pytest.raises(ManifestError, match="image config") as info:
        parse_config(data)
    assert fragment in str(info.value)


# --- digests -------------------------------------------------------------------------------------


def test_sha256_digest() -> None:
    assert sha256_digest(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert is_valid_digest(sha256_digest(b"x"))


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        (D, True),
        ("sha512:" + "c" * 128, True),
        ("sha256:" + "a" * 63, False),
        ("sha256:" + "a" * 65, False),
        ("sha256:" + "A" * 64, False),
        ("sha512:" + "c" * 64, False),
        ("SHA256:" + "a" * 64, False),
        ("a" * 64, False),
        ("", False),
        (None, False),
        (" " + D, False),
        (D + "\n", False),
    ],
)
def test_is_valid_digest(text: object, valid: bool) -> None:
    assert is_valid_digest(text) is valid


# --- fuzzing -------------------------------------------------------------------------------------

_content_types = st.one_of(
    st.none(),
    st.sampled_from([m.value for m in MediaType] + ["application/json", "text/plain", "text/html", ""]),
    st.text(max_size=20),
)


@given(data=st.binary(max_size=300), content_type=_content_types)
def test_arbitrary_bytes_raise_only_manifest_error(data: bytes, content_type: str | None) -> None:
    with contextlib.suppress(ManifestError):
        parse_manifest(data, content_type)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "schemaVersion",
        "mediaType",
        "manifests",
        "config",
        "layers",
        "digest",
        "size",
        "platform",
        "os",
        "architecture",
        "variant",
        "os.version",
        "os.features",
        "annotations",
        "artifactType",
        "fsLayers",
    ]
)
_values = st.one_of(_json, st.sampled_from([m.value for m in MediaType]), st.just(D), st.just(2), st.just(1))
_structured = st.recursive(
    st.dictionaries(_keys, _values, max_size=6),
    lambda children: st.dictionaries(_keys, _values | children | st.lists(children, max_size=3), max_size=6),
    max_leaves=25,
)


@settings(max_examples=300)
@given(doc=_structured, content_type=_content_types)
def test_manifest_shaped_json_raises_only_manifest_error(doc: dict[str, Any], content_type: str | None) -> None:
    try:
        parsed = parse_manifest(body(doc), content_type)
    except ManifestError:
        return
    if isinstance(parsed, Index):
        parsed.runnable()
    else:
        assert is_valid_digest(parsed.config.digest)


@given(data=st.binary(max_size=200) | _structured.map(body))
def test_config_fuzz_raises_only_manifest_error(data: bytes) -> None:
    try:
        platform = parse_config(data)
    except ManifestError:
        return
    assert isinstance(platform, Platform)


def test_errors_are_noe_errors() -> None:
    assert issubclass(ManifestError, NoeError)
    assert issubclass(UnsupportedManifest, ManifestError)


# --- artifacts (rule 17) ------------------------------------------------------------------------

EMPTY_CONFIG = {"mediaType": "application/vnd.oci.empty.v1+json", "digest": D, "size": 2}
IMAGE_CONFIG = {"mediaType": MediaType.OCI_CONFIG.value, "digest": D, "size": 2}


@pytest.mark.parametrize(
    ("doc", "artifact"),
    [
        ({"config": IMAGE_CONFIG}, ""),
        ({"config": {**IMAGE_CONFIG, "mediaType": MediaType.DOCKER_CONFIG.value}}, ""),
        # OCI 1.1: artifactType, with the empty config
        (
            {"artifactType": "application/vnd.example.model.v1", "config": EMPTY_CONFIG},
            "application/vnd.example.model.v1",
        ),
        # artifactType decides even over an image config
        ({"artifactType": "application/vnd.example.sbom", "config": IMAGE_CONFIG}, "application/vnd.example.sbom"),
        # OCI 1.0 style: the config's media type says what it is
        (
            {"config": {**IMAGE_CONFIG, "mediaType": "application/vnd.cncf.helm.config.v1+json"}},
            "application/vnd.cncf.helm.config.v1+json",
        ),
    ],
)
def test_artifacts_are_told_from_the_manifest(doc: dict[str, Any], artifact: str) -> None:
    manifest = parse_manifest(body({"schemaVersion": 2, "mediaType": MediaType.OCI_MANIFEST.value, **doc}), None)
    assert isinstance(manifest, ImageManifest)
    assert manifest.artifact == artifact and manifest.is_runnable_image == (not artifact)


def test_an_index_lists_its_artifacts_apart_from_its_images() -> None:
    entry = {"mediaType": MediaType.OCI_MANIFEST.value, "digest": D, "size": 10}
    index = parse_manifest(
        body(
            {
                "schemaVersion": 2,
                "mediaType": MediaType.OCI_INDEX.value,
                "manifests": [
                    {**entry, "artifactType": "application/vnd.example.model.v1"},
                    {**entry, "digest": D2, "platform": {"os": "linux", "architecture": "arm64"}},
                    {
                        **entry,
                        "artifactType": "application/vnd.in-toto+json",
                        "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
                    },
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": D,
                        "size": 1,
                        "artifactType": "x",
                    },
                ],
            }
        ),
        None,
    )
    assert isinstance(index, Index)
    assert [d.artifact_type for d in index.artifacts()] == ["application/vnd.example.model.v1"]
    assert platforms(index) == ["linux/arm64"]


def test_a_non_string_artifact_type_is_a_manifest_error() -> None:
    with pytest.raises(ManifestError, match="artifactType"):
        parse_manifest(body({"schemaVersion": 2, "config": IMAGE_CONFIG, "artifactType": 7}), None)
