"""Every write the controller makes, in one place: only the leader writes, and ``--dry-run`` writes Events only.

An eviction goes through the Eviction API (``policy/v1``), never a DELETE, so
PodDisruptionBudgets are honoured: a 429 is reported as refused and retried
later by the caller. At most one eviction per (owner, image digest, node
architecture) is sent within ``--eviction-backoff``, so a bad image cannot make
the controller evict the replacement pods of one ReplicaSet for ever: this
process's :class:`EvictionLimiter` settles it between its own workers, and the
cluster's :class:`~.eviction_record.EvictionRecord` between leaders (the
back-off survives a failover). A pod patch is a JSON Patch whose first operation tests
``/metadata/resourceVersion``: the API answers a changed pod with 422 (failed
test) or 409 (stale version), both raised as :class:`PodChanged`. A
PolicyReport (``--policy-reports``) is created, or replaced at the
resourceVersion it was read at (409 when someone changed it meanwhile). A
placement policy's status (``observedGeneration``, the ``Accepted`` condition)
is a merge patch of its status subresource, which leaves the rest of the
status (a rollout's progress) as it is.
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

from noe_web.controller.eviction_record import EvictionKey, EvictionRecord, RecordUnavailable
from noe_web.controller.metrics import ControllerMetrics
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import Conflict, Invalid, KubeError, NotFound, TooManyRequests
from noe_web.kube.events import EventRecorder, EventRequest, ObjectRef

log = logging.getLogger("noe.controller")

EvictOutcome = Literal["evicted", "refused_by_budget", "gone", "backoff", "dry_run", "not_leader", "error"]


class PodChanged(Exception):
    """The pod changed since it was read (409 or 422 on the resourceVersion test): read it again."""


class NotLeader(Exception):
    """This process lost the Lease before the write."""


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def policy_status_path(plural: str, namespace: str, name: str) -> str:
    """The status subresource of a placement policy (``namespace`` empty for the cluster kind)."""
    where = f"namespaces/{quote(namespace, safe='')}/" if namespace else ""
    return f"/apis/arch.noe.adevinta.com/v1alpha1/{where}{plural}/{quote(name, safe='')}/status"


def policy_reports_path(namespace: str, name: str = "") -> str:
    """The PolicyReports of ``namespace`` (``name``: one of them)."""
    path = f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{quote(namespace, safe='')}/policyreports"
    return f"{path}/{quote(name, safe='')}" if name else path


class EvictionLimiter:
    """This process's evictions, each remembered until its back-off ends; bounded, oldest forgotten first.

    The cheap first check, taken under a lock, so two workers examining two pods of the same owner at
    once cannot both evict; the cluster's record (:class:`~.eviction_record.EvictionRecord`) is the one
    every leader reads.
    """

    def __init__(self, backoff: float, clock: Callable[[], float] = time.monotonic, size: int = 100_000) -> None:
        self.backoff, self._clock, self._size = backoff, clock, size
        self._until: collections.OrderedDict[EvictionKey, float] = collections.OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: EvictionKey) -> bool:
        """Take the key for one eviction (``False`` while an earlier one's back-off lasts)."""
        now = self._clock()
        with self._lock:
            while self._until and next(iter(self._until.values())) <= now:
                self._until.popitem(last=False)
            until = self._until.get(key)
            if until is not None and until > now:
                return False
            self._remember(key, now + self.backoff)
            return True

    def hold(self, key: EvictionKey, seconds: float) -> None:
        """Keep ``key`` taken for ``seconds`` (what is left of a back-off another leader started)."""
        with self._lock:
            self._remember(key, self._clock() + seconds)

    def remaining(self, key: EvictionKey) -> float:
        """Seconds until ``key`` may be taken again (0 when it may now)."""
        with self._lock:
            until = self._until.get(key)
        return max(0.0, until - self._clock()) if until is not None else 0.0

    def release(self, key: EvictionKey) -> None:
        """Give the key back: the eviction did not happen (refused by a budget, pod gone, API error)."""
        with self._lock:
            self._until.pop(key, None)

    def _remember(self, key: EvictionKey, until: float) -> None:
        self._until.pop(key, None)
        self._until[key] = until
        while len(self._until) > self._size:
            self._until.popitem(last=False)


@dataclass
class Actions:
    """The controller's writes, checked against leadership and ``--dry-run``."""

    kube: KubeClient
    events: EventRecorder
    metrics: ControllerMetrics
    limiter: EvictionLimiter
    is_leader: Callable[[], bool]
    dry_run: bool = False
    record: EvictionRecord | None = None
    """The back-off every leader reads (``None``: this process's memory alone, as in unit tests)."""

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
        """Evict the pod unless ``key`` was evicted within the back-off (by this leader or an earlier one).

        The caller never passes a terminating pod (``metadata.deletionTimestamp`` set): evicting it again
        is pointless, and after a failover it is exactly what the new leader would otherwise do.
        """
        if not self.is_leader():
            return "not_leader"
        if not self.limiter.claim(key):
            return "backoff"
        if self.dry_run:
            return "dry_run"
        if self.record is not None:
            try:
                left = self.record.claim(key, f"{namespace}/{name}")
            except RecordUnavailable as exc:
                self.limiter.release(key)
                log.warning("pod %s/%s not evicted: the eviction back-off is unknown (%s)", namespace, name, exc)
                return "error"
            if left is not None:
                self.limiter.hold(key, left)
                return "backoff"
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self.metrics.api_writes.labels("evict").inc()
        try:
            self.kube.call("POST", pod_path(namespace, name) + "/eviction", body=body)
        except TooManyRequests:
            self._release(key)
            return "refused_by_budget"
        except NotFound:
            self._release(key)
            return "gone"
        except KubeError as exc:
            self._release(key)
            log.warning("evicting pod %s/%s failed (%s); trying again later", namespace, name, exc)
            return "error"
        return "evicted"

    def backoff_left(self, key: EvictionKey) -> float:
        """Seconds until ``key`` may be evicted again (when to look at a pod left alone for its back-off)."""
        return self.limiter.remaining(key)

    def _release(self, key: EvictionKey) -> None:
        self.limiter.release(key)
        if self.record is not None:
            self.record.release(key)

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

    def put_policy_report(self, doc: dict[str, Any], resource_version: str | None) -> dict[str, Any] | None:
        """Create ``doc`` (``resource_version`` ``None``) or replace the report read at that version.

        Returns the stored object; ``None`` on a dry run (nothing written). Raises :class:`NotLeader`,
        :class:`Conflict` when the report changed since it was read, :class:`KubeError` otherwise.
        """
        if not self.is_leader():
            raise NotLeader("lost the leader lease")
        meta = doc["metadata"]
        if self.dry_run:
            log.info(
                "policy report (dry run: not written)",
                extra={"fields": {"event": "policy_report", "namespace": meta["namespace"], "name": meta["name"]}},
            )
            return None
        self.metrics.api_writes.labels("policyreport").inc()
        if resource_version is None:
            result: dict[str, Any] = self.kube.call("POST", policy_reports_path(meta["namespace"]), body=doc)
        else:
            body = {**doc, "metadata": {**meta, "resourceVersion": resource_version}}
            result = self.kube.call("PUT", policy_reports_path(meta["namespace"], meta["name"]), body=body)
        return result

    def policy_status(self, plural: str, namespace: str, name: str, status: dict[str, Any]) -> bool:
        """Write a placement policy's ``status`` (merge patch of the status subresource); ``False`` on a dry run.

        Raises :class:`NotLeader`, :class:`NotFound` (deleted meanwhile) or :class:`KubeError`.
        """
        if not self.is_leader():
            raise NotLeader("lost the leader lease")
        if self.dry_run:
            log.info(
                "placement policy status (dry run: not written)",
                extra={"fields": {"event": "policy_status", "policy": f"{plural}/{namespace}/{name}"}},
            )
            return False
        self.metrics.api_writes.labels("status").inc()
        self.kube.call(
            "PATCH",
            policy_status_path(plural, namespace, name),
            body={"status": status},
            content_type="application/merge-patch+json",
        )
        return True

    def put_configmap(
        self, namespace: str, name: str, data: dict[str, str], resource_version: str | None
    ) -> dict[str, Any] | None:
        """Create the ConfigMap (``resource_version`` ``None``) or replace the one read at that version.

        Returns the stored object; ``None`` on a dry run. Raises :class:`NotLeader`, :class:`Conflict`
        (changed since it was read, or created meanwhile) or :class:`KubeError`.
        """
        if not self.is_leader():
            raise NotLeader("lost the leader lease")
        if self.dry_run:
            log.info(
                "configmap (dry run: not written)",
                extra={"fields": {"event": "configmap", "namespace": namespace, "name": name}},
            )
            return None
        self.metrics.api_writes.labels("configmap").inc()
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        doc: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
        if resource_version is None:
            meta["labels"] = {"app.kubernetes.io/name": "noe", "app.kubernetes.io/component": "controller"}
            result: dict[str, Any] = self.kube.call("POST", path, body=doc)
        else:
            meta["resourceVersion"] = resource_version
            result = self.kube.call("PUT", f"{path}/{quote(name, safe='')}", body=doc)
        return result
