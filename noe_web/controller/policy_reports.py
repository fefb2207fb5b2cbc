"""``noe controller --policy-reports``: the report's PolicyReports, kept up to date in each namespace.

While this process leads, a pass runs at most every ``--policy-report-interval``:
the pods of the watch cache are read into workloads (top owners from owner
references and the controllers' naming rules; requests as the scheduler counts
them), their images judged with the controller's own lookups (warm images cost
nothing; cold ones are read with the pods' pull secrets), and the PolicyReport
of each namespace (:mod:`noe_core.report.policy_reports`, named ``noe-<target>``) is
built. Only a namespace whose results changed is written — timestamps aside —
through :class:`~noe_web.controller.actions.Actions`, the controller's only
writer. A namespace whose last workload went away gets an empty report. On
becoming leader each namespace's report is read once before anything is
written, so a restart rewrites nothing that is still true. Without the CRD
(the API answers 404) a warning is logged once and the pass ends.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import ImagePlatforms, Lookup, LookupRequest, Lookups
from noe_core.k8s.owners import Owners
from noe_core.placement.decider import Decider, KnownAnswers
from noe_core.report.build import DEFAULT_ARCHITECTURES, build_report
from noe_core.report.pods import PodEntry, read_pod
from noe_core.report.policy_reports import API_VERSION, namespace_report, policy_reports, report_name, same_results
from noe_web.controller.actions import Actions, NotLeader, policy_reports_path
from noe_web.controller.background import Background
from noe_web.kube.errors import Conflict, KubeError, NotFound
from noe_web.kube.informer import Informer

log = logging.getLogger("noe.controller")


@dataclass(frozen=True)
class PassResult:
    """What one pass did: namespaces written, left as they were, and whether the CRD is missing."""

    written: tuple[str, ...] = ()
    unchanged: int = 0
    no_crd: bool = False


class PolicyReporter:
    """One pass at a time, on its own thread, while leading."""

    def __init__(
        self,
        pods: Informer,
        decider: Decider,
        actions: Actions,
        *,
        target: str,
        interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pods, self.decider, self.actions = pods, decider, actions
        self.settings = settings = decider.flags
        self.target, self.interval, self._clock = target, interval, clock
        archs = tuple(sorted(settings.schedulable_archs)) or DEFAULT_ARCHITECTURES
        self.architectures = tuple(sorted({*archs, target}))
        self._known: dict[str, tuple[str | None, dict[str, Any]]] = {}
        """namespace → (resourceVersion, report) as last read or written during this leadership."""
        self._warned_crd = False
        self.passes = 0
        self._loop = Background(
            "noe-policy-reports",
            self._pass,
            lambda: self.interval,
            log=log,
            failed="policy report pass failed; trying again at the next interval",
        )

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def started_leading(self) -> None:
        """What another leader wrote is unknown here: read each report again before writing, and pass now."""
        self._known.clear()
        self._warned_crd = False
        self._loop.wake()

    def _pass(self) -> None:
        if not self.actions.is_leader() or not self.pods.synced.is_set():
            return
        with contextlib.suppress(NotLeader):  # lost the lease during the pass: the next leader writes
            self.run_once()

    # --- one pass --------------------------------------------------------------------------------
    def _entries(self) -> list[PodEntry]:
        owners = Owners()
        entries = []
        for pod in self.pods.values():
            try:
                entries.append(read_pod(pod, owners))
            except InvalidObject:
                continue  # the webhook's problem, not a report's
        return entries

    def _lookups(self, entries: Sequence[PodEntry]) -> KnownAnswers:
        """Each image's answer (an answer with platforms wins over a failure seen with other credentials), and
        each pod's lookups as the one placement pipeline decides them from those answers: its policies'
        declared platforms first, learned architectures left out, as the webhook reads them."""
        found: dict[str, Lookup] = {}
        sources: dict[str, str] = {}
        for entry in entries:
            missing = [image for image in entry.images if not isinstance(found.get(image), ImagePlatforms)]
            if not missing:
                continue
            request = LookupRequest(tuple(missing), entry.namespace, entry.pull_secrets)
            inspection = self.decider.look_up(request).result
            for image, answer in inspection.lookups.items():
                if image not in found or isinstance(answer, ImagePlatforms):
                    found[image] = answer
                    sources[image] = inspection.sources.get(image, "registry")
        return KnownAnswers(self.decider, found, sources)

    def run_once(self) -> PassResult:
        """Build every namespace's report and write those whose results changed."""
        self.passes += 1
        entries = self._entries()
        known = self._lookups(entries)
        report = build_report(
            entries, known.answers, self.settings, self.architectures, pod_lookups=lambda pod: _decided(known, pod)
        )
        docs = {
            doc["metadata"]["namespace"]: doc for doc in policy_reports(report, self.target, seconds=int(self._clock()))
        }
        for namespace in self._known:
            if namespace not in docs:
                docs[namespace] = namespace_report(namespace, self.target)
        written: list[str] = []
        unchanged = 0
        for namespace, doc in sorted(docs.items()):
            version, current = self._current(namespace)
            if current is not None and same_results(current, doc):
                unchanged += 1
                continue
            try:
                stored = self.actions.put_policy_report(doc, version)
            except Conflict:
                self._known.pop(namespace, None)  # changed by someone else: read again next pass
                continue
            except NotFound:
                self._warn_no_crd()
                return PassResult(tuple(written), unchanged, no_crd=True)
            except KubeError as exc:
                log.warning(
                    "writing PolicyReport %s/%s failed (%s); next pass", namespace, doc["metadata"]["name"], exc
                )
                self._known.pop(namespace, None)
                continue
            if stored is not None:
                self._known[namespace] = (_version(stored), stored)
            written.append(namespace)
        return PassResult(tuple(written), unchanged)

    def _current(self, namespace: str) -> tuple[str | None, dict[str, Any] | None]:
        """The report as last seen; read from the API the first time in this leadership."""
        if namespace in self._known:
            return self._known[namespace]
        name = report_name(self.target)
        try:
            current: dict[str, Any] = self.actions.kube.call("GET", policy_reports_path(namespace, name))
        except NotFound:
            return None, None  # not there yet (or no CRD: then creating it answers 404 too)
        self._known[namespace] = (_version(current), current)
        return self._known[namespace]

    def _warn_no_crd(self) -> None:
        if not self._warned_crd:
            self._warned_crd = True
            log.warning(
                "cannot write PolicyReports: the API has no %s PolicyReport (install the CRD, e.g. with Kyverno "
                "or the wg-policy prototypes); --policy-reports does nothing until it is there",
                API_VERSION,
            )


def _decided(known: KnownAnswers, pod: PodEntry) -> Lookups:
    """The pod's lookups as the pipeline decided them (a pod that could not be read as a workload: the answers)."""
    if pod.view is None:
        return known.answers
    return known.decision(pod.view, pod.namespace).lookups


def _version(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None
