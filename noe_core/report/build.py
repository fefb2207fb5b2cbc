"""``noe report``'s answer: which workloads could run on each architecture, and what blocks the rest.

Built from the cluster's pods (:func:`~noe_core.report.pods.read_pod`) and one lookup per image, by
:func:`build_report`; pure, no I/O. An image's platforms are read by the
placement contract's rule 4 (:func:`noe_core.placement.image_reading.read_image`: system
OSes, schedulable architectures, attestations and ``unknown`` entries ignored), so
the report and the webhook never disagree about an image.

Per workload (the pods' top owner) and architecture of interest, the status is

* ``runnable`` — every image offers the architecture, on every node of it (of some system OS);
* ``limited`` — the images run only on some nodes of it: those of an x86-64 level
  (an ``amd64/v3``-only image crashes on older CPUs), or of some Windows builds;
  what they need is the workload's ``needs`` (``amd64 v3+``). Levels are judged
  whatever ``--x86-64-levels`` says: the report tells where images would run;
* ``blocked`` — some inspected image does not offer it, or the images share no
  OS or Windows build on it (those images are its ``blocking`` list);
* ``unknown`` — nothing inspected blocks it, but an image could not be inspected.

Images are intersected as the webhook intersects them (per (OS, architecture)
pair, :mod:`noe_core.placement.needs`): a Linux image and a Windows image side by
side run nowhere. An artifact (rule 17) constrains nothing.

A workload with an image that cannot be inspected is never counted as runnable.
Pods that finished (phase ``Succeeded`` or ``Failed``) hold no resources: their
workload is listed, but they add no pods, CPU or memory. The JSON shape
(:meth:`Report.to_json`) is documented in ``docs/report.md``; prices, savings
and the rebuild plan are added by :func:`noe_core.report.planner.with_plan`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from noe_core.image.image_platforms import Lookup, LookupFailure, Lookups
from noe_core.image.offer import Offer, PlatformScope, describe
from noe_core.k8s.owners import TopOwner
from noe_core.k8s.resources import PodRequests, cores
from noe_core.placement.image_reading import Artifact, read_image
from noe_core.placement.needs import shared
from noe_core.policies.rollout import CONTROL
from noe_core.policies.settings import PolicySettings
from noe_core.report.plan import Plan, Savings
from noe_core.report.pods import PodEntry
from noe_core.report.pricing import Prices, money

Status = Literal["runnable", "limited", "blocked", "unknown"]
DEFAULT_ARCHITECTURES = ("amd64", "arm64")


@dataclass(frozen=True)
class Figures:
    """How much: workloads, pods (running or pending), CPU (millicores) and memory (bytes) they request."""

    workloads: int = 0
    pods: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0

    def __add__(self, other: Figures) -> Figures:
        return Figures(
            self.workloads + other.workloads,
            self.pods + other.pods,
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "workloads": self.workloads,
            "pods": self.pods,
            "cpu_cores": cores(self.cpu_millis),
            "memory_bytes": self.memory_bytes,
        }


@dataclass(frozen=True)
class ImageSupport:
    """One image after rule 4: the architectures it offers, or why it cannot be inspected.

    ``offer`` is what it offers per (OS, architecture), with Windows builds and x86-64
    levels; ``None`` when it could not be inspected, or is an artifact (``artifact``:
    it constrains nothing, and its ``architectures`` are then ``None`` too).
    """

    image: str
    architectures: frozenset[str] | None
    error: str | None = None
    offer: Offer | None = None
    artifact: str = ""


@dataclass(frozen=True)
class Need:
    """What the nodes of an architecture must have for a workload: ``text`` (``linux/amd64 v3+``,
    ``windows/amd64 build 10.0.20348``) and the lowest x86-64 level among them (1: builds only)."""

    text: str
    level: int

    @property
    def short(self) -> str:
        """A table cell: ``v3+``, or ``builds`` when only some Windows builds run it."""
        return f"v{self.level}+" if self.level > 1 else "builds"


@dataclass(frozen=True)
class WorkloadReport:
    """One workload and where it could run."""

    workload: TopOwner
    pods: int
    images: tuple[str, ...]
    architectures: tuple[str, ...] | None
    """Architectures every image offers; ``None`` when an image could not be inspected."""
    blocking: Mapping[str, tuple[str, ...]]
    """Per architecture of interest, the inspected images that do not offer it."""
    failures: tuple[tuple[str, str], ...]
    """(image, reason) for each image that could not be inspected."""
    requests: PodRequests
    needs: Mapping[str, Need] = field(default_factory=dict)
    """Per architecture of interest the images run on only some nodes of: what those nodes need."""
    rollout: Mapping[str, int] = field(default_factory=dict)
    """Running or pending pods per ``arch.noe.adevinta.com/rollout`` label value (empty: not in a rollout)."""

    @property
    def rollout_state(self) -> dict[str, Any] | None:
        """The rollout as its pods show it: the cohort's architecture, cohort and control pods."""
        if not self.rollout:
            return None
        cohorts = {value: n for value, n in self.rollout.items() if value != CONTROL}
        architecture = max(sorted(cohorts), key=lambda a: cohorts[a]) if cohorts else None
        return {"architecture": architecture, "cohort": sum(cohorts.values()), "control": self.rollout.get(CONTROL, 0)}

    @property
    def figures(self) -> Figures:
        return Figures(1, self.pods, self.requests.cpu_millis, self.requests.memory_bytes)

    @property
    def error(self) -> str | None:
        if not self.failures:
            return None
        return "; ".join(f"cannot inspect {image}: {reason}" for image, reason in self.failures)

    def status(self, arch: str) -> Status:
        if self.blocking.get(arch):
            return "blocked"
        if self.failures:
            return "unknown"
        return "limited" if arch in self.needs else "runnable"

    def runnable_on(self, architectures: Iterable[str]) -> list[str]:
        return [arch for arch in architectures if self.status(arch) == "runnable"]

    def to_json(
        self, architectures: Sequence[str], prices: Prices | None = None, saving: Fraction | None = None
    ) -> dict[str, Any]:
        cpu, memory = self.requests.cpu_millis, self.requests.memory_bytes
        costs = prices.costs(cpu, memory, self.runnable_on(prices.architectures)) if prices is not None else {}
        out: dict[str, Any] = {
            "namespace": self.workload.namespace,
            "kind": self.workload.kind,
            "name": self.workload.name,
            "pods": self.pods,
            "images": list(self.images),
            "architectures": None if self.architectures is None else list(self.architectures),
            "status": {arch: self.status(arch) for arch in architectures},
            "needs": {arch: self.needs[arch].text for arch in architectures if arch in self.needs},
            "blocking": {arch: list(self.blocking.get(arch, ())) for arch in architectures},
            "cpu_cores": cores(cpu),
            "memory_bytes": memory,
            "monthly_cost": {arch: money(cost) for arch, cost in costs.items()},
            "monthly_saving": None if saving is None else money(saving),
        }
        if self.error is not None:
            out["error"] = self.error
        if self.rollout_state is not None:
            out["rollout"] = self.rollout_state
        return out


