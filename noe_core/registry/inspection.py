"""From a pod's images to what the policy is told about each: static declarations first, then the registry.

Operators declare platforms for images whose registry metadata is missing or
wrong (``--image-platforms``); those answers win, and make the webhook and
``noe mutate --platforms`` work fully offline. Every other image is resolved
by the registry client, all in parallel, within the caller's deadline. An image
still unresolved when the deadline passes is abandoned (its lookup finishes in
the background and only warms the cache) and becomes a :class:`LookupFailure`,
which the policy handles like any image that cannot be inspected; answers that
did arrive in time are kept.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from noe_core.credentials.keychain import Keychain
from noe_core.deadline import Deadline
from noe_core.errors import NoeError
from noe_core.lookup import ImagePlatforms, Lookup, LookupFailure, Lookups
from noe_core.platforms_file import StaticPlatforms
from noe_core.registry.resolver import ImageInfo

_DEFAULT_PARALLELISM = 8


class PlatformResolver(Protocol):
    """What inspection needs of the registry client (``noe_core.registry.resolver.Resolver``)."""

    def resolve(self, reference: str, *, deadline: Deadline, keychain: Keychain | None = None) -> ImageInfo: ...


def lookup_from_info(info: ImageInfo) -> ImagePlatforms:
    """The policy's view of a resolved image: every platform entry, with the resolved digest."""
    return ImagePlatforms(tuple(entry.platform for entry in info.platforms), info.digest)


@dataclass(frozen=True)
class Inspection:
    """The lookups of one object's images, in the order asked, and where the answers came from."""

    lookups: dict[str, Lookup]
    declared: tuple[str, ...] = ()
    """Images answered by the static declarations."""
    timed_out: tuple[str, ...] = ()
    """Images whose registry lookup was abandoned at the deadline."""


@dataclass(frozen=True)
class ImageInspector:
    """Static platforms, then an optional registry resolver.

    Without a resolver (``noe mutate --platforms``) an image the static file
    does not list cannot be inspected, and nothing touches the network.
    ``executor`` runs the registry lookups in parallel (the webhook shares one
    bounded pool across admissions); without one, each call uses its own.
    ``share`` caps how many lookups one call has in the executor at a time, so
    a pod naming thousands of images on a slow registry takes only that part
    of a shared pool and other pods' lookups start at once; the rest of its
    images wait their turn in the calling thread, and those that never got one
    before the deadline time out without having used a lookup thread.
    """

    static: StaticPlatforms | None = None
    resolver: PlatformResolver | None = None
    executor: concurrent.futures.Executor | None = field(default=None, compare=False)
    share: int | None = None

    def inspect(self, images: Sequence[str], *, deadline: Deadline, keychain: Keychain | None = None) -> Inspection:
        """One lookup per image; an image that fails gives a :class:`LookupFailure`, never an exception."""
        found: dict[str, Lookup] = {}
        declared: list[str] = []
        remote: list[str] = []
        for image in dict.fromkeys(images):
            answer = self.static.get(image) if self.static is not None else None
            if answer is not None:
                found[image] = answer
                declared.append(image)
            else:
                remote.append(image)
        timed_out: tuple[str, ...] = ()
        if remote and self.resolver is None:
            source = f" in {self.static.source}" if self.static is not None else ""
            found.update((image, LookupFailure(f"no platforms declared for it{source}")) for image in remote)
        elif remote and self.resolver is not None:
            resolved, timed_out = self._resolve(self.resolver, remote, deadline=deadline, keychain=keychain)
            found.update(resolved)
        return Inspection({image: found[image] for image in images}, tuple(declared), timed_out)

    def _resolve(
        self,
        resolver: PlatformResolver,
        images: Sequence[str],
        *,
        deadline: Deadline,
        keychain: Keychain | None,
    ) -> tuple[dict[str, Lookup], tuple[str, ...]]:
        out: dict[str, Lookup] = {}
        cached = getattr(resolver, "cached", None)
        if callable(cached):
            # Warm images are answered here: a hand-off to a lookup thread costs more than the lookup.
            for image in images:
                info = cached(image, keychain=keychain)
                if info is not None:
                    out[image] = lookup_from_info(info)
            images = [image for image in images if image not in out]
            if not images:
                return out, ()

        def resolve_one(image: str) -> Lookup:
            try:
                return lookup_from_info(resolver.resolve(image, deadline=deadline, keychain=keychain))
            except NoeError as exc:
                if deadline.expired:
                    return _timed_out(deadline)
                return LookupFailure(str(exc), temporary=bool(getattr(exc, "temporary", False)))

        executor = self.executor
        own = executor is None
        if executor is None:
            executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(_DEFAULT_PARALLELISM, len(images)), thread_name_prefix="noe-inspect"
            )
        share = max(1, self.share) if self.share else len(images)
        waiting = iter(images)
        running: dict[concurrent.futures.Future[Lookup], str] = {}

        def start_next() -> None:
            image = next(waiting, None)
            if image is not None:
                # Each lookup runs in a copy of the caller's context, so per-request observers see it.
                running[executor.submit(contextvars.copy_context().run, resolve_one, image)] = image

        try:
            for _ in range(min(share, len(images))):
                start_next()
            while running and not deadline.expired:
                done, _ = concurrent.futures.wait(
                    running, timeout=deadline.wait_timeout(), return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    out[running.pop(future)] = future.result()
                    start_next()
            abandoned: list[str] = []
            for future, image in running.items():
                future.cancel()  # queued: never takes a thread; running: its exchange ends at the deadline
                abandoned.append(image)
            abandoned.extend(waiting)
            for image in abandoned:
                out[image] = _timed_out(deadline)
            return out, tuple(abandoned)
        finally:
            if own:
                executor.shutdown(wait=False, cancel_futures=True)

    def inspector(self, *, timeout: float | None = None) -> Callable[[Sequence[str]], Lookups]:
        """A one-argument callable for callers that handle one object at a time (``noe mutate``)."""

        def run(images: Sequence[str]) -> Lookups:
            deadline = Deadline.never() if timeout is None else Deadline.after(timeout)
            return self.inspect(images, deadline=deadline).lookups

        return run


def _timed_out(deadline: Deadline) -> LookupFailure:
    budget = f" after {deadline.budget:g}s" if deadline.budget != float("inf") else ""
    return LookupFailure(f"timed out{budget}", temporary=True)
