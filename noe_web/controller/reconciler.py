"""The controller proper: caches of Pods and Nodes, a work queue, and what the leader does with each pod.

For each pod that changed (and every pod when this process becomes leader):

* a pod carrying noe's scheduling gate goes to :class:`~.gates.GateFinisher`;
* a container whose status message (waiting or terminated, current or last
  state) says ``exec format error`` — or a crash-looping one whose previous
  log tail (a few lines, byte-limited, read once per restart) says it — gets
  a Warning ``ExecFormatError`` naming the container, its image and the node's
  architecture;
* a pod bound to a node whose architecture or OS is not offered by every image
  that could be inspected is *misplaced* (:func:`noe_core.compatibility.unsupported_images`
  on the lookups of the one placement pipeline, :mod:`noe_core.pipeline`, judged once per distinct
  inputs by :class:`~.misplaced.MisplacedCheck`: the
  registry's answers, the platforms the pod's placement policies declare and
  the architectures ``exec format error`` disproved, as the webhook read them;
  a policy's schedulable narrowing, preferences and rollout groups never make
  a running pod misplaced, so a policy change causes no eviction wave).

A misplaced or exec-format-failing pod that is not Ready and is owned by a
controller other than a DaemonSet is evicted (:class:`~.actions.Actions`: one
eviction per owner, image digest and architecture per ``--eviction-backoff``,
recorded in the cluster so that it holds across leaders, and the pod looked at
again when its back-off ends; a budget's 429 retried with backoff); a bare or
DaemonSet pod gets a Warning ``IncompatibleNode`` and is left alone; a Ready pod
is left alone, and so is a terminating one (``deletionTimestamp`` set: it is
going already). A Pending pod noe placed that the scheduler finds unschedulable
and no Ready, schedulable node can take on noe's terms gets one Warning
``NoMatchingNode`` (:mod:`~.unsatisfiable`).

Examining a pod whose images are warm costs no API or registry request, so
an unchanged cluster costs nothing beyond the two watches.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import read_object_meta
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.decider import Decider
from noe_web.controller.actions import Actions, EvictOutcome, pod_path
from noe_web.controller.eviction_record import EvictionKey
from noe_web.controller.gates import GateFinisher, created_at
from noe_web.controller.learning import Learning
from noe_web.controller.metrics import ControllerMetrics
from noe_web.controller.misplaced import MisplacedCheck
from noe_web.controller.pod_fields import POD_LIST
from noe_web.controller.podview import (
    EXEC_FORMAT_ERROR,
    ContainerState,
    SharedParts,
    containers,
    is_gated,
    is_ready,
    is_terminating,
    node_platform,
    slim_node,
    slim_pod,
)
from noe_web.controller.rollouts import Rollouts
from noe_web.controller.unsatisfiable import UnsatisfiableCheck
from noe_web.controller.workqueue import WorkQueue
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import KubeError
from noe_web.kube.events import WARNING, ObjectRef, controller_ref, object_ref
from noe_web.kube.informer import Informer, Key

log = logging.getLogger("noe.controller")

REASON_INCOMPATIBLE = "IncompatibleNode"
REASON_EXEC_FORMAT = "ExecFormatError"
LOG_TAIL_LINES = 20
LOG_TAIL_BYTES = 4096
BUDGET_RETRY_START, BUDGET_RETRY_CAP = 1.0, 300.0
BACKOFF_SLACK = 0.05
"""Look again this long after a back-off ends (the clocks of the limiter and the queue are read apart)."""
DAEMON_SET = "DaemonSet"
TURN = 64
"""Most pods a worker takes from the queue at a time (:meth:`~.workqueue.WorkQueue.take`)."""
BACKLOG = 2048
"""Most pods the full pass keeps queued ahead of the workers."""


class Remembered:
    """A bounded set: what was already said or checked, oldest forgotten first."""

    def __init__(self, size: int = 100_000) -> None:
        self._items: collections.OrderedDict[Hashable, None] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first(self, item: Hashable) -> bool:
        """``True`` the first time ``item`` is seen (and remembers it)."""
        with self._lock:
            if item in self._items:
                return False
            self._items[item] = None
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            return True


@dataclass(frozen=True)
class ControllerSettings:
    workers: int = 4
    page_size: int = 500
    watch_seconds: int = 300
    keep_requests: bool = False
    """Keep the pods' requests in the cache (the PolicyReports count them)."""
    x86_64_levels: bool = False
    """``--x86-64-levels nfd``: an image's amd64 level must be at most its node's (rule 16)."""