@dataclass(frozen=True)
class Totals:
    """Figures for all workloads, and per architecture those that can run there, are blocked, or unknown."""

    all: Figures
    runnable: Mapping[str, Figures]
    blocked: Mapping[str, Figures]
    unknown: Figures
    limited: Mapping[str, Figures] = field(default_factory=dict)
    """Per architecture, the workloads that run only on some of its nodes (a level, some Windows builds)."""

    @classmethod
    def of(cls, workloads: Iterable[WorkloadReport], architectures: Sequence[str]) -> Totals:
        total = Figures()
        unknown = Figures()
        runnable = dict.fromkeys(architectures, Figures())
        blocked = dict.fromkeys(architectures, Figures())
        limited = dict.fromkeys(architectures, Figures())
        for item in workloads:
            figures = item.figures
            total += figures
            if item.failures:
                unknown += figures
            for arch in architectures:
                status = item.status(arch)
                if status == "runnable":
                    runnable[arch] += figures
                elif status == "blocked":
                    blocked[arch] += figures
                elif status == "limited":
                    limited[arch] += figures
        return cls(total, runnable, blocked, unknown, limited)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.all.to_json(),
            "runnable": {arch: figures.to_json() for arch, figures in self.runnable.items()},
            "blocked": {arch: figures.to_json() for arch, figures in self.blocked.items()},
            "unknown": self.unknown.to_json(),
            "limited": {arch: figures.to_json() for arch, figures in self.limited.items()},
        }


