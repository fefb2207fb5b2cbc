"""``noe report``'s answer: which workloads could run on each architecture, and what blocks the rest.

Built from the cluster's pods (:func:`read_pod`) and one lookup per image, by
:func:`build_report`; pure, no I/O. An image's architectures are filtered by the
placement contract's rule 4 (:func:`noe_core.policy.image_architectures`: system
OS, schedulable architectures, attestations and ``unknown`` entries ignored), so
the report and the webhook never disagree about an image.

Per workload (the pods' top owner) and architecture of interest, the status is

* ``runnable`` — every image offers the architecture;
* ``blocked`` — some inspected image does not (those images are its ``blocking`` list);
* ``unknown`` — nothing inspected blocks it, but an image could not be inspected.

A workload with an image that cannot be inspected is never counted as runnable.
Pods that finished (phase ``Succeeded`` or ``Failed``) hold no resources: their
workload is listed, but they add no pods, CPU or memory. The JSON shape
(:meth:`Report.to_json`) is documented in ``docs/report.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from noe_core.errors import InvalidObject
from noe_core.lookup import LookupFailure, Lookups
from noe_core.owners import Owners, Workload
from noe_core.policy import image_architectures
from noe_core.resources import PodRequests, pod_requests
from noe_core.settings import PolicySettings
from noe_core.workload import POD, read_workload

Status = Literal["runnable", "blocked", "unknown"]
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_ARCHITECTURES = ("amd64", "arm64")


@dataclass(frozen=True)
class PodEntry:
    """What the report needs of one pod."""

    namespace: str
    name: str
    workload: Workload
    images: tuple[str, ...]
    requests: PodRequests
    active: bool
    pull_secrets: tuple[str, ...] = ()


def read_pod(pod: Mapping[str, Any], owners: Owners) -> PodEntry:
    """Read a Pod as the API returns it; raises :class:`InvalidObject` naming the pod."""
    if not isinstance(pod, Mapping):
        raise InvalidObject(f"a Pod must be an object, not {type(pod).__name__}")
    workload = owners.top_owner(pod)
    meta = pod["metadata"]
    label = f"Pod {workload.namespace}/{meta['name']}"
    try:
        view = read_workload(pod, POD)
        requests = pod_requests(view.spec)
    except InvalidObject as exc:
        raise InvalidObject(f"{label}: {exc}") from None
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return PodEntry(
        workload.namespace,
        str(meta["name"]),
        workload,
        view.images,
        requests,
        phase not in FINISHED_PHASES,
        view.pull_secrets,
    )


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


def cores(cpu_millis: int) -> float | int:
    """Millicores as cores for JSON: ``1500`` → ``1.5``, ``2000`` → ``2``."""
    return cpu_millis // 1000 if cpu_millis % 1000 == 0 else cpu_millis / 1000


@dataclass(frozen=True)
class ImageSupport:
    """One image after rule 4: the architectures it offers, or why it cannot be inspected."""

    image: str
    architectures: frozenset[str] | None
    error: str | None = None


@dataclass(frozen=True)
class WorkloadReport:
    """One workload and where it could run."""

    workload: Workload
    pods: int
    images: tuple[str, ...]
    architectures: tuple[str, ...] | None
    """Architectures every image offers; ``None`` when an image could not be inspected."""
    blocking: Mapping[str, tuple[str, ...]]
    """Per architecture of interest, the inspected images that do not offer it."""
    failures: tuple[tuple[str, str], ...]
    """(image, reason) for each image that could not be inspected."""
    requests: PodRequests

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
        return "unknown" if self.failures else "runnable"

    def to_json(self, architectures: Sequence[str]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.workload.namespace,
            "kind": self.workload.kind,
            "name": self.workload.name,
            "pods": self.pods,
            "images": list(self.images),
            "architectures": None if self.architectures is None else list(self.architectures),
            "status": {arch: self.status(arch) for arch in architectures},
            "blocking": {arch: list(self.blocking.get(arch, ())) for arch in architectures},
            "cpu_cores": cores(self.requests.cpu_millis),
            "memory_bytes": self.requests.memory_bytes,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class Totals:
    """Figures for all workloads, and per architecture those that can run there, are blocked, or unknown."""

    all: Figures
    runnable: Mapping[str, Figures]
    blocked: Mapping[str, Figures]
    unknown: Figures

    @classmethod
    def of(cls, workloads: Iterable[WorkloadReport], architectures: Sequence[str]) -> Totals:
        total = Figures()
        unknown = Figures()
        runnable = dict.fromkeys(architectures, Figures())
        blocked = dict.fromkeys(architectures, Figures())
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
        return cls(total, runnable, blocked, unknown)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.all.to_json(),
            "runnable": {arch: figures.to_json() for arch, figures in self.runnable.items()},
            "blocked": {arch: figures.to_json() for arch, figures in self.blocked.items()},
            "unknown": self.unknown.to_json(),
        }


@dataclass(frozen=True)
class ImageReport:
    """One image: what it offers, who uses it, and how much it keeps from each architecture."""

    support: ImageSupport
    workloads: tuple[Workload, ...]
    blocking: Mapping[str, Figures]
    """Per architecture it does not offer: the workloads it blocks there, with their pods, CPU and memory."""

    @property
    def image(self) -> str:
        return self.support.image

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"image": self.image}
        if self.support.architectures is None:
            out["error"] = self.support.error
        else:
            out["architectures"] = sorted(self.support.architectures)
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
            "workloads": [w.to_json(self.architectures) for w in self.workloads],
            "images": [i.to_json() for i in self.images],
        }


def image_support(images: Iterable[str], lookups: Lookups, settings: PolicySettings) -> dict[str, ImageSupport]:
    """Rule 4 applied to each image once."""
    out: dict[str, ImageSupport] = {}
    for image in images:
        if image in out:
            continue
        found = image_architectures(image, lookups, settings)
        if isinstance(found, LookupFailure):
            out[image] = ImageSupport(image, None, found.reason)
        else:
            out[image] = ImageSupport(image, found)
    return out


def _workload_report(
    workload: Workload, pods: Sequence[PodEntry], support: Mapping[str, ImageSupport], architectures: Sequence[str]
) -> WorkloadReport:
    images = tuple(dict.fromkeys(image for pod in pods for image in pod.images))
    active = [pod for pod in pods if pod.active]
    requests = sum((pod.requests for pod in active), PodRequests())
    failures = tuple((i, support[i].error or "not inspected") for i in images if support[i].architectures is None)
    known = [support[i] for i in images if support[i].architectures is not None]
    blocking = {
        arch: tuple(s.image for s in known if s.architectures is not None and arch not in s.architectures)
        for arch in architectures
    }
    common: tuple[str, ...] | None = None
    if not failures:
        sets = [s.architectures for s in known if s.architectures is not None]
        common = tuple(sorted(frozenset.intersection(*sets))) if sets else tuple(architectures)
    return WorkloadReport(workload, len(active), images, common, blocking, failures, requests)


def build_report(
    pods: Iterable[PodEntry],
    lookups: Lookups,
    settings: PolicySettings,
    architectures: Sequence[str] = DEFAULT_ARCHITECTURES,
) -> Report:
    """Group ``pods`` by workload and judge each against ``architectures`` with the images' lookups.

    A workload without any image is runnable everywhere (the policy leaves its
    architecture open); its ``architectures`` are then the architectures of interest.
    """
    archs = tuple(dict.fromkeys(architectures))
    by_workload: dict[Workload, list[PodEntry]] = {}
    for pod in pods:
        by_workload.setdefault(pod.workload, []).append(pod)
    support = image_support((i for group in by_workload.values() for p in group for i in p.images), lookups, settings)
    workloads = tuple(_workload_report(w, by_workload[w], support, archs) for w in sorted(by_workload))
    users: dict[str, list[Workload]] = {image: [] for image in support}
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
        settings.system_os,
        workloads,
        images,
        Totals.of(workloads, archs),
        {name: Totals.of(items, archs) for name, items in sorted(namespaces.items())},
    )
