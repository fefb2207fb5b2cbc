"""Every write the controller makes, in one place: only the leader writes, and ``--dry-run`` writes Events only.

An eviction goes through the Eviction API (``policy/v1``), never a DELETE, so
PodDisruptionBudgets are honoured: a 429 is reported as refused and retried
later by the caller. :class:`EvictionLimiter` allows at most one eviction per
(owner, image digest, node architecture) within ``--eviction-backoff``, so a bad
image cannot make the controller evict the replacement pods of one
ReplicaSet for ever. A pod patch is a JSON Patch whose first operation tests
``/metadata/resourceVersion``: the API answers a changed pod with 422 (failed
test) or 409 (stale version), both raised as :class:`PodChanged`.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from noe_web.controller.metrics import ControllerMetrics
from noe_web.events import EventRecorder, EventRequest, ObjectRef
from noe_web.kube import Conflict, Invalid, KubeClient, KubeError, NotFound, TooManyRequests

log = logging.getLogger("noe.controller")

EvictOutcome = Literal["evicted", "refused_by_budget", "gone", "backoff", "dry_run", "not_leader", "error"]
EvictionKey = tuple[str, str, str]
"""(owner kind/namespace/name, image digest, node architecture)."""


class PodChanged(Exception):
    """The pod changed since it was read (409 or 422 on the resourceVersion test): read it again."""


class NotLeader(Exception):
    """This process lost the Lease before the write."""


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


class EvictionLimiter:
    """Remembers evictions for ``backoff`` seconds; bounded, oldest forgotten first."""

    def __init__(self, backoff: float, clock: Callable[[], float] = time.monotonic, size: int = 100_000) -> None:
        self.backoff, self._clock, self._size = backoff, clock, size
        self._seen: collections.OrderedDict[EvictionKey, float] = collections.OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: EvictionKey) -> bool:
        """Take the key for one eviction (``False`` when it was taken within the backoff).

        Checking and taking are one step, so two workers examining two pods of
        the same owner at once cannot both evict.
        """
        now = self._clock()
        with self._lock:
            while self._seen and next(iter(self._seen.values())) + self.backoff <= now:
                self._seen.popitem(last=False)
            if key in self._seen:
                return False
            self._seen[key] = now
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return True

    def release(self, key: EvictionKey) -> None:
        """Give the key back: the eviction did not happen (refused by a budget, pod gone, API error)."""
        with self._lock:
            self._seen.pop(key, None)


@dataclass
class Actions:
    """The controller's writes, checked against leadership and ``--dry-run``."""

    kube: KubeClient
    events: EventRecorder
    metrics: ControllerMetrics
    limiter: EvictionLimiter
    is_leader: Callable[[], bool]
    dry_run: bool = False

    def event(self, target: ObjectRef, kind: str, reason: str, message: str) -> None:
        if not self.is_leader():
            return
        text = f"(dry run) {message}" if self.dry_run else message
        if self.events.record(EventRequest(target, kind, reason, text)):
            self.metrics.api_writes.labels("event").inc()
        log.info(
            "event",
            extra={
                "fields": {
                    "event": reason,
                    "type": kind,
                    "namespace": target.namespace,
                    "pod": target.name,
                    "message": text,
                }
            },
        )

    def evict(self, namespace: str, name: str, key: EvictionKey) -> EvictOutcome:
        if not self.is_leader():
            return "not_leader"
        if not self.limiter.claim(key):
            return "backoff"
        if self.dry_run:
            return "dry_run"
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self.metrics.api_writes.labels("evict").inc()
        try:
            self.kube.call("POST", pod_path(namespace, name) + "/eviction", body=body)
        except TooManyRequests:
            self.limiter.release(key)
            return "refused_by_budget"
        except NotFound:
            self.limiter.release(key)
            return "gone"
        except KubeError as exc:
            self.limiter.release(key)
            log.warning("evicting pod %s/%s failed (%s); trying again later", namespace, name, exc)
            return "error"
        return "evicted"

    def patch_pod(self, pod: dict[str, Any], operations: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Apply ``operations`` to ``pod`` as read; raises :class:`PodChanged` when it has changed since."""
        if not self.is_leader():
            raise NotLeader("lost the leader lease")
        meta = pod["metadata"]
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}, *operations]
        self.metrics.api_writes.labels("patch").inc()
        try:
            result: dict[str, Any] = self.kube.call(
                "PATCH",
                pod_path(meta["namespace"], meta["name"]),
                body=patch,
                content_type="application/json-patch+json",
            )
        except (Conflict, Invalid) as exc:
            raise PodChanged(str(exc)) from exc
        return result