@dataclass(frozen=True)
class ImageReport:
    """One image: what it offers, who uses it, and how much it keeps from each architecture."""

    support: ImageSupport
    workloads: tuple[TopOwner, ...]
    blocking: Mapping[str, Figures]
    """Per architecture it does not offer: the workloads it blocks there, with their pods, CPU and memory."""

    @property
    def image(self) -> str:
        return self.support.image

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"image": self.image}
        if self.support.artifact:
            out["artifact"] = self.support.artifact
        elif self.support.architectures is None:
            out["error"] = self.support.error
        else:
            out["architectures"] = sorted(self.support.architectures)
            if self.support.offer is not None and not self.support.offer.plain:
                out["needs"] = describe(self.support.offer, _JSON_SCOPE)
        out["workloads"] = [{"namespace": w.namespace, "kind": w.kind, "name": w.name} for w in self.workloads]
        out["blocking"] = {arch: figures.to_json() for arch, figures in self.blocking.items()}
        return out


@dataclass(frozen=True)
class Report:
    """The whole answer, in a stable order: workloads by namespace, kind, name; images by name."""

    architectures: tuple[str, ...]
    system_os: str
    workloads: tuple[WorkloadReport, ...]
    images: tuple[ImageReport, ...]
    totals: Totals
    namespaces: Mapping[str, Totals] = field(default_factory=dict)
    prices: Prices | None = None
    savings: Savings | None = None
    """Today's saving on the plan's target; ``None`` without prices."""
    plan: Plan | None = None
    """The rebuild plan; ``None`` only when no target is given, priced or of interest (no arm64)."""
    learned: tuple[str, ...] = ()
    """Images an ``exec format error`` proved not to run on an architecture (``noe-learned-platforms``):
    one line each, naming the architecture left out, the digest and the pod that proved it."""

    def top_blockers(self, arch: str, limit: int = 10) -> list[ImageReport]:
        """Images that keep the most CPU from ``arch`` (then the most pods), largest first."""
        ranked = [image for image in self.images if arch in image.blocking]
        ranked.sort(key=lambda i: (-i.blocking[arch].cpu_millis, -i.blocking[arch].pods, i.image))
        return ranked[:limit]

    @property
    def inspected_any(self) -> bool:
        """True when at least one image was inspected (or there was none to inspect)."""
        return not self.images or any(i.support.architectures is not None for i in self.images)

    def to_json(self) -> dict[str, Any]:
        """The ``noe report -o json`` document (shape in ``docs/report.md``)."""
        return {
            "architectures": list(self.architectures),
            "system_os": self.system_os,
            "totals": self.totals.to_json(),
            "namespaces": {name: totals.to_json() for name, totals in self.namespaces.items()},
            "workloads": [
                w.to_json(self.architectures, self.prices, self.saving_of(w.workload)) for w in self.workloads
            ],
            "images": [i.to_json() for i in self.images],
            "savings": None if self.savings is None else self.savings.to_json(),
            "plan": None if self.plan is None else self.plan.to_json(),
            **({"learned": list(self.learned)} if self.learned else {}),
        }

    def saving_of(self, workload: TopOwner) -> Fraction | None:
        """The monthly saving of ``workload`` on the plan's target; ``None`` without prices."""
        return None if self.savings is None else self.savings.by_workload.get(workload, Fraction(0))


_JSON_SCOPE = PlatformScope(("linux", "windows"))
"""Descriptions in the report name the OS (``linux/amd64 v3+``), whatever the cluster's OSes."""


def report_scope(settings: PolicySettings) -> PlatformScope:
    """The webhook's scope, with x86-64 levels always judged: the report tells where images would run."""
    return PlatformScope(settings.system_os, settings.schedulable_archs, levels=True)


def image_support(images: Iterable[str], lookups: Lookups, settings: PolicySettings) -> dict[str, ImageSupport]:
    """Rule 4 applied to each image once."""
    scope = report_scope(settings)
    out: dict[str, ImageSupport] = {}
    for image in images:
        if image not in out:
            out[image] = _support(image, lookups.get(image), scope)
    return out


def _support(image: str, found: Lookup | None, scope: PlatformScope) -> ImageSupport:
    reading = read_image(found, scope)
    if isinstance(reading, LookupFailure):
        return ImageSupport(image, None, reading.reason)
    if isinstance(reading, Artifact):
        return ImageSupport(image, None, artifact=reading.artifact_type)
    return ImageSupport(image, frozenset(reading.architectures), offer=reading)


def _needs(common: Offer, architectures: Sequence[str]) -> dict[str, Need]:
    """Per architecture the workload runs on only some nodes of (no OS where every node will do)."""
    out: dict[str, Need] = {}
    for arch in architectures:
        pairs = Offer({pair: offer for pair, offer in common.items() if pair[1] == arch})
        if pairs and not any(offer.any_build == 1 for offer in pairs.values()):
            level = min(min((lv for _, lv in o.builds), default=o.any_build or 1) for o in pairs.values())
            level = min([level, *(o.any_build for o in pairs.values() if o.any_build is not None)])
            out[arch] = Need(", ".join(describe(pairs, _JSON_SCOPE)), level)
    return out


