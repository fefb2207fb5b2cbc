"""Image reference → digest, media type and platforms, cheaply and within a deadline.

The distribution-spec v2 flow, per image:

* **by tag** — ``GET /v2/<name>/manifests/<tag>`` with ``Accept`` listing the
  four manifest media types; the digest is ``Docker-Content-Digest`` (checked
  against the body when present) or the sha256 of the body;
* **by digest** (``name@sha256:…`` and ``name:tag@sha256:…``, where the digest
  wins) — the same GET, and the body's sha256 must equal the digest
  (:class:`~noe_core.errors.DigestMismatch` otherwise, never cached);
* a **single manifest** → its config blob by digest (verified) → the platform.
  The platform is never assumed;
* an **index** → its runnable entries (no attestations, no ``unknown``); one
  level of nested index is followed; with ``verify_platform_manifests`` each
  entry is checked with ``HEAD`` and entries the registry no longer has (404)
  are dropped — any other failure fails the image. Sizes and entry counts
  are capped.

Caches (all bounded LRU, thread-safe):

* digest → platforms: content-addressed, immutable, no TTL;
* tag → digest: ``cache_ttl``. When it expires, one ``HEAD`` re-validates the
  tag; if the digest did not move the digest entry is reused (HEADs do not
  count against Docker Hub's pull limit). If the registry fails during
  re-validation, the stale answer is served for ``negative_cache_ttl``;
* failures: ``negative_cache_ttl``, so a failing registry is not hammered
  (digest mismatches and the caller's own deadline are not cached).

With a :class:`~noe_core.registry.cache_store.CacheStore` (``noe serve``), the
digest, tag and failure caches are backed by one SQLite file per node: a miss
in memory is looked up on disk before the registry, and what is fetched is
written there for the other workers and the next start. The memory layer stays
in front, so warm images never touch the disk.

A cached answer is given only to a request allowed to see it
(:mod:`noe_core.registry.access`): images read anonymously are shared; others
need one of the request's credentials to have been seen reading the
repository, else one ``HEAD`` with them verifies it first.

Concurrent lookups of the same image (and the same credentials) share one
in-flight resolution; with a store, workers share it too (a lock per key
stripe, waited for within the deadline). ``--registry-proxies`` mirrors are applied to the
registry host before anything else, so credentials are looked up for, and
tokens sent to, the mirror.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import requests

from noe_core.cache import Entry, LRUCache, SingleFlight
from noe_core.credentials.keychain import Credential, Keychain, unique
from noe_core.deadline import Clock, Deadline
from noe_core.errors import AuthError, DeadlineExceeded, DigestMismatch, ManifestError, NoeError, RegistryError
from noe_core.hostmatch import host_glob_matches
from noe_core.manifest import (
    ACCEPT_MANIFESTS,
    Descriptor,
    ImageManifest,
    Index,
    MediaType,
    parse_config,
    parse_manifest,
    sha256_digest,
)
from noe_core.observer import NullObserver, RegistryObserver
from noe_core.platform import Platform
from noe_core.reference import Reference, parse_reference
from noe_core.registry.access import AccessGrants
from noe_core.registry.cache_store import CacheStore
from noe_core.registry.sender import HTTPResult, make_session, status_error
from noe_core.registry.transport import Transport
from noe_core.registry_settings import RegistrySettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResolvedPlatform:
    """One platform an image runs on, and the digest of its manifest."""

    platform: Platform
    digest: str


@dataclass(frozen=True)
class ImageInfo:
    """What the registry says about an image."""

    reference: Reference
    digest: str
    media_type: str
    platforms: tuple[ResolvedPlatform, ...]

    def to_json(self) -> dict[str, object]:
        """The ``noe inspect --json`` shape."""
        return {
            "reference": str(self.reference),
            "digest": self.digest,
            "mediaType": self.media_type,
            "platforms": [{**p.platform.to_json(), "digest": p.digest} for p in self.platforms],
        }


@dataclass(frozen=True)
class _Content:
    """The cached, reference-independent part of an :class:`ImageInfo`."""

    media_type: str
    platforms: tuple[ResolvedPlatform, ...]

    def platforms_json(self) -> str:
        """The platforms as the store keeps them (every field, so nothing is lost on the way back)."""
        return json.dumps(
            [
                [
                    p.platform.os,
                    p.platform.architecture,
                    p.platform.variant,
                    p.platform.os_version,
                    list(p.platform.os_features),
                    p.digest,
                ]
                for p in self.platforms
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_stored(cls, media_type: str, platforms: str) -> _Content:
        rows = json.loads(platforms)
        return cls(
            media_type,
            tuple(
                ResolvedPlatform(Platform(os, arch, variant, os_version, tuple(features)), digest)
                for os, arch, variant, os_version, features, digest in rows
            ),
        )


_NEVER_CACHED = (DigestMismatch, DeadlineExceeded)


class Resolver:
    """Resolves image references against their registries; thread-safe, share one per process."""

    def __init__(
        self,
        session: requests.Session,
        *,
        settings: RegistrySettings,
        keychain: Keychain | None = None,
        observer: RegistryObserver | None = None,
        clock: Clock = time.monotonic,
        store: CacheStore | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self._keychain = keychain
        self._observer: RegistryObserver = observer if observer is not None else NullObserver()
        self._clock = clock
        self.transport = Transport(session, settings=settings, observer=self._observer, clock=clock)
        self._content: LRUCache[tuple[str, str], _Content] = LRUCache(settings.max_cached_images, clock=clock)
        self._tags: LRUCache[tuple[str, str], str] = LRUCache(settings.max_cached_tags, clock=clock)
        self._negative: LRUCache[tuple[str, str, tuple[str, ...]], NoeError] = LRUCache(
            settings.max_cached_tags, clock=clock
        )
        self._flight: SingleFlight[tuple[str, str, tuple[str, ...]], ImageInfo] = SingleFlight()
        self.access = AccessGrants(ttl=settings.cache_ttl, maxsize=settings.max_cached_tags, store=store, clock=clock)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store's connections (the session belongs to the caller)."""
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> Resolver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public ---------------------------------------------------------------------------

    def mirrored(self, reference: Reference) -> Reference:
        """``reference`` on its ``--registry-proxies`` mirror (the first matching rule), else itself."""
        for proxy in self.settings.registry_proxies:
            if host_glob_matches(proxy.pattern, reference.registry):
                repository = reference.repository
                if proxy.mirror_prefix:
                    repository = f"{proxy.mirror_prefix}/{repository}"
                return Reference(proxy.mirror_host, repository, reference.tag, reference.digest)
        return reference

    def resolve(self, reference: Reference | str, *, deadline: Deadline, keychain: Keychain | None = None) -> ImageInfo:
        """The digest, media type and platforms of ``reference``; raises :class:`NoeError`."""
        ref = parse_reference(reference) if isinstance(reference, str) else reference
        target = self.mirrored(ref)
        credentials = self._credentials(target, keychain, deadline)
        fingerprint = tuple(c.identity for c in credentials)
        key = (target.context, target.identifier, fingerprint)
        failure = self._negative.get(key)
        if failure is not None:
            self._observer.cache_hit("negative")
            # The same object is raised on every hit: without a fresh traceback each raise would
            # append this caller's frames to it, and keep them alive as long as the entry.
            raise failure.with_traceback(None)
        remembered = self._stored_failure(target, credentials)
        if remembered is not None:
            raise remembered
        info, shared = self._flight.do(
            key, lambda: self._resolve_fresh(ref, target, credentials, key, deadline), deadline
        )
        if shared:
            self._observer.coalesced("image")
        return info if info.reference == ref else ImageInfo(ref, info.digest, info.media_type, info.platforms)

    def cached(self, reference: str, *, keychain: Keychain | None = None) -> ImageInfo | None:
        """The answer for ``reference`` from memory when it is fresh and this request may see it, else ``None``.

        Lets a caller answer warm images on its own thread instead of handing
        each to a lookup thread. A reference that cannot be parsed, a stale tag,
        an unknown digest, or an image that needed credentials none of this
        request's (``keychain`` and the node's) were seen reading, is ``None``:
        left to :meth:`resolve`, which verifies or reports it.
        """
        try:
            ref = parse_reference(reference)
        except NoeError:
            return None
        target = self.mirrored(ref)
        if target.digest is not None:
            digest: str | None = target.digest
            kind = "digest"
        else:
            assert target.tag is not None
            entry = self._tags.get_entry((target.context, target.tag))
            digest = entry.value if entry is not None and entry.fresh(self._clock()) else None
            kind = "tag"
        content = self._content.get((target.context, digest)) if digest is not None else None
        if digest is None or content is None:
            return None
        if not self.access.is_public(target.context):
            credentials = self._credentials(target, keychain, Deadline.never())
            if not self.access.allows(target.context, credentials, disk=False):
                return None
        self._observer.cache_hit(kind)
        self._observer.cache_hit("memory")
        return ImageInfo(ref, digest, content.media_type, content.platforms)

    # -- internals ------------------------------------------------------------------------

    def _credentials(self, target: Reference, keychain: Keychain | None, deadline: Deadline) -> tuple[Credential, ...]:
        found: list[Credential] = []
        for chain in (keychain, self._keychain):
            if chain is not None:
                found.extend(chain.resolve(target, timeout=deadline.remaining()))
        return unique(found)

    def _credentials_key(self, credentials: Sequence[Credential]) -> str:
        return ",".join(self.access.fingerprint(c) for c in credentials)

    def _stored_failure(self, target: Reference, credentials: Sequence[Credential]) -> RegistryError | None:
        """The failure a worker remembered on disk for this image and these credentials, if any."""
        if self.store is None:
            return None
        stored = self.store.failure(target.context, target.identifier, self._credentials_key(credentials))
        if stored is None:
            return None
        self._observer.cache_hit("negative")
        kind = AuthError if stored.status in (401, 403) else RegistryError
        return kind(stored.message, registry=target.api_host, status=stored.status)

    @contextlib.contextmanager
    def _across_workers(self, target: Reference, deadline: Deadline) -> Iterator[None]:
        """Hold the cross-process lock of ``target`` while it is fetched (no-op without a store)."""
        if self.store is None:
            yield
            return
        with self.store.lock(
            f"{target.context}@{target.identifier}", deadline, on_wait=lambda: self._observer.coalesced("worker")
        ):
            yield

    def _content_get(self, context: str, digest: str) -> _Content | None:
        """Memory, then disk (copied into memory); ``None`` when neither has it."""
        content = self._content.get((context, digest))
        if content is not None:
            self._observer.cache_hit("memory")
            return content
        self._observer.cache_miss("memory")
        if self.store is None:
            return None
        row = self.store.content(context, digest)
        if row is None:
            self._observer.cache_miss("disk")
            return None
        try:
            content = _Content.from_stored(*row)
        except (ValueError, TypeError):
            log.warning("registry cache: unreadable entry for %s@%s ignored", context, digest)
            return None
        self._observer.cache_hit("disk")
        self._content.set((context, digest), content)
        return content

    def _content_put(self, context: str, digest: str, content: _Content) -> None:
        self._content.set((context, digest), content)
        if self.store is not None:
            self.store.put_content(context, digest, content.media_type, content.platforms_json())

    def _tag_entry(self, context: str, tag: str) -> Entry[str] | None:
        """The tag's digest and freshness: memory, then disk (its age applied to ``--cache-ttl``)."""
        entry = self._tags.get_entry((context, tag))
        if entry is not None or self.store is None:
            return entry
        stored = self.store.tag(context, tag)
        if stored is None:
            return None
        left = max(0.0, self.settings.cache_ttl - (time.time() - stored.fetched))
        self._tags.set((context, tag), stored.digest, left)
        return self._tags.get_entry((context, tag))

    def _tag_put(self, context: str, tag: str, digest: str, ttl: float, *, fetched: bool) -> None:
        """Remember ``tag`` → ``digest`` for ``ttl``; ``fetched``: the registry just confirmed it (to disk)."""
        self._tags.set((context, tag), digest, ttl)
        if fetched and self.store is not None:
            self.store.put_tag(context, tag, digest)

    def _may_see(
        self, target: Reference, identifier: str, credentials: Sequence[Credential], deadline: Deadline
    ) -> str | None:
        """Whether this request may be given the cached answer for ``identifier``.

        ``None`` when a grant covers it, else the digest one ``HEAD`` with its
        credentials reports (the grant is recorded). Raises the registry's
        refusal (``AuthError``) or ``status_error`` for anything but 200.
        """
        if self.access.allows(target.context, credentials):
            return None
        self._observer.cache_miss("access")
        result, candidate = self.transport.fetch_as(
            "HEAD",
            target,
            f"manifests/{identifier}",
            deadline=deadline,
            credentials=credentials,
            accept=ACCEPT_MANIFESTS,
        )
        if result.status != 200:
            raise status_error(result, target, "manifest")
        self.access.record(target.context, candidate.credential)
        return result.header("docker-content-digest") or identifier

    def _resolve_fresh(
        self,
        ref: Reference,
        target: Reference,
        credentials: Sequence[Credential],
        key: tuple[str, str, tuple[str, ...]],
        deadline: Deadline,
    ) -> ImageInfo:
        remembered: RegistryError | None = None
        try:
            with self._across_workers(target, deadline):
                # The worker this one waited for may have failed: its failure is on disk now.
                remembered = self._stored_failure(target, credentials)
                if remembered is not None:
                    raise remembered
                if target.digest is not None:
                    digest = target.digest
                    content = self._by_digest(target, digest, credentials, deadline)
                else:
                    digest, content = self._by_tag(target, credentials, deadline)
        except _NEVER_CACHED:
            raise
        except NoeError as exc:
            if self.settings.negative_cache_ttl > 0 and exc is not remembered:
                self._negative.set(key, exc, self.settings.negative_cache_ttl)
                if self.store is not None and not (isinstance(exc, RegistryError) and exc.temporary):
                    self.store.put_failure(
                        target.context,
                        target.identifier,
                        self._credentials_key(credentials),
                        message=str(exc),
                        status=getattr(exc, "status", None),
                        ttl=self.settings.negative_cache_ttl,
                    )
            raise
        return ImageInfo(ref, digest, content.media_type, content.platforms)

    def _by_digest(
        self, target: Reference, digest: str, credentials: Sequence[Credential], deadline: Deadline
    ) -> _Content:
        cached = self._content_get(target.context, digest)
        if cached is not None:
            self._may_see(target, digest, credentials, deadline)
            self._observer.cache_hit("digest")
            return cached
        self._observer.cache_miss("digest")
        result = self._get_manifest(target, digest, credentials, deadline)
        self._verify(result.body, digest, target, "manifest")
        return self._describe(target, digest, result, credentials, deadline)

    def _by_tag(self, target: Reference, credentials: Sequence[Credential], deadline: Deadline) -> tuple[str, _Content]:
        assert target.tag is not None
        entry = self._tag_entry(target.context, target.tag)
        now = self._clock()
        if entry is not None:
            content = self._content_get(target.context, entry.value)
            if content is not None and entry.fresh(now) and self.access.allows(target.context, credentials):
                self._observer.cache_hit("tag")
                return entry.value, content
            if content is not None:
                # Stale, or not yet seen read with these credentials: one HEAD settles both.
                moved = self._revalidate(target, entry.value, credentials, deadline)
                if moved is None:
                    self._observer.cache_hit("revalidated")
                    return entry.value, content
        self._observer.cache_miss("tag")
        result = self._get_manifest(target, target.tag, credentials, deadline)
        header = result.header("docker-content-digest")
        digest = sha256_digest(result.body)
        if header.startswith("sha256:") and header != digest:
            self._observer.error(target.api_host, "digest")
            raise DigestMismatch(
                f"registry {target.api_host} sent a manifest for {target} whose sha256 is {digest}, "
                f"not the {header} it announced: a proxy or the registry is corrupting content",
                registry=target.api_host,
            )
        cached = self._content_get(target.context, digest)
        if cached is not None:
            self._observer.cache_hit("digest")
            content = cached
        else:
            content = self._describe(target, digest, result, credentials, deadline)
        self._tag_put(target.context, target.tag, digest, self.settings.cache_ttl, fetched=True)
        return digest, content

    def _revalidate(
        self, target: Reference, digest: str, credentials: Sequence[Credential], deadline: Deadline
    ) -> str | None:
        """One HEAD; ``None`` when the tag still points at ``digest`` (the entry is refreshed).

        The HEAD is made with this request's credentials, so a 200 also grants
        them the cached answer. A stale answer is served through a temporary
        registry failure only to a request already allowed to see it.
        """
        assert target.tag is not None
        try:
            result, candidate = self.transport.fetch_as(
                "HEAD",
                target,
                f"manifests/{target.tag}",
                deadline=deadline,
                credentials=credentials,
                accept=ACCEPT_MANIFESTS,
            )
        except RegistryError as exc:
            if (
                exc.temporary
                and not isinstance(exc, DeadlineExceeded)
                and self.access.allows(target.context, credentials)
            ):
                log.warning("cannot re-validate %s, serving the cached digest: %s", target, exc)
                self._tag_put(target.context, target.tag, digest, self.settings.negative_cache_ttl, fetched=False)
                return None
            raise
        if result.status == 200:
            self.access.record(target.context, candidate.credential)
        if result.status == 200 and result.header("docker-content-digest") == digest:
            self._tag_put(target.context, target.tag, digest, self.settings.cache_ttl, fetched=True)
            return None
        if result.status >= 500 and self.access.allows(target.context, credentials):
            self._tag_put(target.context, target.tag, digest, self.settings.negative_cache_ttl, fetched=False)
            return None
        if result.status in (401, 403, 404):
            raise status_error(result, target, "manifest")
        return result.header("docker-content-digest") or "unknown"

    def _get_manifest(
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

    def _verify(self, body: bytes, digest: str, target: Reference, what: str) -> None:
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

    def _describe(
        self,
        target: Reference,
        digest: str,
        result: HTTPResult,
        credentials: Sequence[Credential],
        deadline: Deadline,
    ) -> _Content:
        manifest = parse_manifest(result.body, result.header("content-type") or None)
        if isinstance(manifest, ImageManifest):
            platform = self._config_platform(target, manifest, credentials, deadline)
            content = _Content(manifest.media_type, (ResolvedPlatform(platform, digest),))
        else:
            platforms = self._index_platforms(target, manifest, credentials, deadline, depth=0)
            content = _Content(manifest.media_type, platforms)
        self._content_put(target.context, digest, content)
        return content

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
        self._verify(result.body, config.digest, target, "config blob")
        return parse_config(result.body)

    def _index_platforms(
        self,
        target: Reference,
        index: Index,
        credentials: Sequence[Credential],
        deadline: Deadline,
        *,
        depth: int,
    ) -> tuple[ResolvedPlatform, ...]:
        if len(index.manifests) > self.settings.max_index_entries:
            raise ManifestError(
                f"the index of {target} lists {len(index.manifests)} entries, more than the "
                f"{self.settings.max_index_entries} noe reads"
            )
        found: list[ResolvedPlatform] = []
        for child in index.runnable():
            kind = MediaType.lookup(child.media_type)
            if kind is not None and kind.is_index:
                if depth >= 1:
                    log.info("ignoring an index nested more than one level deep in %s", target)
                    continue
                found.extend(self._nested(target, child, credentials, deadline))
                continue
            if self.settings.verify_platform_manifests and not self._exists(target, child, credentials, deadline):
                continue
            platform = child.platform
            if platform is None:
                platform = self._child_platform(target, child, credentials, deadline)
            found.append(ResolvedPlatform(platform, child.digest))
        if depth == 0 and not found:
            raise ManifestError(
                f"the index of {target} lists no runnable image the registry still has: every platform "
                "manifest is an attestation, unknown, or was deleted"
            )
        return tuple(found)

    def _nested(
        self, target: Reference, child: Descriptor, credentials: Sequence[Credential], deadline: Deadline
    ) -> tuple[ResolvedPlatform, ...]:
        nested = self._fetch_child(target, child, credentials, deadline, "nested index", missing_ok=True)
        if nested is None:
            return ()
        if not isinstance(nested, Index):
            # Listed as an index but is a single manifest: read it as one.
            platform = self._config_platform(target, nested, credentials, deadline)
            return (ResolvedPlatform(platform, child.digest),)
        return self._index_platforms(target, nested, credentials, deadline, depth=1)

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
        self._verify(result.body, child.digest, target, what)
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
        self, target: Reference, child: Descriptor, credentials: Sequence[Credential], deadline: Deadline
    ) -> Platform:
        """An index entry without ``platform``: read the child manifest and its config."""
        manifest = self._fetch_child(target, child, credentials, deadline, "platform manifest")
        if not isinstance(manifest, ImageManifest):
            raise ManifestError(f"entry {child.digest} of {target} has no platform and is not an image")
        return self._config_platform(target, manifest, credentials, deadline)


def resolve_platforms(
    image: str | Reference,
    *,
    settings: RegistrySettings | None = None,
    keychain: Keychain | None = None,
    timeout: float = 30.0,
) -> ImageInfo:
    """Resolve one image with a short-lived session: for scripts and one-off checks.

    Long-running callers should share one :class:`Resolver` (it caches and
    coalesces); this builds and closes its own.
    """
    chosen = settings if settings is not None else RegistrySettings()
    with make_session(chosen) as session, Resolver(session, settings=chosen, keychain=keychain) as resolver:
        return resolver.resolve(image, deadline=Deadline.after(timeout))
