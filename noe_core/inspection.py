"""From a pod's images to what the policy is told about each: static declarations first, then the registry.

Operators declare platforms for images whose registry metadata is missing or
wrong (``--image-platforms``); those answers win, and make the webhook and
``noe mutate --platforms`` work fully offline. Everything else is resolved by
the registry client within the caller's deadline; an image still unresolved
when the deadline passes becomes a :class:`LookupFailure`, which the policy
handles like any image that cannot be inspected.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from noe_core.deadline import Deadline
from noe_core.errors import NoeError
from noe_core.keychain import Keychain
from noe_core.lookup import ImagePlatforms, Lookup, LookupFailure, Lookups
from noe_core.platforms_file import StaticPlatforms
from noe_core.resolver import ImageInfo


class PlatformResolver(Protocol):
    """What inspection needs of the registry client (``noe_core.resolver.Resolver``)."""

    def resolve_many(
        self, images: Sequence[str], *, deadline: Deadline, keychain: Keychain | None = None
    ) -> Mapping[str, ImageInfo | NoeError]: ...


def lookup_from_info(info: ImageInfo) -> ImagePlatforms:
    """The policy's view of a resolved image: every platform entry, with the resolved digest."""
    return ImagePlatforms(tuple(entry.platform for entry in info.platforms), info.digest)


@dataclass(frozen=True)
class ImageInspector:
    """Static platforms, then an optional registry resolver.

    Without a resolver (``noe mutate --platforms``) an image the static file
    does not list cannot be inspected, and nothing touches the network.
    """

    static: StaticPlatforms | None = None
    resolver: PlatformResolver | None = None

    def inspect(
        self, images: Sequence[str], *, deadline: Deadline, keychain: Keychain | None = None
    ) -> dict[str, Lookup]:
        """One lookup per image, in the order given; never raises for an image that fails."""
        found: dict[str, Lookup] = {}
        remaining: list[str] = []
        for image in images:
            declared = self.static.get(image) if self.static is not None else None
            if declared is not None:
                found[image] = declared
            elif image not in remaining:
                remaining.append(image)
        if remaining:
            found.update(self._resolve(remaining, deadline=deadline, keychain=keychain))
        return {image: found[image] for image in images}

    def _resolve(
        self, images: Sequence[str], *, deadline: Deadline, keychain: Keychain | None
    ) -> dict[str, Lookup]:
        if self.resolver is None:
            source = f" in {self.static.source}" if self.static is not None and self.static.source else ""
            return {image: LookupFailure(f"no platforms declared for it{source}") for image in images}
        results = _resolve_by_deadline(self.resolver, images, deadline=deadline, keychain=keychain)
        out: dict[str, Lookup] = {}
        for image in images:
            result = results.get(image)
            if isinstance(result, ImageInfo):
                out[image] = lookup_from_info(result)
            elif result is None:
                out[image] = LookupFailure("registry lookup did not finish before the admission deadline")
            else:
                out[image] = LookupFailure(str(result))
        return out

    def inspector(self, *, timeout: float | None = None) -> Callable[[Sequence[str]], Lookups]:
        """A one-argument callable for callers that handle one object at a time (``noe mutate``)."""

        def run(images: Sequence[str]) -> Lookups:
            deadline = Deadline.never() if timeout is None else Deadline.after(timeout)
            return self.inspect(images, deadline=deadline)

        return run


def _resolve_by_deadline(
    resolver: PlatformResolver,
    images: Sequence[str],
    *,
    deadline: Deadline,
    keychain: Keychain | None,
) -> Mapping[str, ImageInfo | NoeError]:
    """Ask the resolver, but stop waiting at the deadline even if it overruns.

    The resolver bounds its own requests by the deadline; this guard keeps the
    caller's promise (answer in time) even if a lookup misbehaves. An abandoned
    call finishes in the background and only warms the cache.
    """
    remaining = deadline.remaining()
    if remaining == float("inf"):
        return resolver.resolve_many(images, deadline=deadline, keychain=keychain)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="noe-inspect")
    try:
        future = pool.submit(resolver.resolve_many, images, deadline=deadline, keychain=keychain)
        try:
            return future.result(timeout=remaining)
        except concurrent.futures.TimeoutError:
            return {}
    finally:
        pool.shutdown(wait=False)
