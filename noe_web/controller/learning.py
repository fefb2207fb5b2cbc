"""Learning from exec format errors: the leader records each proof in the ConfigMap ``noe-learned-platforms``.

When the controller sees a container fail with ``exec format error`` on a node
of architecture A, the digest in its status's ``imageID`` is recorded as not
running on A (:func:`noe_core.image.learned.recorded`) in the ConfigMap of
noe's namespace (``--noe-namespace``). The write is a read-modify-write with
the resourceVersion read: when another writer got there first (409), the
ConfigMap is read again and the change made again, so no update is lost. Only
the leader writes; ``--dry-run`` writes nothing. The webhook watches the
ConfigMap (:mod:`noe_web.kube.learned_watch`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from noe_core.image.learned import CONFIGMAP, digest_of_image_id, recorded
from noe_web.controller.actions import Actions, NotLeader
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import Conflict, KubeError, NotFound

log = logging.getLogger("noe.controller.learning")

ATTEMPTS = 5


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Learning:
    """Records (digest, architecture, evidence) in ``noe-learned-platforms``, without lost updates."""

    def __init__(
        self, kube: KubeClient, actions: Actions, namespace: str, *, clock: Callable[[], str] = now_rfc3339
    ) -> None:
        self.kube, self.actions, self.namespace, self._clock = kube, actions, namespace, clock
        self.path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{CONFIGMAP}"
        self.conflicts = 0

    def record(self, image_id: str, architecture: str, evidence: str) -> bool:
        """Record that the image ``image_id`` names fails on ``architecture``; ``True`` when written."""
        digest = digest_of_image_id(image_id)
        if digest is None or not architecture:
            return False
        for _ in range(ATTEMPTS):
            try:
                current: dict[str, Any] | None = self.kube.call("GET", self.path)
            except NotFound:
                current = None
            except KubeError as exc:
                log.warning("%s not readable (%s): exec format error of %s not recorded", CONFIGMAP, exc, digest)
                return False
            data = current.get("data") if isinstance(current, dict) else None
            changed = recorded(data, digest, architecture, evidence, self._clock())
            if changed is None:
                return False  # known already
            version = str(current["metadata"]["resourceVersion"]) if isinstance(current, dict) else None
            try:
                written = self.actions.put_configmap(self.namespace, CONFIGMAP, changed, version)
            except Conflict:
                self.conflicts += 1
                continue  # another writer got there first: read again, change again
            except NotLeader:
                return False
            except KubeError as exc:
                log.warning("%s not written (%s): exec format error of %s not recorded", CONFIGMAP, exc, digest)
                return False
            if written is not None:
                log.warning(
                    "learned: image digest does not run on this architecture",
                    extra={
                        "fields": {
                            "event": "learned",
                            "digest": digest,
                            "architecture": architecture,
                            "evidence": evidence,
                        }
                    },
                )
            return written is not None
        log.warning("%s: %d conflicting writes in a row: %s not recorded this time", CONFIGMAP, ATTEMPTS, digest)
        return False
