"""Newer-tag hints for the rebuild plan: "upgrade to 1.2.0 to unlock arm64" instead of a rebuild.

For each image of the plan that is a ``name:tag`` whose tag is a version
(:mod:`noe_core.report.version_tags`), the repository's tags are listed once
(:func:`noe_core.registry.tags.list_tags`), the newer tags of the same shape
are taken lowest first, and at most :data:`MAX_CANDIDATES` of them are
inspected, in order, until one offers the target under rule 4. Nothing at all
is asked for an image pinned by digest or whose tag is no version.

Every request goes through the report's own lookup service and resolver — the
same mirrors, credentials (the node's and the pull secrets of the pods using the
image) and caches as the image lookups, so a newer tag some pod already runs
costs nothing — each walk and each inspection within ``--lookup-timeout``, and
``--concurrency`` images at a time. A hint that cannot be found (the registry
refuses the tag list, a candidate fails) is a note, never an error.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from noe_core import Deadline, LookupFailure, NoeError, PolicySettings
from noe_core.name.reference import Reference, parse_reference
from noe_core.placement.rules import image_architectures
from noe_core.registry.lookup_service import LookupService
from noe_core.report.plan import Upgrade, canonical_image
from noe_core.report.version_tags import newer_tags, parse_version

MAX_CANDIDATES = 5
"""Newer tags inspected per image at most, lowest first."""


@dataclass(frozen=True)
class Hints:
    """The upgrades found, by canonical image; how many tag lists were read; what went wrong."""

    upgrades: dict[str, Upgrade]
    walks: int = 0
    notes: tuple[str, ...] = ()


PullSecretNames = Mapping[str, Sequence[str]]
"""The names of ``imagePullSecrets``, by namespace."""


def hint_pull_secrets(pull_secrets: Mapping[str, PullSecretNames]) -> dict[str, dict[str, tuple[str, ...]]]:
    """The pull Secrets of the report's images (as the pods spell them) gathered per canonical image."""
    gathered: dict[str, dict[str, dict[str, None]]] = {}
    for image, spaces in pull_secrets.items():
        bucket = gathered.setdefault(canonical_image(image), {})
        for namespace, names in spaces.items():
            bucket.setdefault(namespace, {}).update(dict.fromkeys(names))
    return {image: {ns: tuple(names) for ns, names in spaces.items()} for image, spaces in gathered.items()}


def _versioned(image: str) -> Reference | None:
    """The reference when the image is ``name:tag`` with a version tag: the only ones worth a request."""
    try:
        ref = parse_reference(image)
    except NoeError:
        return None
    if ref.digest is not None or ref.tag is None or parse_version(ref.tag) is None:
        return None
    return ref


def find_upgrade(
    ref: Reference,
    target: str,
    *,
    service: LookupService,
    settings: PolicySettings,
    pull_secrets: PullSecretNames | None,
    timeout: float,
) -> Upgrade | None:
    """The lowest newer tag of ``ref`` among the first :data:`MAX_CANDIDATES` that offers ``target``."""
    from noe_core.registry.resolver import Resolver  # noqa: PLC0415
    from noe_core.registry.tags import list_tags  # noqa: PLC0415

    resolver = service.resolver
    assert isinstance(resolver, Resolver) and ref.tag is not None
    deadline = Deadline.after(timeout)
    keychain = service.read_pull_secrets(pull_secrets or {}, deadline=deadline).keychain
    listed = list_tags(resolver, ref, deadline=deadline, keychain=keychain)
    for tag in newer_tags(ref.tag, listed.tags)[:MAX_CANDIDATES]:
        candidate = str(Reference(ref.registry, ref.repository, tag))
        found = service.lookup([candidate], deadline=Deadline.after(timeout), pull_secrets=pull_secrets).lookups
        archs = image_architectures(candidate, found, settings)
        if not isinstance(archs, LookupFailure) and target in archs:
            return Upgrade(tag, candidate)
    return None


def upgrade_hints(
    images: Sequence[str],
    target: str,
    *,
    service: LookupService,
    settings: PolicySettings,
    pull_secrets: Mapping[str, PullSecretNames],
    timeout: float,
    concurrency: int,
) -> Hints:
    """Hints for ``images`` (canonical references), ``concurrency`` at a time; nothing without a registry."""
    from noe_core.registry.resolver import Resolver  # noqa: PLC0415

    if not isinstance(service.resolver, Resolver):
        return Hints({})
    wanted = [(image, ref) for image in images if (ref := _versioned(image)) is not None]
    if not wanted:
        return Hints({})
    upgrades: dict[str, Upgrade] = {}
    notes: list[str] = []

    def one(ref: Reference, image: str) -> Upgrade | None:
        return find_upgrade(
            ref, target, service=service, settings=settings, pull_secrets=pull_secrets.get(image), timeout=timeout
        )

    # Its own threads: each hint waits on the service's lookup pool, which must stay free for it.
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=min(concurrency, len(wanted)), thread_name_prefix="noe-hint"
    ) as pool:
        futures = {pool.submit(one, ref, image): image for image, ref in wanted}
        for future in concurrent.futures.as_completed(futures):
            image = futures[future]
            try:
                found = future.result()
            except NoeError as exc:
                notes.append(f"no newer-tag hint for {image}: {exc}")
                continue
            if found is not None:
                upgrades[image] = found
    return Hints(upgrades, len(wanted), tuple(sorted(notes)))
