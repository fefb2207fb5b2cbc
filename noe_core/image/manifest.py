"""Manifests, indexes and config blobs as registries serve them (pure: bytes in, values out).

The webhook needs one thing from a registry: which platforms an image runs on.
An index (OCI image index or Docker manifest list) answers with its entries'
platforms; a single image manifest does not say, so its config blob is read
(never assume amd64). Both OCI and Docker v2.2 formats are read; Docker schema 1
is recognised and refused with advice, because it carries no usable platform
list and registries have deprecated it.

Everything a registry sends is untrusted: any malformed body raises
:class:`~noe_core.errors.ManifestError` with the reason, and never any other
exception, so callers can turn it into an admission warning.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from noe_core.errors import ManifestError, UnsupportedManifest
from noe_core.image.platform import Platform
from noe_core.util import fields

MAX_INDEX_ENTRIES = 1000
"""Entries (or layers) beyond this are refused: a real index has a handful, a hostile one millions.

This is the parser's ceiling; the resolver applies its own, usually lower, setting. The byte size
of a body is the transport's to bound (it reads at most ``max_manifest_bytes``).
"""

ATTESTATION_TYPE_ANNOTATION = "vnd.docker.reference.type"
ATTESTATION_TYPE = "attestation-manifest"
ATTESTATION_DIGEST_ANNOTATION = "vnd.docker.reference.digest"

_GENERIC_CONTENT_TYPES = frozenset(
    {"", "application/json", "application/octet-stream", "binary/octet-stream", "text/plain"}
)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")

_SCHEMA1_ADVICE = (
    "Docker schema 1 manifests carry no platform list and are deprecated by registries; "
    "rebuild and push the image with a current Docker or docker buildx to get a v2 manifest"
)


class MediaType(StrEnum):
    """The media types noe reads or recognises."""

    OCI_INDEX = "application/vnd.oci.image.index.v1+json"
    OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
    DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
    DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
    DOCKER_SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+json"
    DOCKER_SCHEMA1_SIGNED = "application/vnd.docker.distribution.manifest.v1+prettyjws"
    OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
    DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"

    @property
    def is_index(self) -> bool:
        """A list of per-platform manifests."""
        return self in (MediaType.OCI_INDEX, MediaType.DOCKER_MANIFEST_LIST)

    @property
    def is_image(self) -> bool:
        """A single image manifest (config + layers) that noe can read."""
        return self in (MediaType.OCI_MANIFEST, MediaType.DOCKER_MANIFEST)

    @property
    def is_schema1(self) -> bool:
        """Docker's legacy format, recognised only to refuse it clearly."""
        return self in (MediaType.DOCKER_SCHEMA1, MediaType.DOCKER_SCHEMA1_SIGNED)

    @property
    def is_config(self) -> bool:
        """A container image config blob (holds os / architecture)."""
        return self in (MediaType.OCI_CONFIG, MediaType.DOCKER_CONFIG)

    @classmethod
    def lookup(cls, text: str) -> MediaType | None:
        """The member for ``text``, or None for a type noe does not know."""
        try:
            return cls(text)
        except ValueError:
            return None


ACCEPT_MANIFESTS = ", ".join(
    m.value
    for m in (
        MediaType.OCI_INDEX,
        MediaType.DOCKER_MANIFEST_LIST,
        MediaType.OCI_MANIFEST,
        MediaType.DOCKER_MANIFEST,
    )
)
"""The ``Accept`` header for manifest requests: indexes first, so multi-arch images answer with their list."""

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Descriptor:
    """A pointer to a blob or manifest: its media type, digest and size, plus an index entry's platform."""

    media_type: str
    digest: str
    size: int
    platform: Platform | None = None
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    artifact_type: str = ""

    @property
    def is_attestation(self) -> bool:
        """A buildkit provenance/SBOM manifest: it sits in the index but runs nowhere."""
        return self.annotations.get(ATTESTATION_TYPE_ANNOTATION) == ATTESTATION_TYPE

    @property
    def is_runnable_image(self) -> bool:
        """True when this index entry describes a container image some node could run.

        Attestations, artifacts (``artifactType`` set), ``unknown/unknown`` platforms
        and non-manifest entries (buildkit cache layers) are not. An entry with no
        platform is kept: the caller may read its config to find out.
        """
        kind = MediaType.lookup(self.media_type)
        if kind is None or not (kind.is_image or kind.is_index):
            return False
        if self.is_attestation or self.artifact_type:
            return False
        return not (self.platform is not None and self.platform.is_unknown)