def _workload_report(
    workload: TopOwner, pods: Sequence[PodEntry], support: Mapping[str, ImageSupport], architectures: Sequence[str]
) -> WorkloadReport:
    images = tuple(dict.fromkeys(image for pod in pods for image in pod.images))
    active = [pod for pod in pods if pod.active]
    requests = sum((pod.requests for pod in active), PodRequests())
    failures = tuple(
        (i, support[i].error or "not inspected")
        for i in images
        if support[i].architectures is None and not support[i].artifact
    )
    known = [support[i] for i in images if support[i].offer is not None]
    common = shared([s.offer for s in known if s.offer is not None]) if known else None
    blocking: dict[str, tuple[str, ...]] = {}
    for arch in architectures:
        lacking = tuple(s.image for s in known if s.architectures is not None and arch not in s.architectures)
        if not lacking and common is not None and arch not in common.architectures:
            # every image offers the architecture, but they share no OS or Windows build on it
            lacking = tuple(s.image for s in known)
        blocking[arch] = lacking
    needs = _needs(common, architectures) if common is not None else {}
    archs: tuple[str, ...] | None = None
    if not failures:
        archs = common.architectures if common is not None else tuple(architectures)
    rollout = Counter(pod.rollout for pod in active if pod.rollout)
    return WorkloadReport(
        workload, len(active), images, archs, blocking, failures, requests, needs=needs, rollout=dict(rollout)
    )


def build_report(
    pods: Iterable[PodEntry],
    lookups: Lookups,
    settings: PolicySettings,
    architectures: Sequence[str] = DEFAULT_ARCHITECTURES,
    *,
    pod_lookups: Callable[[PodEntry], Lookups] | None = None,
) -> Report:
    """Group ``pods`` by workload and judge each against ``architectures`` with the images' lookups.

    ``pod_lookups`` gives each pod's answers as the placement pipeline decided them (its policies'
    declared platforms, learned architectures left out); without it every pod reads ``lookups``. A
    workload reads its first pod's answer for each image. A workload without any image is runnable
    everywhere (the policy leaves its architecture open); its ``architectures`` are then the
    architectures of interest.
    """
    archs = tuple(dict.fromkeys(architectures))
    by_workload: dict[TopOwner, list[PodEntry]] = {}
    for pod in pods:
        by_workload.setdefault(pod.workload, []).append(pod)
    scope = report_scope(settings)
    judged: dict[tuple[str, int], ImageSupport] = {}
    support: dict[str, ImageSupport] = {}

    def supported(image: str, found: Lookup | None) -> ImageSupport:
        key = (image, id(found))
        known = judged.get(key)
        if known is None:
            known = judged[key] = _support(image, found, scope)
        support.setdefault(image, known)  # the image's line: as the first workload (in order) read it
        return known

    workloads = []
    for owner in sorted(by_workload):
        group = by_workload[owner]
        answers: dict[str, Lookup | None] = {}
        for pod in group:
            mine = pod_lookups(pod) if pod_lookups is not None else lookups
            for image in pod.images:
                if image not in answers:
                    answers[image] = mine.get(image)
        own = {image: supported(image, found) for image, found in answers.items()}
        workloads.append(_workload_report(owner, group, own, archs))
    users: dict[str, list[TopOwner]] = {image: [] for image in support}
    blocked_by: dict[str, dict[str, Figures]] = {image: {} for image in support}
    for item in workloads:
        for image in item.images:
            users[image].append(item.workload)
        for arch, blockers in item.blocking.items():
            for image in blockers:
                blocked_by[image][arch] = blocked_by[image].get(arch, Figures()) + item.figures
    images = tuple(
        ImageReport(
            support[image], tuple(users[image]), {a: blocked_by[image][a] for a in archs if a in blocked_by[image]}
        )
        for image in sorted(support)
    )
    namespaces: dict[str, list[WorkloadReport]] = {}
    for item in workloads:
        namespaces.setdefault(item.workload.namespace, []).append(item)
    return Report(
        archs,
        ",".join(settings.system_os),
        tuple(workloads),
        images,
        Totals.of(workloads, archs),
        {name: Totals.of(items, archs) for name, items in sorted(namespaces.items())},
    )
