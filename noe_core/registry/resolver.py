"""Image reference → :class:`~noe_core.image.image_platforms.ImagePlatforms`, cheaply and within a deadline.

:class:`Resolver` follows the distribution-spec v2 flow, per image:

* **by tag** — ``GET /v2/<name>/manifests/<tag>`` with ``Accept`` listing the
  four manifest media types; the digest is ``Docker-Content-Digest`` (checked
  against the body when present) or the sha256 of the body;
* **by digest** (``name@sha256:…`` and ``name:tag@sha256:…``, where the digest
  wins) — the same GET, and the body's sha256 must equal the digest
  (:class:`~noe_core.errors.DigestMismatch` otherwise, never cached);
* then the manifest walk (:mod:`noe_core.registry.manifest_walk`): config blob
  of a single manifest, runnable entries of an index.

The answer is the shape the policy reads (:class:`~noe_core.image.image_platforms.ImagePlatforms`:
platforms, digest, media type, each platform's manifest digest), the same value
for every request that gets it from the cache. Caches
(:mod:`noe_core.registry.cache.layers`, memory in front of the node's shared
store and the replicas' Redis when there are):

* digest → platforms: content-addressed, immutable, no TTL;
* tag → digest: ``cache_ttl``. When it expires, one ``HEAD`` re-validates the
  tag; if the digest did not move the digest entry is reused (HEADs do not
  count against Docker Hub's pull limit). If the registry fails during
  re-validation, the stale answer is served for ``negative_cache_ttl``;
* failures: ``negative_cache_ttl``, so a failing registry is not hammered
  (digest mismatches and the caller's own deadline are not cached).

A cached answer is given only to a request allowed to see it
(:mod:`noe_core.registry.access`): images read anonymously are shared; others
need one of the request's credentials to have been seen reading the
repository, else one ``HEAD`` with them verifies it first.

Concurrent lookups of the same image (and the same credentials) share one
in-flight resolution; with a store, workers share it too (a lock per key
stripe, waited for within the deadline), and with Redis, replicas (a lock
with a token that expires with its holder's deadline). ``--registry-proxies`` mirrors are applied to the
registry host before anything else, so credentials are looked up for, and
tokens sent to, the mirror.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import requests

from noe_core.credentials.keychain import Credential, Keychain, unique
from noe_core.errors import DeadlineExceeded, DigestMismatch, NoeError, RegistryError
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.manifest import ACCEPT_MANIFESTS, sha256_digest
from noe_core.name.hostmatch import host_glob_matches
from noe_core.name.reference import Reference, parse_reference
from noe_core.registry.access import AccessGrants
from noe_core.registry.cache.layers import FailureKey, LayeredCache, SharedLevel
from noe_core.registry.manifest_walk import ManifestWalk
from noe_core.registry.observer import NullObserver, RegistryObserver
from noe_core.registry.sender import make_session, status_error
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.tracer import NULL_TRACER, Span, Tracer
from noe_core.registry.transport import Transport
from noe_core.util.deadline import Clock, Deadline
from noe_core.util.lru import SingleFlight

log = logging.getLogger(__name__)

ImageInfo = ImagePlatforms
"""What :meth:`Resolver.resolve` answered before lookups had one shape; kept so the name still imports."""

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
        tracer: Tracer = NULL_TRACER,
        clock: Clock = time.monotonic,
        store: SharedLevel | None = None,
        shared: SharedLevel | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self._keychain = keychain
        self._observer: RegistryObserver = observer if observer is not None else NullObserver()
        self._clock = clock
        self._tracer = tracer
        self.transport = Transport(session, settings=settings, observer=self._observer, tracer=tracer, clock=clock)
        self.caches = LayeredCache(settings, observer=self._observer, clock=clock, store=store, shared=shared)
        self._flight: SingleFlight[FailureKey, ImagePlatforms] = SingleFlight()
        self.access = AccessGrants(
            ttl=settings.cache_ttl, maxsize=settings.max_cached_tags, levels=self.caches.levels, clock=clock
        )
        self.walk = ManifestWalk(self.transport, settings=settings, observer=self._observer, access=self.access)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the shared levels' connections (the session belongs to the caller)."""
        self.caches.close()

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

    def credentials(
        self, target: Reference, *, deadline: Deadline, keychain: Keychain | None = None
    ) -> tuple[Credential, ...]:
        """What a request for ``target`` (already :meth:`mirrored`) presents: ``keychain``'s, then the node's.

        For registry calls beside image resolution (:mod:`noe_core.registry.tags`), so they ask with the
        very credentials a lookup of the same image would.
        """
        return self._credentials(target, keychain, deadline)

    def resolve(
        self, reference: Reference | str, *, deadline: Deadline, keychain: Keychain | None = None
    ) -> ImagePlatforms:
        """The platforms, digest and media type of ``reference``; raises :class:`NoeError`.

        One ``image lookup`` span (the image, its registry, digest and platforms, and whether it
        waited for the same lookup in flight) around the registry's exchanges.
        """
        with self._tracer.span("image lookup", {"noe.image": str(reference)}) as span:
            found = self._resolve(reference, deadline, keychain, span)
            span.set("noe.image.digest", found.digest)
            span.set("noe.image.platforms", ",".join(str(p) for p in found.platforms))
            return found

    def _resolve(
        self, reference: Reference | str, deadline: Deadline, keychain: Keychain | None, span: Span
    ) -> ImagePlatforms:
        ref = parse_reference(reference) if isinstance(reference, str) else reference
        target = self.mirrored(ref)
        span.set("noe.registry", target.api_host)
        credentials = self._credentials(target, keychain, deadline)
        key: FailureKey = (target.context, target.identifier, tuple(c.identity for c in credentials))
        failure = self.caches.failure(key)
        if failure is not None:
            self._observer.cache_hit("negative")
            # The same object is raised on every hit: without a fresh traceback each raise would
            # append this caller's frames to it, and keep them alive as long as the entry.
            raise failure.with_traceback(None)
        remembered = self.caches.stored_failure(key, self._credentials_key(credentials), target.api_host)
        if remembered is not None:
            raise remembered
        found, shared = self._flight.do(key, lambda: self._resolve_fresh(target, credentials, key, deadline), deadline)
        if shared:
            self._observer.coalesced("image")
            span.set("noe.lookup.coalesced", True)
        return found

    def cached(self, reference: str, *, keychain: Keychain | None = None) -> ImagePlatforms | None:
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
            digest = self.caches.fresh_tag(target.context, target.tag)
            kind = "tag"
        found = self.caches.memory_content(target.context, digest) if digest is not None else None
        if found is None:
            return None
        if not self.access.is_public(target.context):
            credentials = self._credentials(target, keychain, Deadline.never())
            if not self.access.allows(target.context, credentials, disk=False):
                return None
        self._observer.cache_hit(kind)
        self._observer.cache_hit("memory")
        return found

    # -- internals ------------------------------------------------------------------------

    def _credentials(self, target: Reference, keychain: Keychain | None, deadline: Deadline) -> tuple[Credential, ...]:
        found: list[Credential] = []
        for chain in (keychain, self._keychain):
            if chain is not None:
                found.extend(chain.resolve(target, timeout=deadline.remaining()))
        return unique(found)

    def _credentials_key(self, credentials: Sequence[Credential]) -> str:
        return ",".join(self.access.fingerprint(c) for c in credentials)

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
        self, target: Reference, credentials: Sequence[Credential], key: FailureKey, deadline: Deadline
    ) -> ImagePlatforms:
        credentials_key = self._credentials_key(credentials)
        lock = f"{target.context}@{target.identifier}"
        with self.caches.across_workers(lock, deadline, on_wait=self._observer.coalesced):
            # The worker (or replica) this one waited for may have failed: its failure is stored now.
            remembered = self.caches.stored_failure(key, credentials_key, target.api_host)
            if remembered is not None:
                raise remembered
            try:
                if target.digest is not None:
                    return self._by_digest(target, target.digest, credentials, deadline)
                return self._by_tag(target, credentials, deadline)
            except _NEVER_CACHED:
                raise
            except NoeError as exc:
                # Stored while the lock is held: the worker waiting for it must find this failure,
                # not a free lock and an empty cache (that would be a second request to the registry).
                self.caches.put_failure(key, credentials_key, exc)
                raise

    def _by_digest(
        self, target: Reference, digest: str, credentials: Sequence[Credential], deadline: Deadline
    ) -> ImagePlatforms:
        cached = self.caches.content(target.context, digest)
        if cached is not None:
            self._may_see(target, digest, credentials, deadline)
            self._observer.cache_hit("digest")
            return cached
        self._observer.cache_miss("digest")
        result = self.walk.fetch_manifest(target, digest, credentials, deadline)
        self.walk.verify(result.body, digest, target, "manifest")
        found = self.walk.describe(target, digest, result, credentials, deadline)
        self.caches.put_content(target.context, digest, found)
        return found

    def _by_tag(self, target: Reference, credentials: Sequence[Credential], deadline: Deadline) -> ImagePlatforms:
        assert target.tag is not None
        entry = self.caches.tag_entry(target.context, target.tag)
        now = self._clock()
        if entry is not None:
            content = self.caches.content(target.context, entry.value)
            if content is not None and entry.fresh(now) and self.access.allows(target.context, credentials):
                self._observer.cache_hit("tag")
                return content
            if content is not None:
                # Stale, or not yet seen read with these credentials: one HEAD settles both.
                moved = self._revalidate(target, entry.value, credentials, deadline)
                if moved is None:
                    self._observer.cache_hit("revalidated")
                    return content
        self._observer.cache_miss("tag")
        result = self.walk.fetch_manifest(target, target.tag, credentials, deadline)
        header = result.header("docker-content-digest")
        digest = sha256_digest(result.body)
        if header.startswith("sha256:") and header != digest:
            self._observer.error(target.api_host, "digest")
            raise DigestMismatch(
                f"registry {target.api_host} sent a manifest for {target} whose sha256 is {digest}, "
                f"not the {header} it announced: a proxy or the registry is corrupting content",
                registry=target.api_host,
            )
        found = self.caches.content(target.context, digest)
        if found is not None:
            self._observer.cache_hit("digest")
        else:
            found = self.walk.describe(target, digest, result, credentials, deadline)
            self.caches.put_content(target.context, digest, found)
        self.caches.put_tag(target.context, target.tag, digest, self.settings.cache_ttl, fetched=True)
        return found

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
                self.caches.put_tag(target.context, target.tag, digest, self.settings.negative_cache_ttl, fetched=False)
                return None
            raise
        if result.status == 200:
            self.access.record(target.context, candidate.credential)
        if result.status == 200 and result.header("docker-content-digest") == digest:
            self.caches.put_tag(target.context, target.tag, digest, self.settings.cache_ttl, fetched=True)
            return None
        if result.status >= 500 and self.access.allows(target.context, credentials):
            self.caches.put_tag(target.context, target.tag, digest, self.settings.negative_cache_ttl, fetched=False)
            return None
        if result.status in (401, 403, 404):
            raise status_error(result, target, "manifest")
        return result.header("docker-content-digest") or "unknown"


def resolve_platforms(
    image: str | Reference,
    *,
    settings: RegistrySettings | None = None,
    keychain: Keychain | None = None,
    timeout: float = 30.0,
) -> ImagePlatforms:
    """Resolve one image with a short-lived session: for scripts and one-off checks.

    Long-running callers should share one :class:`Resolver` (it caches and
    coalesces); this builds and closes its own.
    """
    chosen = settings if settings is not None else RegistrySettings()
    with make_session(chosen) as session, Resolver(session, settings=chosen, keychain=keychain) as resolver:
        return resolver.resolve(image, deadline=Deadline.after(timeout))
