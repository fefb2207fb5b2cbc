"""The ConfigMap ``noe-learned-platforms`` as the webhook reads it: watched, in every worker.

``noe controller`` records there each image digest an ``exec format error``
proved not to run on an architecture (:mod:`noe_web.controller.learning`).
This watch keeps the current entries (:class:`~noe_core.image.learned.LearnedPlatforms`)
that every admission applies to its lookups: the architecture is taken out of
the digest it concerns, with a warning. A deleted entry (or ConfigMap) undoes
it as soon as its watch event arrives. Only ConfigMaps of noe's namespace are
listed, and only this one is kept. They are read consistently (a few
objects; an entry the controller just wrote must not be missed by a worker
that starts now).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from noe_core.image.learned import CONFIGMAP, LearnedPlatforms, read_learned
from noe_web.kube.client import KubeClient
from noe_web.kube.informer import Informer, Key

log = logging.getLogger("noe.learned")

ABSENT_RETRY = 60.0


def slim_configmap(obj: dict[str, Any]) -> dict[str, Any]:
    """Name and namespace of every ConfigMap; the data of ours alone."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    kept: dict[str, Any] = {"metadata": {k: meta[k] for k in ("name", "namespace") if k in meta}}
    if meta.get("name") == CONFIGMAP and isinstance(obj.get("data"), dict):
        kept["data"] = obj["data"]
    return kept


class LearnedWatch:
    """The learned platforms of noe's namespace, kept current by list and watch."""

    def __init__(self, kube: KubeClient, namespace: str, *, watch_seconds: int = 300) -> None:
        self.namespace = namespace
        self._current = LearnedPlatforms()
        self.informer = Informer(
            kube,
            f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps",
            slim=slim_configmap,
            on_change=self._changed,
            watch_seconds=watch_seconds,
            absent_retry=ABSENT_RETRY,
            consistent=True,  # one namespace's ConfigMaps; what it says changes admissions: the newest
            streaming=True,
        )

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()

    def current(self) -> LearnedPlatforms:
        return self._current

    def _changed(self, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if key[1] != CONFIGMAP:
            return
        entries = read_learned(new.get("data")) if new is not None else {}
        self._current = LearnedPlatforms(entries)
        log.info(
            "learned platforms: %d image digest(s)",
            len(entries),
            extra={"fields": {"event": "learned_platforms", "digests": len(entries)}},
        )
