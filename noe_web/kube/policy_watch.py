"""The cluster's placement policies as the webhook reads them: both kinds and the Namespaces, watched.

Each gunicorn worker runs one :class:`PolicyWatch` (three informers on their
own threads, started after the fork). It is the webhook's
:class:`~noe_core.policies.merge.PolicySource`: every admission asks it for the
pod's merged settings, and it answers with the same
:meth:`~noe_core.policies.merge.PolicySet.settings_for` that ``noe mutate`` and
users' tests call (``docs/policies.md``).

* A created, changed or deleted policy reaches admissions as soon as its watch
  event arrives (well within the contract's 2 s): the changed object is judged
  once (:func:`noe_core.policies.status.judge`) and the valid ones are indexed
  again on the next admission.
* An invalid policy is ignored whole and logged once per generation, never per
  admission.
* :attr:`ready` is false until every list has succeeded (``/readyz`` answers
  503 until then). ``/readyz`` reaches one worker of several, so an admission
  that reaches a worker still listing waits for that list, up to
  ``first_list_wait`` seconds after the worker started (then, and only then, it
  goes on with the flags alone, and says so once). Afterwards a broken watch keeps the last good set;
  :meth:`stale_for` says for how long (the ``noe_policy_watch_stale_seconds``
  gauge and the ``NoePolicyWatchStale`` alert).
* CRDs not installed (the lists answer 404): the webhook runs on the flags
  alone, says so in one line, and looks again every ``absent_retry`` seconds,
  so CRDs installed later are picked up.
* The policies are listed with consistent reads (few objects; an old copy
  from a lagging API server would be applied to pods and written back as
  status); the Namespaces, thousands and listed by every worker of every
  replica, from the API server's watch cache (streamed where it offers it):
  see :mod:`noe_web.kube.informer`.
* A namespace the watch has not delivered yet (created a moment before its
  first pod) is read once with a short GET, so its labels select policies from
  its very first pod.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from noe_core.policies.merge import MergedSettings, Policies, PolicySet, namespace_labels
from noe_core.policies.objects import (
    API_VERSION,
    CLUSTER_KIND,
    GROUP,
    NAMESPACED_KIND,
    PLURALS,
    VERSION,
    PlacementPolicy,
    PolicyRef,
    with_status,
)
from noe_core.policies.settings import PolicySettings
from noe_core.policies.status import Verdict, judge
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import KubeError
from noe_web.kube.informer import Informer, Key

log = logging.getLogger("noe.policies")

ABSENT_RETRY = 60.0
FIRST_LIST_WAIT = 2.0
NAMESPACE_GET_TIMEOUT = 1.0
TICK = 1.0

POLICY_PATHS = {
    CLUSTER_KIND: f"/apis/{GROUP}/{VERSION}/{PLURALS[CLUSTER_KIND]}",
    NAMESPACED_KIND: f"/apis/{GROUP}/{VERSION}/{PLURALS[NAMESPACED_KIND]}",
}
NAMESPACES_PATH = "/api/v1/namespaces"


@dataclass(frozen=True)
class Judged:
    """One policy object as last seen: its identity, the policy when valid, the verdict, and its status."""

    ref: PolicyRef
    policy: PlacementPolicy | None
    verdict: Verdict
    status: Mapping[str, Any] | None = None


def slim_policy(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What is kept of a policy object: identity, generation and spec (list items may lack their kind)."""

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        kept = {k: meta[k] for k in ("name", "namespace", "generation") if k in meta}
        slim = {"apiVersion": API_VERSION, "kind": kind, "metadata": kept, "spec": obj.get("spec")}
        if isinstance(obj.get("status"), dict):
            slim["status"] = obj["status"]  # what noe controller compares before writing it
        return slim

    return slim


