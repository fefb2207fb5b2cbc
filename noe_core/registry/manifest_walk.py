"""Reading an image's platforms from its manifests: the walk from the manifest to every platform entry.

* a **single manifest** → its config blob by digest (verified) → the platform.
  The platform is never assumed;
* an **index** → its runnable entries (no attestations, no ``unknown``); one
  level of nested index is followed; with ``verify_platform_manifests`` each
  entry is checked with ``HEAD`` and entries the registry no longer has (404)
  are dropped — any other failure fails the image. An entry without
  ``platform`` is read from its own manifest and config. Sizes and entry
  counts are capped.
* an **artifact** (rule 17) → no platforms, its ``artifact_type``: a manifest
  whose ``artifactType`` is set or whose config is not an image config (never
  fetched), or an index whose usable entries are all artifacts (an entry's
  ``artifactType`` says so without fetching it).

Every body fetched by digest is checked against it
(:class:`~noe_core.errors.DigestMismatch` otherwise). The answer is one
:class:`~noe_core.image.image_platforms.ImagePlatforms`: the shape the policy reads. Caching
it is the resolver's business (:mod:`noe_core.registry.resolver`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from noe_core.credentials.keychain import Credential
from noe_core.errors import DigestMismatch, ManifestError
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.manifest import (
    ACCEPT_MANIFESTS,
    Descriptor,
    ImageManifest,
    Index,
    MediaType,
    parse_config,
    parse_manifest,
    sha256_digest,
)
from noe_core.image.platform import Platform
from noe_core.name.reference import Reference
from noe_core.registry.access import AccessGrants
from noe_core.registry.observer import RegistryObserver
from noe_core.registry.sender import HTTPResult, status_error
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import Transport
from noe_core.util.deadline import Deadline

log = logging.getLogger(__name__)

_Found = tuple[Platform, str]
"""One platform entry and the digest of its manifest."""


class ManifestWalk:
    """Fetches manifests and config blobs through ``transport`` and reads the platforms they state."""

    def __init__(
        self,
        transport: Transport,
        *,
        settings: RegistrySettings,
        observer: RegistryObserver,
        access: AccessGrants,
    ) -> None:
        self.transport = transport
        self.settings = settings
        self._observer = observer
        self.access = access

    def fetch_manifest(
        self, target: Reference, identifier: str, credentials: Sequence[Credential], deadline: Deadline
    ) -> HTTPResult:
        result, candidate = self.transport.fetch_as(
            "GET",
            target,
            f"manifests/{identifier}",
            deadline=deadline,
            credentials=credentials,
            accept=ACCEPT_MANIFESTS,
            max_bytes=self.settings.max_manifest_bytes,
        )
        if result.status != 200:
            self._observer.error(target.api_host, "not_found" if result.status == 404 else "status")
            raise status_error(result, target, "manifest")
        self.access.record(target.context, candidate.credential)
        return result

    def verify(self, body: bytes, digest: str, target: Reference, what: str) -> None:
        if not digest.startswith("sha256:"):
            raise ManifestError(f"{what} digest {digest[:80]} of {target}: only sha256 can be verified")
        actual = sha256_digest(body)
        if actual != digest:
            self._observer.error(target.api_host, "digest")
            raise DigestMismatch(
                f"registry {target.api_host} answered {what} {digest} of {target.context} with content "
                f"whose sha256 is {actual}: a proxy or the registry is corrupting content",
                registry=target.api_host,
            )

    def describe(
        self,
        target: Reference,
        digest: str,
        result: HTTPResult,
        credentials: Sequence[Credential],
        deadline: Deadline,
    ) -> ImagePlatforms:
        """The platforms of the manifest ``result`` holds (whose digest is ``digest``)."""
        manifest = parse_manifest(result.body, result.header("content-type") or None)
        artifacts: list[str] = []
        if isinstance(manifest, ImageManifest):
            if manifest.artifact:
                return ImagePlatforms.artifact(manifest.artifact, digest=digest, media_type=manifest.media_type)
            found: Sequence[_Found] = ((self._config_platform(target, manifest, credentials, deadline), digest),)
        else:
            found = self._index_platforms(target, manifest, credentials, deadline, depth=0, artifacts=artifacts)
            if not found:
                return ImagePlatforms.artifact(artifacts[0], digest=digest, media_type=manifest.media_type)
        return ImagePlatforms(
            tuple(platform for platform, _ in found), digest, manifest.media_type, tuple(d for _, d in found)
        )

    def _config_platform(
        self, target: Reference, manifest: ImageManifest, credentials: Sequence[Credential], deadline: Deadline
    ) -> Platform:
        if not manifest.is_runnable_image:
            raise ManifestError(f"{target} is not a container image (its config is {manifest.config.media_type!r})")
        config = manifest.config
        if config.size > self.settings.max_manifest_bytes:
            raise ManifestError(
                f"the config blob of {target} is {config.size} bytes, more than the "
                f"{self.settings.max_manifest_bytes}-byte limit"
            )
        result = self.transport.fetch(
            "GET",
            target,
            f"blobs/{config.digest}",
            deadline=deadline,
            credentials=credentials,
            max_bytes=self.settings.max_manifest_bytes,
        )
        if result.status != 200:
            raise status_error(result, target, f"config blob {config.digest}")
        self.verify(result.body, config.digest, target, "config blob")
        return parse_config(result.body)

    def _index_platforms(
        self,
        target: Reference,
        index: Index,
        credentials: Sequence[Credential],
        deadline: Deadline,
        *,
        depth: int,
        artifacts: list[str],
    ) -> tuple[_Found, ...]:
        """The index's runnable entries; the artifacts it lists are added to ``artifacts`` (an index of
        nothing else is an artifact: the caller then gets no entry, not an error)."""
        if len(index.manifests) > self.settings.max_index_entries:
            raise ManifestError(
                f"the index of {target} lists {len(index.manifests)} entries, more than the "
                f"{self.settings.max_index_entries} noe reads"
            )
        found: list[_Found] = []
        artifacts.extend(child.artifact_type for child in index.artifacts())
        for child in index.runnable():
            kind = MediaType.lookup(child.media_type)
            if kind is not None and kind.is_index:
                if depth >= 1:
                    log.info("ignoring an index nested more than one level deep in %s", target)
                    continue
                found.extend(self._nested(target, child, credentials, deadline, artifacts))
                continue
            if self.settings.verify_platform_manifests and not self._exists(target, child, credentials, deadline):
                continue
            platform = child.platform
            if platform is None:
                platform = self._child_platform(target, child, credentials, deadline, artifacts)
                if platform is None:
                    continue
            found.append((platform, child.digest))
        if depth == 0 and not found and artifacts:
            return ()
        if depth == 0 and not found:
            raise ManifestError(
                f"the index of {target} lists no runnable image the registry still has: every platform "
                "manifest is an attestation, unknown, or was deleted"
            )
        return tuple(found)

    def _nested(
        self,
        target: Reference,
        child: Descriptor,
        credentials: Sequence[Credential],
        deadline: Deadline,
        artifacts: list[str],
    ) -> tuple[_Found, ...]:
        nested = self._fetch_child(target, child, credentials, deadline, "nested index", missing_ok=True)
        if nested is None:
            return ()
        if not isinstance(nested, Index):
            # Listed as an index but is a single manifest: read it as one.
            if nested.artifact:
                artifacts.append(nested.artifact)
                return ()
            platform = self._config_platform(target, nested, credentials, deadline)
            return ((platform, child.digest),)
        return self._index_platforms(target, nested, credentials, deadline, depth=1, artifacts=artifacts)

    def _fetch_child(
        self,
        target: Reference,
        child: Descriptor,
        credentials: Sequence[Credential],
        deadline: Deadline,
        what: str,
        *,
        missing_ok: bool = False,
    ) -> Index | ImageManifest | None:
        """A manifest an index lists, fetched by its digest and verified against it (``None``: gone, if allowed)."""
        result = self.transport.fetch(
            "GET",
            target,
            f"manifests/{child.digest}",
            deadline=deadline,
            credentials=credentials,
            accept=ACCEPT_MANIFESTS,
            max_bytes=self.settings.max_manifest_bytes,
        )
        if result.status == 404 and missing_ok:
            return None
        if result.status != 200:
            raise status_error(result, target, f"{what} {child.digest}")
        self.verify(result.body, child.digest, target, what)
        return parse_manifest(result.body, result.header("content-type") or None)

    def _exists(
        self, target: Reference, child: Descriptor, credentials: Sequence[Credential], deadline: Deadline
    ) -> bool:
        result = self.transport.fetch(
            "HEAD",
            target,
            f"manifests/{child.digest}",
            deadline=deadline,
            credentials=credentials,
            accept=ACCEPT_MANIFESTS,
        )
        if result.status == 200:
            return True
        if result.status == 404:
            log.info("dropping %s of %s: the registry no longer has it", child.digest, target)
            return False
        raise status_error(result, target, f"platform manifest {child.digest}")

    def _child_platform(
        self,
        target: Reference,
        child: Descriptor,
        credentials: Sequence[Credential],
        deadline: Deadline,
        artifacts: list[str],
    ) -> Platform | None:
        """An index entry without ``platform``: read the child manifest and its config (``None``: the entry
        is an artifact, added to ``artifacts``)."""
        manifest = self._fetch_child(target, child, credentials, deadline, "platform manifest")
        if not isinstance(manifest, ImageManifest):
            raise ManifestError(f"entry {child.digest} of {target} has no platform and is not an image")
        if manifest.artifact:
            artifacts.append(manifest.artifact)
            return None
        return self._config_platform(target, manifest, credentials, deadline)