@dataclass(frozen=True)
class Index:
    """An OCI image index or Docker manifest list."""

    media_type: str
    manifests: tuple[Descriptor, ...]

    def runnable(self) -> tuple[Descriptor, ...]:
        """The entries that describe runnable images (see :attr:`Descriptor.is_runnable_image`)."""
        return tuple(d for d in self.manifests if d.is_runnable_image)

    def artifacts(self) -> tuple[Descriptor, ...]:
        """The manifests it lists that say they are OCI artifacts (``artifactType``), attestations aside."""
        return tuple(d for d in self.manifests if d.artifact_type and not d.is_attestation and _is_manifest(d))


def _is_manifest(descriptor: Descriptor) -> bool:
    kind = MediaType.lookup(descriptor.media_type)
    return kind is not None and (kind.is_image or kind.is_index)


@dataclass(frozen=True)
class ImageManifest:
    """A single-platform image manifest; its platform is in the config blob.

    ``artifact_type`` is the manifest's own ``artifactType`` (OCI 1.1): set, the
    manifest is an artifact, whatever its config.
    """

    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]
    artifact_type: str = ""

    @property
    def artifact(self) -> str:
        """Rule 17: what kind of artifact this is (its ``artifactType``, else its config's media type when that
        is not an image config: a Helm chart, a signature, buildkit's cache); ``""`` for a container image."""
        if self.artifact_type:
            return self.artifact_type
        kind = MediaType.lookup(self.config.media_type)
        return "" if kind is not None and kind.is_config else self.config.media_type or "unknown"

    @property
    def is_runnable_image(self) -> bool:
        """False for artifacts stored as manifests (buildkit cache, Helm charts, signatures)."""
        return not self.artifact


Manifest = Index | ImageManifest


