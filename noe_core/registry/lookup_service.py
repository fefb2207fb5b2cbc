"""A pod's images → their lookups, with one rule for when a registry is asked and when pull Secrets are read.

The webhook, ``noe controller``, ``noe report`` and ``noe mutate`` all ask
:class:`LookupService`, so they decide alike. The rule, in order:

1. **Declared platforms answer first** (``--image-platforms``, ``--platforms``):
   operators declare images whose registry metadata is missing or wrong; those
   answers win and cost nothing.
2. **What the cache may give this pod without its credentials needs nothing
   read**: ``Resolver.cached(image)`` with no keychain answers only when
   anonymous access or the node's credentials were seen reading the repository
   (KEP-2535), so a warm public image costs no request of any kind, and a warm
   private one is never handed to a pod on the strength of another pod's Secret.
3. **Only when some image still needs the registry are the pod's pull Secrets
   read**, through the injected :class:`PullSecretReader` (``noe mutate`` has
   none), never past the deadline: within the admission's share of it for the
   webhook (``secret_budget``), within the API client's own timeout for the
   controller and the report. A Secret that cannot be used is a warning, and
   the lookups go ahead without it.
4. **The rest are resolved in parallel within the deadline**: those the cache
   may give to the pod's credentials on the caller's thread, the others in the
   executor, at most ``share`` at a time so one pod naming thousands of images
   takes only its part of a shared pool. An image still unresolved when the
   deadline passes is abandoned (its lookup finishes in the background and only
   warms the cache) and becomes ``LookupFailure("timed out after Ns",
   temporary=True)``; answers that did arrive are kept.

Without a resolver an undeclared image is a :class:`LookupFailure` and nothing
touches the network. A failure of one image never fails the others, and an
unexpected error is logged and becomes a failure of the images it left
unanswered: a bug here must not fail an admission.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from noe_core.credentials.keychain import Keychain, MultiKeychain
from noe_core.errors import NoeError
from noe_core.image.declared import StaticPlatforms, layered
from noe_core.image.image_platforms import Declared, ImagePlatforms, Lookup, LookupFailure, LookupRequest, LookupResult
from noe_core.util.deadline import Deadline

log = logging.getLogger("noe.lookups")

_DEFAULT_PARALLELISM = 8


class PlatformResolver(Protocol):
    """What the service needs of the registry client (``noe_core.registry.resolver.Resolver``)."""

    def resolve(self, reference: str, *, deadline: Deadline, keychain: Keychain | None = None) -> ImagePlatforms: ...

    def cached(self, reference: str, *, keychain: Keychain | None = None) -> ImagePlatforms | None: ...


@dataclass(frozen=True)
class PullSecrets:
    """What reading some ``imagePullSecrets`` gave: one keychain (``None``: none usable) and what went wrong."""

    keychain: Keychain | None = None
    warnings: tuple[str, ...] = ()


class PullSecretReader(Protocol):
    """Reads the named ``imagePullSecrets`` of ``namespace`` (``noe_web.kube.pull_secrets`` implements it).

    ``budget`` bounds the wait in seconds (``None``: the reader's own timeout).
    Never raises for a Secret that is missing, forbidden, late or malformed: that
    is a warning naming it (never its content), and the lookups go on without it.
    """

    def read(self, namespace: str, names: Sequence[str], *, budget: float | None = None) -> PullSecrets: ...


@dataclass(frozen=True)
class Inspection:
    """The lookups of one pod's images, in the order asked, how they were obtained and where from."""

    lookups: dict[str, Lookup]
    warnings: tuple[str, ...] = ()
    """Problems with the pull Secrets (the lookups went ahead without them)."""
    declared: tuple[str, ...] = ()
    """Images answered by the declared platforms."""
    timed_out: tuple[str, ...] = ()
    """Images whose registry lookup was abandoned at the deadline."""
    cached: tuple[str, ...] = ()
    """Images the cache answered without a request (what this pod's credentials may be given)."""

    @property
    def sources(self) -> dict[str, str]:
        """Where each answer came from: ``declared``, ``cache`` or ``registry``."""
        declared, cached = set(self.declared), set(self.cached)
        return {
            image: "declared" if image in declared else "cache" if image in cached else "registry"
            for image in self.lookups
        }

    @property
    def result(self) -> LookupResult:
        """The answer the placement pipeline takes (:meth:`noe_core.pipeline.Prepared.decide`)."""
        return LookupResult(self.lookups, self.warnings, self.sources)


@dataclass(frozen=True)
class LookupService:
    """Declared platforms, the resolver's cache, pull Secrets, then the registry: the rule in the module docstring.

    ``executor`` runs the registry lookups in parallel (the webhook shares one
    bounded pool across admissions); without one, each call uses its own.
    ``share`` caps how many lookups one call has in the executor at a time;
    the rest of its images wait their turn in the calling thread, and those
    that never got one before the deadline time out without using a thread.
    """

    static: StaticPlatforms | None = None
    resolver: PlatformResolver | None = None
    secrets: PullSecretReader | None = None
    executor: concurrent.futures.Executor | None = field(default=None, compare=False)
    share: int | None = None

    def lookup(
        self,
        images: Sequence[str],
        *,
        deadline: Deadline,
        pull_secrets: Mapping[str, Sequence[str]] | None = None,
        secret_budget: float | None = None,
        declared_by_policies: Declared | None = None,
    ) -> Inspection:
        """One lookup per image; ``pull_secrets`` names the Secrets usable for them, by namespace.

        ``declared_by_policies`` (the pod's placement policies' ``imagePlatforms``) is consulted
        before the service's own declarations. An image that fails gives a :class:`LookupFailure`,
        never an exception.
        """
        found: dict[str, Lookup] = {}
        needed = self._declared(images, declared_by_policies, found)
        declared = list(found)
        warnings: tuple[str, ...] = ()
        timed_out: tuple[str, ...] = ()
        cached: tuple[str, ...] = ()
        resolver = self.resolver
        if needed and resolver is None:
            source = f" in {self.static.source}" if self.static is not None else ""
            found.update((image, LookupFailure(f"no platforms declared for it{source}")) for image in needed)
        elif needed and resolver is not None:
            try:
                asked = needed
                needed = self._warm(resolver, needed, None, found)
                if needed:
                    read = self.read_pull_secrets(pull_secrets or {}, deadline=deadline, budget=secret_budget)
                    warnings = read.warnings
                    if read.keychain is not None:
                        needed = self._warm(resolver, needed, read.keychain, found)
                cached = tuple(image for image in asked if image in found)
                if needed:
                    timed_out = self._resolve(resolver, needed, deadline, read.keychain, found)
            except Exception as exc:  # a bug in a lookup must not fail the admission
                log.exception("image lookups failed unexpectedly")
                failed = LookupFailure(f"internal error ({type(exc).__name__})")
                found.update((image, failed) for image in images if image not in found)
        return Inspection({image: found[image] for image in images}, warnings, tuple(declared), timed_out, cached)

    def _declared(self, images: Sequence[str], by_policies: Declared | None, found: dict[str, Lookup]) -> list[str]:
        """Rule 1: the declared answers into ``found``; the images left for the cache and the registry."""
        static = self.static if by_policies is None else layered(self.static, by_policies)
        needed: list[str] = []
        for image in dict.fromkeys(images):
            answer = static.get(image) if static is not None else None
            if answer is not None:
                found[image] = answer
            else:
                needed.append(image)
        return needed

    def answer(self, request: LookupRequest, known: Mapping[str, Lookup], sources: Mapping[str, str]) -> LookupResult:
        """The request's lookups from answers already obtained for every pod (``noe report``, PolicyReports):
        the pod's own declared platforms first (its placement policies' over the service's), as :meth:`lookup`
        gives them, else ``known`` (an image it lacks was not inspected)."""
        found: dict[str, Lookup] = {}
        needed = self._declared(request.images, request.declared, found)
        origin = dict.fromkeys(found, "declared")
        for image in needed:
            if image in known:
                found[image] = known[image]
                origin[image] = sources.get(image, "registry")
        return LookupResult({image: found[image] for image in request.images if image in found}, (), origin)

    def inspect(self, request: LookupRequest, *, deadline: Deadline, secret_budget: float | None = None) -> Inspection:
        """The lookups of one admission request: its images, with its namespace's pull Secrets."""
        secrets = {request.namespace: request.pull_secrets} if request.pull_secrets else None
        return self.lookup(
            request.images,
            deadline=deadline,
            pull_secrets=secrets,
            secret_budget=secret_budget,
            declared_by_policies=request.declared,
        )

    # ------------------------------------------------------------------------------------ the steps

    @staticmethod
    def _warm(
        resolver: PlatformResolver, images: list[str], keychain: Keychain | None, found: dict[str, Lookup]
    ) -> list[str]:
        """Answer on the caller's thread what the cache may give to ``keychain`` (and the node's); the rest."""
        left: list[str] = []
        for image in images:
            info = resolver.cached(image, keychain=keychain)
            if info is None:
                left.append(image)
            else:
                found[image] = info
        return left

    def read_pull_secrets(
        self, pull_secrets: Mapping[str, Sequence[str]], *, deadline: Deadline, budget: float | None = None
    ) -> PullSecrets:
        """The named Secrets (by namespace) as one keychain, within ``budget`` and never past ``deadline``.

        Public for registry calls beside lookups (``noe report``'s tag lists), so they present the very
        credentials a lookup of the same image would.
        """
        named = {namespace: names for namespace, names in pull_secrets.items() if names}
        if self.secrets is None or not named:
            return PullSecrets()
        bound = Deadline.after(budget) if budget is not None else deadline
        if deadline.at < bound.at:
            bound = deadline
        chains: list[Keychain] = []
        warnings: list[str] = []
        for namespace, names in named.items():
            read = self.secrets.read(namespace, names, budget=bound.wait_timeout())
            warnings.extend(read.warnings)
            if read.keychain is not None:
                chains.append(read.keychain)
        keychain = None if not chains else chains[0] if len(chains) == 1 else MultiKeychain(*chains)
        return PullSecrets(keychain, tuple(warnings))

    def _resolve(
        self,
        resolver: PlatformResolver,
        images: Sequence[str],
        deadline: Deadline,
        keychain: Keychain | None,
        out: dict[str, Lookup],
    ) -> tuple[str, ...]:
        """Resolve ``images`` into ``out`` in parallel within ``deadline``; the images abandoned at it."""
        if not images:
            return ()

        def resolve_one(image: str) -> Lookup:
            try:
                return resolver.resolve(image, deadline=deadline, keychain=keychain)
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
            return tuple(abandoned)
        finally:
            if own:
                executor.shutdown(wait=False, cancel_futures=True)


def _timed_out(deadline: Deadline) -> LookupFailure:
    budget = f" after {deadline.budget:g}s" if deadline.budget != float("inf") else ""
    return LookupFailure(f"timed out{budget}", temporary=True)