class Controller:
    def __init__(
        self,
        kube: KubeClient,
        *,
        decider: Decider,
        actions: Actions,
        gates: GateFinisher,
        metrics: ControllerMetrics,
        settings: ControllerSettings | None = None,
        rollouts: Rollouts | None = None,
        learning: Learning | None = None,
    ) -> None:
        self.kube, self.decider, self.actions, self.gates, self.metrics = kube, decider, actions, gates, metrics
        self.rollouts, self.learning = rollouts, learning
        self.settings = settings or ControllerSettings()
        s = self.settings
        self.pods = Informer(
            kube,
            "/api/v1/pods",
            slim=functools.partial(slim_pod, keep_requests=s.keep_requests, shared=SharedParts()),
            on_change=self._pod_changed,
            on_restart=lambda reason: metrics.watch_restarts.labels("pods", reason).inc(),
            page_size=s.page_size,
            watch_seconds=s.watch_seconds,
            streaming=True,  # from the watch cache; every write it leads to is checked by the API server
            schema=POD_LIST,  # a page decoded only as far as slim_pod reads
        )
        self.nodes = Informer(
            kube,
            "/api/v1/nodes",
            slim=slim_node,
            on_change=self._node_changed,
            on_restart=lambda reason: metrics.watch_restarts.labels("nodes", reason).inc(),
            page_size=s.page_size,
            watch_seconds=s.watch_seconds,
            streaming=True,
        )
        self.queue: WorkQueue[Key] = WorkQueue()
        self.misplaced = MisplacedCheck(decider, levels=s.x86_64_levels)
        self._said = Remembered()
        self._logs_read = Remembered()
        self.unsatisfiable = UnsatisfiableCheck(
            placement=decider.admitted,
            nodes=self.nodes.values,
            actions=actions,
            metrics=metrics,
            said=self._said.first,
            levels=s.x86_64_levels,
        )
        self._budget_retries: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.examined = 0
        self.reconciles = 0
        # pods queued since this process started leading, until its full pass: that pass skips them, so a
        # fresh leader examines each pod once even though the informer queues pods as it lists them
        self._covered: set[Key] | None = set()
        self.idle = threading.Event()

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.nodes.start()
        self.pods.start()
        for index in range(self.settings.workers):
            thread = threading.Thread(target=self._work, name=f"noe-worker-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        gauge = threading.Thread(target=self._gauges, name="noe-gauges", daemon=True)
        gauge.start()
        self._threads.append(gauge)

    def stop(self) -> None:
        self._stop.set()
        self.queue.close()
        self.pods.stop()
        self.nodes.stop()
        for thread in self._threads:
            thread.join(5)

    def ready(self) -> bool:
        policies_listed = bool(getattr(self.decider.policies, "ready", True))
        return self.pods.synced.is_set() and self.nodes.synced.is_set() and policies_listed

    def started_leading(self) -> None:
        """Examine every pod: what happened while another process (or none) led is unknown here."""
        self.metrics.leader.set(1)
        threading.Thread(target=self._enqueue_all, name="noe-resync", daemon=True).start()

    def stopped_leading(self) -> None:
        self._covered = set()
        self.metrics.leader.set(0)
        if self.rollouts is not None:
            self.rollouts.primed.clear()

    def _enqueue_all(self) -> None:
        self.pods.synced.wait()
        self.nodes.synced.wait()
        started = time.monotonic()
        keys = self.pods.key_list()
        covered = self._covered or set()
        for index, key in enumerate(keys, 1):
            if key not in covered:
                self.queue.add(key)
            if index % BACKLOG == 0:  # fed as the workers take them: the queue never holds every pod at once
                while self.queue.pending() > BACKLOG and not self._stop.wait(0.005):
                    pass
        self._covered = None
        del covered
        while not self._stop.wait(0.05):
            if not self.queue.pending():
                break
        else:
            return
        if self.rollouts is not None:
            self.rollouts.primed.set()
        self.reconciles += 1
        log.info(
            "full reconcile done",
            extra={
                "fields": {
                    "event": "reconciled",
                    "pods": len(keys),
                    "nodes": len(self.nodes),
                    "seconds": round(time.monotonic() - started, 3),
                    "reconciles": self.reconciles,
                    "examined": self.examined,
                }
            },
        )

    # --- cache events ----------------------------------------------------------------------------
    def _pod_changed(self, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None and self.rollouts is not None:
            self.rollouts.forget(key)
        if new is not None and self.actions.is_leader() and self.pods.synced.is_set():
            # (the pods of the first list are queued by the leader's full pass right after it)
            self.queue.add(key)
            covered = self._covered
            if covered is not None:
                covered.add(key)

    def _node_changed(self, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None or not self.actions.is_leader() or not self.pods.synced.is_set():
            return
        if old is not None and node_platform(old) == node_platform(new):
            return
        name = new["metadata"]["name"]
        for pod in self.pods.values():
            if pod["spec"].get("nodeName") == name:
                self.queue.add((pod["metadata"].get("namespace", ""), pod["metadata"]["name"]))

    # --- workers ---------------------------------------------------------------------------------
    def _work(self) -> None:
        if not self._caches_synced():
            return
        while not self._stop.is_set():
            keys = self.queue.take(share=self.settings.workers, limit=TURN, timeout=0.5)
            if not keys:
                if not self.queue.pending():
                    self.idle.set()
                continue
            self.idle.clear()
            try:
                for key in keys:
                    if self._stop.is_set():
                        break
                    self._examine_one(key)
            finally:
                self.queue.done(*keys)

    def _examine_one(self, key: Key) -> None:
        try:
            if self.actions.is_leader():
                retry = self.examine(key)
                if retry is not None:
                    self.queue.add(key, retry)
        except Exception:  # one pod must never stop the worker
            log.exception("examining pod %s/%s failed", *key)

    def _caches_synced(self) -> bool:
        """Wait until the nodes and pods are listed (``False``: stopped first), as client-go's controllers
        wait for their caches: a pod examined against a half-listed cache of nodes would be judged on no
        node, and the full pass skips what was examined; and workers running while the pods are listed
        only take the interpreter from the list, which then waits for it after each read."""
        for synced in (self.nodes.synced, self.pods.synced):
            while not synced.wait(0.5):
                if self._stop.is_set():
                    return False
        return not self._stop.is_set()

    def _gauges(self) -> None:
        while not self._stop.wait(2.0):
            if not self.pods.synced.is_set():
                continue
            now, ages = time.time(), []
            for pod in self.pods.values():
                if is_gated(pod):
                    created = created_at(pod)
                    ages.append(now - created if created is not None else 0.0)
            self.metrics.gated_pending.set(len(ages))
            self.metrics.gated_oldest.set(max(ages, default=0.0))

    # --- one pod ---------------------------------------------------------------------------------
    def examine(self, key: Key) -> float | None:
        """Look at one pod; seconds after which to look again, or ``None``."""
        pod = self.pods.get(key)
        if pod is None:
            self.unsatisfiable.observe(key, None)
            return None
        self.examined += 1
        self.metrics.pods_examined.inc()
        namespace, name = key
        if is_gated(pod):
            return self.gates.finish(namespace, name)
        node_name = pod["spec"].get("nodeName")
        node = self.nodes.get(("", node_name)) if node_name else None
        # a Pending pod noe placed that no node can take (NoMatchingNode); a bound or gated one is forgotten
        self.unsatisfiable.observe(key, pod if not node_name else None)
        if node is None:
            if self.rollouts is not None:
                self.rollouts.observe(key, pod)
            return None
        if self.misplaced.fine(pod, namespace, self.misplaced.platform(node)):
            # the common case, judged once per workload and node platform: nothing to say, nothing to evict
            if self.rollouts is not None:
                self.rollouts.observe(key, pod)
            return None
        ready = is_ready(pod)
        try:
            meta = read_object_meta(pod)
        except InvalidObject:
            return None
        owner = controller_ref(meta, namespace)
        target = object_ref(meta, kind=POD, namespace=namespace)
        uid = meta.uid
        failing = []
        for container in containers(pod):
            source = self._exec_format_source(pod, container)
            if source is None:
                continue
            failing.append(container)
            if self._said.first((uid, REASON_EXEC_FORMAT, container.name)):
                self.metrics.exec_format_errors.labels(source).inc()
                self.actions.event(
                    target,
                    WARNING,
                    REASON_EXEC_FORMAT,
                    f"container {container.name} (image {container.image}) cannot run on node "
                    f"{node_name} ({node['os']}/{node['arch']}): {EXEC_FORMAT_ERROR}",
                )
                if self.learning is not None:  # the digest does not run on this architecture, whatever it claims
                    self.learning.record(container.image_id, node["arch"], f"{namespace}/{name}")
        # a rollout's cohort pod is left to the rollback, which evicts one of its workload's pods at a time
        in_rollout = self.rollouts is not None and self.rollouts.observe(key, pod, exec_format_error=bool(failing))
        for container in failing:
            if not ready and owner is not None and owner.kind != DAEMON_SET and not in_rollout:
                # the same key as a misplaced pod's: the digest alone (imageID is "[scheme://]repo@sha256:…")
                digest = container.image_id.rsplit("@", 1)[-1] if "@" in container.image_id else container.image
                return self._evict(
                    pod,
                    owner,
                    (digest, node["arch"]),
                    f"container {container.name} fails with {EXEC_FORMAT_ERROR} on {node['arch']}",
                    target,
                )
        try:
            workload = read_workload(pod, POD, meta=meta)
        except InvalidObject:
            return None
        if not workload.images:
            return None
        # the pipeline every path calls: the platforms the webhook's decision read (registry, the pod's
        # policies' declarations, learned architectures); narrowing, preferences and rollouts move no running pod
        bad = self.misplaced.unsupported(workload, namespace, self.misplaced.platform(node))
        if not bad:
            return None
        what = "; ".join(f"{b.image} offers {', '.join(b.offered)}" for b in bad)
        problem = f"node {node_name} is {node['os']}/{node['arch']}, which not every image offers ({what})"
        if ready:
            if self._said.first((uid, "left_ready")):
                self.metrics.misplaced.labels("left_ready").inc()
            return None
        if owner is None or owner.kind == DAEMON_SET:
            if self._said.first((uid, REASON_INCOMPATIBLE, node_name)):
                self.metrics.misplaced.labels("event_only").inc()
                who = "a bare pod" if owner is None else "a DaemonSet's pod"
                self.actions.event(target, WARNING, REASON_INCOMPATIBLE, f"{problem}; left alone: {who}")
            return None
        return self._evict(pod, owner, (bad[0].digest or bad[0].image, node["arch"]), problem, target)

    def _exec_format_source(self, pod: dict[str, Any], container: ContainerState) -> str | None:
        if container.says_exec_format_error:
            return "status"
        if not container.crash_looping:
            return None
        meta = pod["metadata"]
        if not self._logs_read.first((meta.get("uid"), container.name, container.restart_count)):
            return None
        path = pod_path(meta.get("namespace", ""), meta["name"]) + "/log"
        params = {
            "container": container.name,
            "previous": "true",
            "tailLines": str(LOG_TAIL_LINES),
            "limitBytes": str(LOG_TAIL_BYTES),
        }
        try:
            text = self.kube.get_text(path, params)
        except KubeError as exc:
            log.debug(
                "previous log of %s/%s %s unreadable: %s", meta.get("namespace"), meta["name"], container.name, exc
            )
            return None
        return "previous_log" if EXEC_FORMAT_ERROR in text[-LOG_TAIL_BYTES:].lower() else None

    def _evict(
        self, pod: dict[str, Any], owner: ObjectRef, what: tuple[str, str], problem: str, target: ObjectRef
    ) -> float | None:
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if is_terminating(pod):
            log.debug("pod %s/%s: %s; not evicted: it is terminating", meta.get("namespace"), meta["name"], problem)
            return None
        key: EvictionKey = (f"{owner.kind}/{owner.namespace}/{owner.name}", *what)
        outcome: EvictOutcome = self.actions.evict(meta.get("namespace", ""), meta["name"], key)
        if outcome in {"not_leader", "gone"}:
            return None
        if outcome == "error":
            return BUDGET_RETRY_START * 5
        self.metrics.misplaced.labels(outcome).inc()
        if outcome == "refused_by_budget":
            attempt = self._budget_retries.get(uid, 0)
            self._budget_retries[uid] = attempt + 1
            if attempt == 0:
                self.actions.event(
                    target,
                    WARNING,
                    REASON_INCOMPATIBLE,
                    f"{problem}; eviction refused by a disruption budget: retrying with backoff",
                )
            return float(min(BUDGET_RETRY_START * 2**attempt, BUDGET_RETRY_CAP))
        self._budget_retries.pop(uid, None)
        if outcome == "backoff":
            if self._said.first((uid, "backoff")):
                log.info(
                    "pod %s/%s: %s; not evicted: %s %s was evicted for this image within the eviction backoff",
                    meta.get("namespace"),
                    meta["name"],
                    problem,
                    owner.kind,
                    owner.name,
                )
            return self.actions.backoff_left(key) + BACKOFF_SLACK  # looked at again then: evicted if still misplaced
        verb = "would evict" if outcome == "dry_run" else "evicted through the Eviction API"
        self.actions.event(target, WARNING, REASON_INCOMPATIBLE, f"{problem}; {verb}")
        return None