def slim_namespace(obj: dict[str, Any]) -> dict[str, Any]:
    """A Namespace as the webhook keeps it: its name, and its labels as selectors read them (with
    ``kubernetes.io/metadata.name``), the one copy both the watch cache and the policies' index use.

    Label keys and values repeat across thousands of Namespaces (``team``, ``env=prod``): each is
    stored once.
    """
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    labels = meta.get("labels")
    clean = (
        {sys.intern(k): sys.intern(v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(labels, dict)
        else {}
    )
    name = str(meta.get("name") or "")
    return {"metadata": {"name": name, "labels": namespace_labels(name, clean)}}


class PolicyWatch:
    """The placement policies and Namespaces of one cluster, kept current by list and watch."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        absent_retry: float = ABSENT_RETRY,
        watch_seconds: int = 300,
        namespace_get_timeout: float = NAMESPACE_GET_TIMEOUT,
        first_list_wait: float = FIRST_LIST_WAIT,
        on_stale: Callable[[float], None] = lambda seconds: None,
        on_restart: Callable[[str, str], None] = lambda resource, reason: None,
        on_policy_change: Callable[[], None] = lambda: None,
        tick: float = TICK,
    ) -> None:
        self.kube = kube
        self.namespace_get_timeout = namespace_get_timeout
        self.first_list_wait = first_list_wait
        self._listed_by = 0.0
        self._said_unlisted = False
        self._on_stale, self._tick, self._on_policy_change = on_stale, tick, on_policy_change
        self._lock = threading.Lock()
        self._judged: dict[tuple[str, Key], Judged] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._current = Policies(PolicySet(), self._namespaces)
        self._dirty = False
        self._logged: set[tuple[str, Key, int]] = set()
        self._said_absent: frozenset[str] | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

        def policy_informer(kind: str) -> Informer:
            return Informer(
                kube,
                POLICY_PATHS[kind],
                slim=slim_policy(kind),
                on_change=lambda key, old, new: self._policy_changed(kind, key, new),
                on_restart=lambda reason: on_restart(PLURALS[kind], reason),
                watch_seconds=watch_seconds,
                absent_retry=absent_retry,
                consistent=True,  # a few objects, applied to every admission and written back as status
                streaming=True,
            )

        self.cluster = policy_informer(CLUSTER_KIND)
        self.namespaced = policy_informer(NAMESPACED_KIND)
        self.namespaces = Informer(
            kube,
            NAMESPACES_PATH,
            slim=slim_namespace,
            on_change=self._namespace_changed,
            on_restart=lambda reason: on_restart("namespaces", reason),
            watch_seconds=watch_seconds,
            absent_retry=absent_retry,  # never in a real cluster; an API stand-in without Namespaces
            streaming=True,  # thousands, listed by every worker: from the watch cache (a new one is read with a GET)
        )
        self.informers = (self.cluster, self.namespaced, self.namespaces)

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._listed_by = time.monotonic() + self.first_list_wait
        for informer in self.informers:
            informer.start()
        self._ticker = threading.Thread(target=self._ticks, name="noe-policy-watch", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        for informer in self.informers:
            informer.stop()

    @property
    def ready(self) -> bool:
        """Every list has answered (the policies, or that their CRDs are not installed, and the Namespaces)."""
        return all(informer.synced.is_set() for informer in self.informers)

    def wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        return all(informer.synced.wait(max(0.0, end - time.monotonic())) for informer in self.informers)

    def stale_for(self) -> float:
        """Seconds the policies or namespace labels in use may be out of date (0 while every watch is open)."""
        now = time.monotonic()
        return max(informer.stale_for(now) for informer in self.informers)

    @property
    def crds_installed(self) -> bool:
        return not (self.cluster.absent and self.namespaced.absent)

    # --- the PolicySource ------------------------------------------------------------------------
    def current(self) -> Policies:
        """The valid policies, indexed again only after a change."""
        if self._dirty:
            with self._lock:
                if self._dirty:
                    valid = [j.policy for j in self._judged.values() if j.policy is not None]
                    self._current = Policies(PolicySet(valid), self._namespaces)
                    self._dirty = False
        return self._current

    def settings_for(self, base: PolicySettings, *, namespace: str, pod_labels: Mapping[str, str]) -> MergedSettings:
        if not self.ready:
            self._await_first_list()
        policies = self.current()
        if not policies.policy_set:
            return MergedSettings(base)
        labels = self._namespaces.get(namespace)
        if labels is None and policies.policy_set.reads_namespace_labels:
            labels = self._read_namespace(namespace)
        return policies.policy_set.settings_for(
            base, namespace=namespace, namespace_labels=labels, pod_labels=pod_labels
        )

    def _await_first_list(self) -> None:
        """An admission before this worker's first list: wait for it, within the worker's start-up allowance."""
        if self.wait_ready(max(0.0, self._listed_by - time.monotonic())) or self._said_unlisted:
            return
        self._said_unlisted = True
        log.warning(
            "placement policies not listed %gs after start: admitting on the flags alone until they are",
            self.first_list_wait,
            extra={"fields": {"event": "policies_not_listed"}},
        )

    def judged(self) -> list[Judged]:
        """Every policy object seen, valid or not (for ``/readyz`` and tests)."""
        with self._lock:
            return list(self._judged.values())

    # --- changes ---------------------------------------------------------------------------------
    def _policy_changed(self, kind: str, key: Key, new: dict[str, Any] | None) -> None:
        with self._lock:
            before = self._judged.get((kind, key))
            if new is None:
                self._judged.pop((kind, key), None)
            else:
                generation = int((new.get("metadata") or {}).get("generation") or 0)
                ref = PolicyRef(kind, key[1], key[0] if kind == NAMESPACED_KIND else "", generation)
                policy: PlacementPolicy | None
                if before is not None and before.ref == ref and generation:
                    # the same generation (its status, labels or annotations changed): judged already; a
                    # rollout's rolled-back workloads are read again from the status
                    policy, verdict = before.policy, before.verdict
                    if policy is not None:
                        policy = with_status(policy, new.get("status"))
                else:
                    policy, verdict = judge(new)
                self._judged[(kind, key)] = Judged(ref, policy, verdict, new.get("status"))
                if not verdict.accepted and (kind, key, generation) not in self._logged:
                    self._logged.add((kind, key, generation))
                    log.warning(
                        "placement policy %s ignored: %s: %s",
                        ref,
                        verdict.reason,
                        verdict.message,
                        extra={
                            "fields": {
                                "event": "policy_rejected",
                                "policy": str(ref),
                                "generation": generation,
                                "reason": verdict.reason,
                                "message": verdict.message,
                            }
                        },
                    )
            after = self._judged.get((kind, key))
            if before is None or after is None or (before.ref, before.policy) != (after.ref, after.policy):
                self._dirty = True  # the valid set changed: index it again
        self._on_policy_change()

    def _namespace_changed(self, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        name = key[1]
        if new is None:
            self._namespaces.pop(name, None)
        else:
            self._namespaces[name] = new["metadata"]["labels"]

    def _read_namespace(self, name: str) -> Mapping[str, str] | None:
        """A namespace the watch has not delivered yet: one short GET (remembered until its event arrives)."""
        if not self.namespaces.synced.is_set():
            return None
        try:
            obj = self.kube.call("GET", f"{NAMESPACES_PATH}/{quote(name, safe='')}", timeout=self.namespace_get_timeout)
        except KubeError as exc:
            log.info("namespace %s not known yet and not readable (%s): its labels select no policy", name, exc)
            return None
        if not isinstance(obj, dict):
            return None
        labels: Mapping[str, str] = slim_namespace(obj)["metadata"]["labels"]
        self._namespaces.setdefault(name, labels)
        return labels

    # --- the ticker: staleness gauge, CRD presence said once per change -------------------------
    def _ticks(self) -> None:
        while True:
            self._on_stale(self.stale_for())
            self._say_crds()
            if self._stop.wait(self._tick):
                return

    def _say_crds(self) -> None:
        if not (self.cluster.synced.is_set() and self.namespaced.synced.is_set()):
            return
        absent = frozenset(
            PLURALS[kind]
            for kind, informer in ((CLUSTER_KIND, self.cluster), (NAMESPACED_KIND, self.namespaced))
            if informer.absent
        )
        if absent == self._said_absent:
            return
        first = self._said_absent is None
        self._said_absent = absent
        if absent:
            names = ", ".join(f"{plural}.{GROUP}" for plural in sorted(absent))
            log.warning(
                "placement policy CRDs not installed (%s): running on the flags alone; looking again every %gs",
                names,
                self.cluster.absent_retry or 0,
                extra={"fields": {"event": "policy_crds_missing", "crds": sorted(absent)}},
            )
        elif not first:
            log.info(
                "placement policy CRDs installed: policies apply from now on",
                extra={"fields": {"event": "policy_crds_found"}},
            )
