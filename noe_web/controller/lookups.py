"""A pod's image lookups for the controller, with the webhook's inspector and pull-secret reading.

Warm answers (``--image-platforms``, the resolver's fresh cache) cost no
request of any kind, so examining an unchanged cluster again reads nothing
from the API or the registries. Only when an image must be fetched are the
pod's ``imagePullSecrets`` read (through the API client's bounded Secret
cache) and the images resolved, within ``--lookup-timeout`` per attempt.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass

from noe_core.deadline import Deadline
from noe_core.lookup import Lookups
from noe_core.platforms_file import StaticPlatforms
from noe_core.registry.inspection import ImageInspector
from noe_core.registry.resolver import Resolver
from noe_web.kube import KubeClient
from noe_web.pull_secrets import pull_secret_keychain


@dataclass
class PodLookups:
    static: StaticPlatforms | None
    resolver: Resolver | None
    kube: KubeClient | None
    pool: concurrent.futures.ThreadPoolExecutor
    timeout: float = 10.0

    def __post_init__(self) -> None:
        self.inspector = ImageInspector(static=self.static, resolver=self.resolver, executor=self.pool)

    def _warm(self, image: str) -> bool:
        if self.static is not None and self.static.get(image) is not None:
            return True
        return self.resolver is not None and self.resolver.cached(image) is not None

    def lookups(
        self, images: Sequence[str], namespace: str, pull_secrets: Sequence[str], *, timeout: float | None = None
    ) -> tuple[Lookups, tuple[str, ...]]:
        """The lookups of ``images`` and warnings about how they were obtained (a Secret not read)."""
        warnings: list[str] = []
        keychain = None
        if pull_secrets and not all(self._warm(image) for image in images):
            keychain = pull_secret_keychain(self.kube, namespace, pull_secrets, pool=self.pool, warnings=warnings)
        deadline = Deadline.after(self.timeout if timeout is None else timeout)
        inspection = self.inspector.inspect(images, deadline=deadline, keychain=keychain)
        return inspection.lookups, tuple(warnings)
