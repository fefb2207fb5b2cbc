"""Finishing pods the webhook gated: place them as the webhook would have, then remove the gate.

A gated pod is read again in full, its images looked up without an admission
deadline (each attempt bounded by ``--lookup-timeout``, retried with backoff
while failures are temporary), and decided by the one placement pipeline
(:mod:`noe_core.pipeline`, stage ``gate``) with what the pod's placement
policies and the learned platforms say now (the policies' annotation is
brought up to date in the same patch). Its patch only adds what Kubernetes lets a gated
pod gain (node selector entries, requirements ANDed into each required term
or a first term, preferred terms, tolerations); the same JSON Patch removes
the gate, after testing the ``resourceVersion`` it was computed from. A pod
that changed meanwhile is read again and decided again.

Outcomes: placed (Normal ``ArchitecturePlaced``); no common architecture (the
gate stays, Warning ``NoCommonArchitecture`` with the deny message); lookups
still failing after ``--gate-timeout`` from the pod's creation (the gate is
removed without placement, Warning ``InspectionTimedOut``; with a fallback architecture, rule 13a,
the pod is required onto it when the inspected images allow it, Normal ``FallbackArchitecture``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import LookupFailure, Lookups
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.decider import Decider
from noe_core.placement.gate import SCHEDULING_GATE, gates_of, remove_gate_operation, temporary_failures
from noe_core.util.deadline import Deadline
from noe_web.controller.actions import Actions, NotLeader, PodChanged, pod_path
from noe_web.controller.metrics import ControllerMetrics
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import KubeError, NotFound
from noe_web.kube.events import NORMAL, REASON_FALLBACK, WARNING, fallback_message, object_ref

log = logging.getLogger("noe.controller.gates")

REASON_PLACED = "ArchitecturePlaced"
REASON_NO_COMMON = "NoCommonArchitecture"
REASON_TIMED_OUT = "InspectionTimedOut"
CONFLICT_RETRIES = 5
RETRY_START, RETRY_CAP = 1.0, 30.0


def created_at(pod: dict[str, Any]) -> float | None:
    stamp = (pod.get("metadata") or {}).get("creationTimestamp")
    try:
        return dt.datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


class GateFinisher:
    """One attempt per call of :meth:`finish`; the caller schedules the retry it asks for."""

    def __init__(
        self,
        kube: KubeClient,
        decider: Decider,
        actions: Actions,
        metrics: ControllerMetrics,
        *,
        gate_timeout: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube, self.decider, self.actions, self.metrics = kube, decider, actions, metrics
        self.gate_timeout = gate_timeout
        self._clock = clock
        self._attempts: dict[str, int] = {}
        self._decided: dict[str, str] = {}  # uid → resourceVersion already answered with no common arch

    def finish(self, namespace: str, name: str) -> float | None:
        """Seconds after which to try again, or ``None`` when there is nothing more to do."""
        for _ in range(CONFLICT_RETRIES):
            try:
                pod = self.kube.call("GET", pod_path(namespace, name))
            except NotFound:
                return None
            except KubeError as exc:
                log.warning("reading gated pod %s/%s failed: %s", namespace, name, exc)
                return RETRY_START
            try:
                return self._attempt(pod)
            except PodChanged:
                self.metrics.gate_outcomes.labels("conflict_retried").inc()
                continue
            except NotLeader:
                return None
        return RETRY_START

    def _attempt(self, pod: dict[str, Any]) -> float | None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid, ns = str(meta.get("uid") or ""), str(meta.get("namespace") or "")
        if spec.get("nodeName") or SCHEDULING_GATE not in gates_of(spec):
            self._attempts.pop(uid, None)
            return None
        if self._decided.get(uid) == meta.get("resourceVersion"):
            return None
        try:
            workload = read_workload(pod, POD)
        except InvalidObject as exc:
            log.warning("gated pod %s/%s cannot be read (%s): gate left", ns, meta.get("name"), exc)
            return None
        target = object_ref(workload.meta, kind=POD, namespace=ns)
        # the pipeline every path calls, as the webhook would have decided had the lookups finished
        prepared = self.decider.prepare(workload, ns, stage="gate")
        images = prepared.images
        created = created_at(pod)
        age = self._clock() - created if created is not None else 0.0
        remaining = self.gate_timeout - age
        result = None
        lookups: Lookups = {}
        if images:
            timeout = max(0.5, min(self.decider.lookup_timeout, remaining)) if remaining > 0 else 0.5
            result = self.decider.look_up(prepared.request, deadline=Deadline.after(timeout)).result
            lookups = result.lookups
        waiting = temporary_failures(images, lookups)
        if waiting and remaining > 0:
            attempt = self._attempts.get(uid, 0)
            self._attempts[uid] = attempt + 1
            delay: float = min(RETRY_START * 2**attempt, RETRY_CAP, max(remaining, 0.1))
            return delay
        if waiting and prepared.settings.fallback_arch:
            # rule 13a: lookups still failing at the gate's time-out go to the fallback architecture, if any
            decision = prepared.decide(result)
            if decision.allowed and decision.fallback:
                self._patch(pod, (*decision.patch, *remove_gate_operation(spec)))
                message = f"{fallback_message(decision)}; scheduling gate {SCHEDULING_GATE} removed"
                self.actions.event(target, NORMAL, REASON_FALLBACK, message)
                self.metrics.gate_outcomes.labels("dry_run" if self.actions.dry_run else "fallback").inc()
                self._attempts.pop(uid, None)
                if self.actions.dry_run:
                    self._decided[uid] = str(meta.get("resourceVersion"))
                return None
        if waiting:
            failures = {image: lookups[image] for image in waiting}
            reasons = "; ".join(
                f"{image}: {found.reason}" for image, found in failures.items() if isinstance(found, LookupFailure)
            )
            self._patch(pod, remove_gate_operation(spec))
            self.actions.event(
                target,
                WARNING,
                REASON_TIMED_OUT,
                f"image lookups still failing after {self.gate_timeout:g}s ({reasons}): "
                f"scheduling gate {SCHEDULING_GATE} removed without architecture placement",
            )
            self.metrics.gate_outcomes.labels("dry_run" if self.actions.dry_run else "timed_out").inc()
            self._attempts.pop(uid, None)
            if self.actions.dry_run:
                self._decided[uid] = str(meta.get("resourceVersion"))
            return None
        decision = prepared.decide(result)
        if not decision.allowed:
            self._decided[uid] = str(meta.get("resourceVersion"))
            self.actions.event(target, WARNING, REASON_NO_COMMON, decision.message or "no common architecture")
            self.metrics.gate_outcomes.labels("no_common_architecture").inc()
            return None
        self._patch(pod, (*decision.patch, *remove_gate_operation(spec)))
        placed = (
            f"required kubernetes.io/arch in [{', '.join(decision.common)}]"
            if decision.common
            else "no architecture placement needed"
        )
        warnings = f" (warnings: {'; '.join(decision.warnings)})" if decision.warnings else ""
        self.actions.event(
            target, NORMAL, REASON_PLACED, f"{placed}; scheduling gate {SCHEDULING_GATE} removed{warnings}"
        )
        self.metrics.gate_outcomes.labels("dry_run" if self.actions.dry_run else "placed").inc()
        self._attempts.pop(uid, None)
        if self.actions.dry_run:
            self._decided[uid] = str(meta.get("resourceVersion"))
        return None

    def _patch(self, pod: dict[str, Any], operations: tuple[dict[str, Any], ...]) -> None:
        if self.actions.dry_run:
            return
        self.actions.patch_pod(pod, operations)