def sha256_digest(body: bytes) -> str:
    """The ``sha256:<hex>`` digest a registry gives ``body``."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def is_valid_digest(text: object) -> bool:
    """True for ``sha256:`` + 64 or ``sha512:`` + 128 lower-case hex (the registered OCI algorithms)."""
    return isinstance(text, str) and _DIGEST.fullmatch(text) is not None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _load_object(body: bytes, what: str) -> dict[str, Any]:
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ManifestError(f"{what}: expected bytes, got {type(body).__name__}")
    try:
        text = bytes(body).decode("utf-8")
        doc = json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{what} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except RecursionError:
        raise ManifestError(f"{what} is nested too deeply to be a manifest") from None
    except ValueError as exc:  # JSONDecodeError and oversized integers
        raise ManifestError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ManifestError(f"{what} must be a JSON object, not {fields.json_type(doc)}")
    return doc


def _string(doc: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    return fields.string(
        doc.get(key), f"{where}: {key!r}", required=required, missing=f"{where}: missing {key!r}", error=ManifestError
    )


def _object(value: object, where: str) -> Mapping[str, Any]:
    """A JSON object that must be there (``null`` is a wrong type here, not an absence)."""
    return fields.mapping(
        value, f"{where}:", required=True, missing=f"{where}: must be an object, not null", error=ManifestError
    )


def _content_type(content_type: str | None) -> str:
    if content_type is None:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _parse_platform(value: object, where: str) -> Platform:
    value = _object(value, where)
    features = value.get("os.features")
    if features is None:
        features = []
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise ManifestError(f"{where}: 'os.features' must be an array of strings")
    return Platform.of(
        _string(value, "os", where),
        _string(value, "architecture", where),
        _string(value, "variant", where),
        _string(value, "os.version", where),
        tuple(features),
    )


def _parse_annotations(value: object, where: str) -> Mapping[str, str]:
    if value is None:
        return _EMPTY
    value = _object(value, where)
    for key in value:
        _string(value, key, where, required=True)
    return MappingProxyType(dict(value))


def _parse_descriptor(value: object, where: str) -> Descriptor:
    value = _object(value, where)
    media_type = _string(value, "mediaType", where, required=True)
    digest = _string(value, "digest", where, required=True)
    if not is_valid_digest(digest):
        raise ManifestError(f"{where}: digest {digest[:100]!r} is not 'sha256:' + 64 or 'sha512:' + 128 lower-case hex")
    size = value.get("size")
    if type(size) is not int or size < 0:
        raise ManifestError(f"{where}: 'size' must be a non-negative integer")
    platform = value.get("platform")
    return Descriptor(
        media_type=media_type,
        digest=digest,
        size=size,
        platform=None if platform is None else _parse_platform(platform, f"{where}.platform"),
        annotations=_parse_annotations(value.get("annotations"), f"{where}.annotations"),
        artifact_type=_string(value, "artifactType", where),
    )


def _parse_descriptors(value: object, key: str) -> tuple[Descriptor, ...]:
    if not isinstance(value, list):
        raise ManifestError(f"{key!r} must be an array, not {fields.json_type(value)}")
    if len(value) > MAX_INDEX_ENTRIES:
        raise ManifestError(f"{key!r} has {len(value)} entries; more than {MAX_INDEX_ENTRIES} is refused")
    return tuple(_parse_descriptor(item, f"{key}[{i}]") for i, item in enumerate(value))


def _decide_media_type(doc: Mapping[str, Any], header: str) -> MediaType:
    """The header decides; a generic or missing one defers to the body, then to the structure."""
    body_text = _string(doc, "mediaType", "manifest")
    body_type = MediaType.lookup(body_text) if body_text else None
    if body_text and body_type is None and header in _GENERIC_CONTENT_TYPES:
        raise ManifestError(f"mediaType {body_text[:100]!r} is not an image manifest or index")
    if body_type is not None and body_type.is_schema1:
        raise UnsupportedManifest(f"{body_type.value}: {_SCHEMA1_ADVICE}")
    if header not in _GENERIC_CONTENT_TYPES:
        header_type = MediaType.lookup(header)
        if header_type is None or not (header_type.is_index or header_type.is_image):
            raise ManifestError(f"Content-Type {header[:100]!r} is not an image manifest or index")
        if body_type is not None and body_type.is_index != header_type.is_index:
            raise ManifestError(f"Content-Type {header!r} contradicts the body's mediaType {body_type.value!r}")
        return header_type
    if body_type is not None:
        if not (body_type.is_index or body_type.is_image):
            raise ManifestError(f"mediaType {body_type.value!r} is an image config, not a manifest")
        return body_type
    if "rootfs" in doc:
        raise ManifestError("this is an image config blob (it has 'rootfs'), not a manifest")
    if "manifests" in doc:
        return MediaType.OCI_INDEX
    if "config" in doc:
        return MediaType.OCI_MANIFEST
    if "fsLayers" in doc or "signatures" in doc:
        raise UnsupportedManifest(f"schema 1 manifest: {_SCHEMA1_ADVICE}")
    raise ManifestError("neither a Content-Type, a mediaType nor 'manifests' or 'config' says what this is")


def parse_manifest(body: bytes, content_type: str | None) -> Index | ImageManifest:
    """Read a manifest or index response.

    Raises :class:`UnsupportedManifest` for Docker schema 1 and :class:`ManifestError`
    for anything else that is not a well-formed v2 / OCI manifest or index.
    """
    header = _content_type(content_type)
    schema1 = MediaType.lookup(header)
    if schema1 is not None and schema1.is_schema1:
        raise UnsupportedManifest(f"{schema1.value}: {_SCHEMA1_ADVICE}")
    doc = _load_object(body, "manifest")
    version = doc.get("schemaVersion")
    if version is not None and type(version) is not int:
        raise ManifestError(f"'schemaVersion' must be an integer, not {fields.json_type(version)}")
    if version == 1:
        raise UnsupportedManifest(f"schemaVersion 1: {_SCHEMA1_ADVICE}")
    if version is not None and version != 2:
        raise ManifestError(f"unsupported schemaVersion {version}; expected 2")
    media_type = _decide_media_type(doc, header)
    if media_type.is_index:
        if "manifests" not in doc:
            raise ManifestError(f"{media_type.value}: missing 'manifests'")
        return Index(media_type.value, _parse_descriptors(doc["manifests"], "manifests"))
    if "config" not in doc:
        raise ManifestError(f"{media_type.value}: missing 'config'")
    config = _parse_descriptor(doc["config"], "config")
    layers = doc.get("layers")
    return ImageManifest(
        media_type.value,
        config,
        () if layers is None else _parse_descriptors(layers, "layers"),
        _string(doc, "artifactType", "manifest"),
    )


def parse_config(body: bytes) -> Platform:
    """The platform an image config blob declares (missing fields become empty strings)."""
    doc = _load_object(body, "image config")
    return _parse_platform(doc, "image config")
