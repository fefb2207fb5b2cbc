"""Every distinct image of the report looked up once, ``--concurrency`` at a time, with a progress bar.

Each image goes through the webhook's :class:`~noe_core.registry.lookup_service.LookupService`
and so follows its rule: ``--platforms`` answers first, and the pull Secrets of
the pods using an image (live cluster only) are read only when that image needs
the registry, each Secret once for the whole run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from noe_core import Deadline, Lookup, LookupFailure, StaticPlatforms
from noe_core.cli.flags import PLATFORMS, require
from noe_core.registry.lookup_service import Inspection, LookupService, PullSecretReader
from noe_core.report.pods import PodEntry

if TYPE_CHECKING:
    from noe_web.registry_cache import SharedCacheConfig

Progress = Callable[[int], None]
PullSecretNames = dict[str, tuple[str, ...]]
"""The names of ``imagePullSecrets``, by namespace."""


@dataclass(frozen=True)
class ImageAnswers:
    """Each image's answer, what was said about its pull Secrets, and how many registry lookups failed."""

    answers: dict[str, Lookup]
    notes: tuple[str, ...] = ()
    registry_lookups: int = 0
    registry_failures: int = 0
    sources: dict[str, str] = field(default_factory=dict)
    """Where each answer came from (``declared``, ``cache``, ``registry``)."""


def progress_bar(total: int, stream: TextIO) -> tuple[Progress, Callable[[], None]]:
    """tqdm on a terminal; nothing at all when standard error is piped or a file."""
    if total == 0 or not stream.isatty():
        return (lambda _n: None), (lambda: None)
    from tqdm import tqdm  # noqa: PLC0415

    bar = tqdm(total=total, file=stream, unit="image", desc="noe report: images", leave=False)

    def update(count: int) -> None:
        bar.update(count)

    return update, bar.close


def image_pull_secrets(pods: Iterable[PodEntry]) -> dict[str, PullSecretNames]:
    """Per image, the pull Secrets of every pod that uses it."""
    found: dict[str, dict[str, dict[str, None]]] = {}
    for pod in pods:
        for image in pod.images:
            names = found.setdefault(image, {}).setdefault(pod.namespace, {})
            names.update(dict.fromkeys(pod.pull_secrets))
    return {
        image: {namespace: tuple(names) for namespace, names in spaces.items() if names}
        for image, spaces in found.items()
    }


def lookup_each(
    images: Sequence[str],
    service: LookupService,
    *,
    pull_secrets: dict[str, PullSecretNames],
    timeout: float,
    concurrency: int,
    progress: Progress,
) -> ImageAnswers:
    """One lookup per image, ``concurrency`` at a time; each answer ticks ``progress``."""
    done: dict[str, Inspection] = {}

    def one(image: str) -> Inspection:
        return service.lookup([image], deadline=Deadline.after(timeout), pull_secrets=pull_secrets.get(image))

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="noe-report") as pool:
        futures = {pool.submit(one, image): image for image in images}
        for future in concurrent.futures.as_completed(futures):
            done[futures[future]] = future.result()
            progress(1)
    answers = {image: done[image].lookups[image] for image in images}
    sources = {image: done[image].sources.get(image, "registry") for image in images}
    notes = dict.fromkeys(note for image in images for note in done[image].warnings)
    remote = [image for image in images if not done[image].declared] if service.resolver is not None else []
    failed = sum(1 for image in remote if isinstance(answers[image], LookupFailure))
    return ImageAnswers(answers, tuple(notes), len(remote), failed, sources)


def report_service(
    ns: argparse.Namespace,
    pool: concurrent.futures.Executor,
    secrets: PullSecretReader | None,
    shared: SharedCacheConfig | None = None,
) -> LookupService:
    """``--platforms`` (offline: no registry, so no Secret read), else the registry with the pods' Secrets.

    With ``shared`` (``--cache-url``), what the webhook already looked up is read from its Redis first.
    """
    from noe_core import Resolver  # noqa: PLC0415
    from noe_core.cli.registry_options import node_keychain_from_args, registry_settings_from_args  # noqa: PLC0415
    from noe_core.registry.transport import make_session  # noqa: PLC0415

    # Registry flags are checked even with --platforms: a bad one is an error, never silently ignored.
    settings = registry_settings_from_args(ns)
    keychain = node_keychain_from_args(ns)
    platforms = require(ns, PLATFORMS)
    if platforms is not None:
        return LookupService(static=StaticPlatforms.load(platforms))
    from noe_web.registry_cache import open_shared, sized  # noqa: PLC0415

    settings = sized(settings, ns)
    resolver = Resolver(
        make_session(settings), settings=settings, keychain=keychain, shared=open_shared(shared, settings)
    )
    return LookupService(resolver=resolver, secrets=secrets, executor=pool)
