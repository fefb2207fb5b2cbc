"""Rollouts watched by the leader: cohort against control per workload, rollback, evictions, progress.

The controller hands every pod it examines to :meth:`Rollouts.observe`. A pod
carrying the ``arch.noe.adevinta.com/rollout`` label joins its workload (top
owner, :func:`noe_core.policies.rollout.workload_of`) under the policy whose
rollout the pod's merged settings name (the webhook's merge); its health is
judged by :mod:`noe_core.policies.rollback`. When the rule says so, the
workload is rolled back:

* recorded in the policy's ``status.rollout.rolledBack`` (with
  ``observedGeneration``: a new generation of ``spec`` clears the list, and the
  webhook treats a listed workload as ``percent: 0``);
* a Warning Event ``RolloutRolledBack`` on the policy and on the workload;
* its cohort pods evicted through the Eviction API, one at a time per
  workload: the next only once the evicted one is gone; a budget's 429 is
  retried with backoff; control pods are never touched. A terminating cohort
  pod (``deletionTimestamp`` set) is never evicted, and counts as the eviction
  in flight: read from the pods themselves, so a leader that takes over waits
  for the pod its predecessor evicted instead of evicting it, or the next, at once.

``status.rollout`` also counts each policy's cohort and control pods placed
and failing (written when it changes, at most every ``status_interval``
seconds). With ``--dry-run`` the Events say what would happen and nothing is
written or evicted. Only the leader acts (:class:`~.actions.Actions`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import read_object_meta
from noe_core.policies.merge import MergedSettings
from noe_core.policies.objects import API_VERSION, PLURALS, PolicyRef
from noe_core.policies.rollback import Group, PodHealth, Tally, Verdict, is_failing, rollback_verdict
from noe_core.policies.rollout import CONTROL, ROLLOUT_LABEL, workload_of
from noe_core.policies.settings import PolicySettings
from noe_web.controller.actions import Actions, NotLeader
from noe_web.controller.background import Background
from noe_web.controller.metrics import ControllerMetrics
from noe_web.controller.podview import containers, is_ready, is_terminating
from noe_web.kube.errors import KubeError, NotFound
from noe_web.kube.events import WARNING, ObjectRef
from noe_web.kube.informer import Key
from noe_web.kube.policy_watch import PolicyWatch

log = logging.getLogger("noe.controller.rollouts")

REASON_ROLLED_BACK = "RolloutRolledBack"
REASON_EVICTING = "RolloutEviction"
TICK = 0.5
STATUS_INTERVAL = 5.0
RETRY_START, RETRY_CAP = 1.0, 300.0
EVENT_NAMESPACE = "default"
"""Where the Events of a cluster-scoped policy go (as Kubernetes files them)."""
_WORKLOAD_API = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1"}
_WORKLOAD_API |= {"Job": "batch/v1", "CronJob": "batch/v1", "Pod": "v1"}

WorkloadKey = tuple[str, str, str]
"""(policy, namespace, ``Kind/name``): the policy as ``PolicyRef`` text with its generation."""


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _started(pod: Mapping[str, Any]) -> float | None:
    stamp = pod["status"].get("startTime") or pod["metadata"].get("creationTimestamp")
    try:
        return dt.datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


def policy_key(ref: PolicyRef) -> str:
    return f"{ref}@{ref.generation}"


@dataclass
class Member:
    """A pod of a rollout: its workload, group, whether it is placed, and its health."""

    workload: WorkloadKey
    ref: PolicyRef
    architecture: str
    health: PodHealth
    placed: bool
    terminating: bool = False


@dataclass
class Eviction:
    """The one eviction in flight for a workload, or when to try the next one."""

    pod: Key | None = None
    not_before: float = 0.0
    attempt: int = 0
    reported: set[Key] = field(default_factory=set)


class Rollouts:
    """The leader's view of every rollout, and what it does about failing cohorts."""

    def __init__(
        self,
        watch: PolicyWatch,
        actions: Actions,
        metrics: ControllerMetrics,
        policy: PolicySettings,
        *,
        clock: Callable[[], float] = time.time,
        stamp: Callable[[], str] = now_rfc3339,
        tick: float = TICK,
        status_interval: float = STATUS_INTERVAL,
    ) -> None:
        self.watch, self.actions, self.metrics, self.policy = watch, actions, metrics, policy
        self._clock, self._stamp, self._tick, self.status_interval = clock, stamp, tick, status_interval
        self._lock = threading.Lock()
        self._members: dict[Key, Member] = {}
        self._workloads: dict[WorkloadKey, dict[Key, Member]] = {}
        self._recorded: dict[str, dict[tuple[str, str], dict[str, str]]] = {}  # policy key → rolled back
        self._evictions: dict[tuple[str, str], Eviction] = {}
        self._sent: dict[str, Any] = {}
        self._sent_at: dict[str, float] = {}
        self.rollbacks = 0
        self.primed = threading.Event()
        """Set by the controller once every pod was examined since this process started leading."""
        self._loop = Background("noe-rollouts", self._pass, lambda: self._tick, log=log, failed="rollouts: sync failed")

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    # --- what the controller tells -------------------------------------------------------------------
    def observe(self, key: Key, pod: Mapping[str, Any], *, exec_format_error: bool = False) -> bool:
        """Take a pod's current state; ``True`` when it is a cohort pod this component looks after."""
        member = self._member(key, pod, exec_format_error)
        if member is None and key not in self._members:
            return False  # most pods, and nothing to forget: no lock taken from the other workers
        verdict: tuple[Member, Verdict] | None = None
        with self._lock:
            self._forget(key)
            if member is None:
                return False
            self._members[key] = member
            self._workloads.setdefault(member.workload, {})[key] = member
            verdict = self._verdict(member)
        if verdict is not None:
            self._roll_back(*verdict)
        self._loop.wake()
        return member.health.group == "cohort"

    def forget(self, key: Key) -> None:
        """The pod is gone (deleted, evicted)."""
        with self._lock:
            self._forget(key)
        self._loop.wake()

    def tally(self, ref: PolicyRef, namespace: str = "", workload: str = "") -> Tally:
        """The policy's pods (one workload's with ``namespace`` and ``workload``), placed ones counted."""
        with self._lock:
            keys = [
                k
                for k in self._workloads
                if k[0] == policy_key(ref) and (not workload or (k[1], k[2]) == (namespace, workload))
            ]
            return sum((self._tally(k) for k in keys), Tally())

    # --- inside ----------------------------------------------------------------------------------
    def _member(self, key: Key, pod: Mapping[str, Any], exec_format_error: bool) -> Member | None:
        labels = pod["metadata"].get("labels") or {}
        group = labels.get(ROLLOUT_LABEL)
        if not isinstance(group, str) or not group:
            return None
        namespace = key[0]
        try:
            meta = read_object_meta(pod)
        except InvalidObject:
            return None
        merged: MergedSettings = self.watch.settings_for(self.policy, namespace=namespace, pod_labels=meta.labels)
        rollout, ref = merged.rollout, merged.rollout_source
        if rollout is None or ref is None:
            return None
        health_group: Group
        if group == rollout.architecture:
            health_group = "cohort"
        elif group == CONTROL:
            health_group = "control"
        else:
            return None  # a label of an earlier rollout to another architecture
        states = list(containers(pod))
        started = _started(pod)
        failing = is_failing(
            restart_counts=(c.restart_count for c in states),
            crash_looping=any(c.crash_looping for c in states),
            ready=is_ready(pod),
            running_for=self._clock() - started if started is not None else None,
        )
        placed = bool(pod["spec"].get("nodeName"))
        health = PodHealth(health_group, failing and placed, exec_format_error and placed)
        workload = (policy_key(ref), namespace, workload_of(meta))
        return Member(workload, ref, rollout.architecture, health, placed, terminating=is_terminating(pod))

    def _verdict(self, member: Member) -> tuple[Member, Verdict] | None:
        """Whether ``member``'s workload must be rolled back now (called with the lock held).

        An exec format error counts at once; shares only once every pod has been examined since this
        process started leading (``primed``), so that a partial view (cohort pods seen before their
        control pods) cannot roll a workload back.
        """
        if self._rolled_back(member):
            return None
        tally = self._tally(member.workload)
        if not tally.exec_format_errors and not self.primed.is_set():
            return None
        found = rollback_verdict(tally, member.architecture)
        return (member, found) if found is not None else None

    def _forget(self, key: Key) -> None:
        member = self._members.pop(key, None)
        if member is not None:
            pods = self._workloads.get(member.workload)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self._workloads[member.workload]

    def _tally(self, workload: WorkloadKey) -> Tally:
        return Tally.of(m.health for m in self._workloads.get(workload, {}).values() if m.placed)

    def _rolled_back(self, member: Member) -> bool:
        where = (member.workload[1], member.workload[2])
        policy = self._policy(member.ref)
        if policy is not None and where in policy:
            return True
        return where in self._recorded.get(member.workload[0], {})

    def _policy(self, ref: PolicyRef) -> frozenset[tuple[str, str]] | None:
        for item in self.watch.judged():
            if item.ref == ref and item.policy is not None and item.policy.rollout is not None:
                return item.policy.rollout.rolled_back
        return None

    def _roll_back(self, member: Member, verdict: Verdict) -> None:
        namespace, workload = member.workload[1], member.workload[2]
        with self._lock:
            recorded = self._recorded.setdefault(member.workload[0], {})
            if (namespace, workload) in recorded:
                return
            recorded[(namespace, workload)] = {
                "namespace": namespace,
                "workload": workload,
                "architecture": member.architecture,
                "reason": f"{verdict.reason}: {verdict.message}",
                "time": self._stamp(),
            }
        self.rollbacks += 1
        if not self.actions.dry_run:
            self.metrics.rollbacks.labels(verdict.reason).inc()
        ref = member.ref
        text = f"rollout to {member.architecture} of {ref} rolled back for {namespace}/{workload}: {verdict.message}"
        log.warning(
            "rollout rolled back",
            extra={
                "fields": {
                    "event": "rollout_rolled_back",
                    "policy": str(ref),
                    "namespace": namespace,
                    "workload": workload,
                    "reason": verdict.reason,
                    "dry_run": self.actions.dry_run,
                }
            },
        )
        policy_target = ObjectRef(API_VERSION, ref.kind, ref.namespace or EVENT_NAMESPACE, ref.name)
        self.actions.event(policy_target, WARNING, REASON_ROLLED_BACK, text)
        kind, _, name = workload.partition("/")
        self.actions.event(
            ObjectRef(_WORKLOAD_API.get(kind, "v1"), kind, namespace, name), WARNING, REASON_ROLLED_BACK, text
        )
        self._loop.wake()

    # --- the loop: status, evictions ---------------------------------------------------------------
    def _pass(self) -> None:
        if self.watch.ready and self.actions.is_leader():
            self.sync()

    def sync(self) -> None:
        """Judge every workload, write each rollout policy's status when it changed, push the evictions on."""
        now = time.monotonic()
        with self._lock:
            found = [
                verdict
                for pods in self._workloads.values()
                if pods and (verdict := self._verdict(next(iter(pods.values())))) is not None
            ]
        for verdict in found:
            self._roll_back(*verdict)
        current: set[str] = set()
        rolled_back: dict[tuple[str, str], tuple[PolicyRef, str]] = {}
        for item in self.watch.judged():
            ref = item.ref
            rollout = item.policy.rollout if item.policy is not None else None
            key = policy_key(ref)
            if rollout is None:
                written = item.status.get("rollout") if isinstance(item.status, Mapping) else None
                if item.policy is not None and isinstance(written, Mapping) and "observedGeneration" in written:
                    self._write(ref, None, key, now, urgent=True)  # spec.rollout removed: so is its progress
                continue
            current.add(key)
            with self._lock:
                recorded = dict(self._recorded.get(key, {}))
            entries = {(e["namespace"], e["workload"]): e for e in _listed(item.status, ref.generation)}
            for where, entry in recorded.items():
                entries.setdefault(where, entry)
            for where in entries:
                rolled_back[where] = (ref, rollout.architecture)
            tally = self.tally(ref)
            status = {
                "observedGeneration": ref.generation,
                "cohort": {"placed": tally.cohort, "failing": tally.cohort_failing},
                "control": {"placed": tally.control, "failing": tally.control_failing},
                "rolledBack": [entries[k] for k in sorted(entries)],
            }
            self.metrics.rollout_pods.labels(str(ref), "cohort", "placed").set(tally.cohort)
            self.metrics.rollout_pods.labels(str(ref), "cohort", "failing").set(tally.cohort_failing)
            self.metrics.rollout_pods.labels(str(ref), "control", "placed").set(tally.control)
            self.metrics.rollout_pods.labels(str(ref), "control", "failing").set(tally.control_failing)
            existing = item.status.get("rollout") if isinstance(item.status, Mapping) else None
            if existing != status:
                urgent = len(entries) != len(_listed(item.status, ref.generation)) or (
                    isinstance(existing, Mapping) and existing.get("observedGeneration") != ref.generation
                )
                self._write(ref, status, key, now, urgent=urgent)
        with self._lock:  # rollbacks of generations gone: a new spec starts afresh
            for stale in [k for k in self._recorded if k not in current]:
                del self._recorded[stale]
        for where, (ref, architecture) in rolled_back.items():
            self._evict_next(where, ref, architecture, now)

    def _write(self, ref: PolicyRef, status: dict[str, Any] | None, key: str, now: float, *, urgent: bool) -> None:
        if self._sent.get(key) == status and key in self._sent:
            return
        if not urgent and now - self._sent_at.get(key, -1e9) < self.status_interval:
            return
        try:
            self.actions.policy_status(PLURALS[ref.kind], ref.namespace, ref.name, {"rollout": status})
        except (NotFound, NotLeader):
            return
        except KubeError as exc:
            log.warning("rollout status of %s not written (%s); trying again", ref, exc)
            return
        self._sent[key], self._sent_at[key] = status, now

    def _evict_next(self, where: tuple[str, str], ref: PolicyRef, architecture: str, now: float) -> None:
        """One eviction in flight per workload: the next cohort pod once the last one is gone."""
        namespace, workload = where
        state = self._evictions.setdefault(where, Eviction())
        with self._lock:
            members = self._workloads.get((policy_key(ref), namespace, workload), {})
            cohort = sorted(k for k, m in members.items() if m.health.group == "cohort")
            terminating = {k for k in cohort if members[k].terminating}
        if terminating or (state.pod is not None and state.pod in cohort):
            return  # one still terminating (evicted by this leader or an earlier one): the next once it is gone
        state.pod = None
        candidates = [k for k in cohort if k not in state.reported]
        if not candidates or now < state.not_before:
            return
        pod = candidates[0]
        outcome = self.actions.evict(pod[0], pod[1], (f"rollback/{namespace}/{workload}", pod[1], architecture))
        self.metrics.rollout_evictions.labels(outcome).inc()
        if outcome == "evicted":
            state.pod, state.attempt = pod, 0
        elif outcome == "dry_run":
            state.reported.add(pod)
            self.actions.event(
                ObjectRef("v1", "Pod", pod[0], pod[1]),
                WARNING,
                REASON_EVICTING,
                f"cohort pod of {workload} would be evicted: the rollout to {architecture} of {ref} was rolled back",
            )
        elif outcome in ("refused_by_budget", "error", "backoff"):
            state.not_before = now + min(RETRY_START * 2**state.attempt, RETRY_CAP)
            state.attempt += 1
        elif outcome == "gone":
            self.forget(pod)


def _listed(status: object, generation: int) -> list[dict[str, Any]]:
    """``status.rollout.rolledBack`` entries of ``generation`` (void for another)."""
    record = status.get("rollout") if isinstance(status, Mapping) else None
    if not isinstance(record, Mapping) or record.get("observedGeneration") != generation:
        return []
    entries = record.get("rolledBack")
    return [
        dict(e)
        for e in (entries if isinstance(entries, list) else ())
        if isinstance(e, Mapping) and isinstance(e.get("namespace"), str) and isinstance(e.get("workload"), str)
    ]
