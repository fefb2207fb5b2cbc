"""How the migration plan is made: the target, today's savings, and the order of rebuilds.

**Target**: ``--target``, else the cheapest priced architecture (vCPU price,
then memory price, then name), else ``arm64``.

**Savings** (with prices): a workload's saving is its monthly cost on the
dearest *other* priced architecture it can run on, less its cost on the target
(:meth:`~noe_core.report.pricing.Prices.saving`); zero when it runs on no other priced
architecture or has an image that could not be inspected. Today's saving is
the sum over the workloads runnable on the target, per namespace and in total.

**Plan**: the workloads blocked on the target whose images could all be
inspected, and every image that blocks one of them (one canonical reference
per image: ``nginx:1.27`` is ``docker.io/library/nginx:1.27``, and
``name:tag@digest`` is ``name@digest``, since the digest is what runs). A
workload becomes runnable once *every* image blocking it is rebuilt, so the
image blocking the most CPU is often not the best first step. Greedily, each
step takes the image whose rebuild makes the most CPU newly runnable; ties go
to the image blocking the most CPU in all, then to the name; when no single
image unlocks anything (every workload waits on two or more) that same
tie-break picks the image blocking the most CPU. The list is complete: every
blocking image appears once. Each step carries the CPU it unlocks and the
runnable CPU and monthly saving once it is done, today's included.

Pure: no I/O. Amounts are exact (:mod:`noe_core.report.pricing`); JSON rounds them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import replace
from fractions import Fraction

from noe_core.errors import InvalidSettings
from noe_core.k8s.owners import TopOwner
from noe_core.report.build import Report, WorkloadReport
from noe_core.report.plan import Plan, PlanStep, Savings, canonical_image
from noe_core.report.pricing import Prices

DEFAULT_TARGET = "arm64"


def choose_target(architectures: Sequence[str], prices: Prices | None, given: str = "") -> str | None:
    """``given``, else the cheapest priced architecture, else ``arm64``; ``None`` when the default is not of interest.

    Raises :class:`InvalidSettings` for a target outside the architectures of interest,
    one without a price when there are prices (its saving could not be computed), and a
    priced architecture outside them (no workload was judged there).
    """
    outside = sorted(set(prices.cpu) - set(architectures)) if prices is not None else []
    if outside:
        raise InvalidSettings(
            f"--prices prices {', '.join(outside)}, not among the architectures of interest "
            f"({', '.join(architectures)}): add it to --cluster-schedulable-archs"
        )
    if given:
        if given not in architectures:
            raise InvalidSettings(
                f"--target {given} is not among the architectures of interest ({', '.join(architectures)}): "
                "add it to --cluster-schedulable-archs"
            )
        if prices is not None and given not in prices.cpu:
            raise InvalidSettings(f"--target {given} has no price: add it to --prices")
        return given
    if prices is not None:
        return prices.cheapest()
    return DEFAULT_TARGET if DEFAULT_TARGET in architectures else None


def workload_saving(item: WorkloadReport, prices: Prices, target: str) -> Fraction:
    """The monthly saving of ``item`` on ``target`` (zero when an image could not be inspected)."""
    if item.failures:
        return Fraction(0)
    runnable = item.runnable_on(prices.architectures)
    return prices.saving(item.requests.cpu_millis, item.requests.memory_bytes, runnable, target)


def savings_of(workloads: Iterable[WorkloadReport], prices: Prices, target: str) -> Savings:
    """Each workload's saving; today's counts those already runnable on ``target``."""
    by_workload: dict[TopOwner, Fraction] = {}
    by_namespace: dict[str, Fraction] = {}
    for item in workloads:
        amount = workload_saving(item, prices, target)
        by_workload[item.workload] = amount
        today = amount if item.status(target) == "runnable" else Fraction(0)
        namespace = item.workload.namespace
        by_namespace[namespace] = by_namespace.get(namespace, Fraction(0)) + today
    ordered = dict(sorted(by_namespace.items()))
    return Savings(target, sum(ordered.values(), Fraction(0)), ordered, by_workload)


def build_plan(workloads: Sequence[WorkloadReport], target: str, savings: Savings | None = None) -> Plan:
    """The greedy rebuild order toward ``target`` (see the module docstring)."""
    runnable = [item for item in workloads if item.status(target) == "runnable"]
    today_cpu = sum(item.requests.cpu_millis for item in runnable)
    today_saving = savings.monthly if savings is not None else None
    waiting: list[WorkloadReport] = []
    left: list[set[str]] = []
    blocks: dict[str, list[int]] = {}
    for item in workloads:
        if item.failures or item.status(target) != "blocked":
            continue
        images = {canonical_image(image) for image in item.blocking[target]}
        for image in images:
            blocks.setdefault(image, []).append(len(waiting))
        waiting.append(item)
        left.append(images)
    total = {image: sum(waiting[i].requests.cpu_millis for i in users) for image, users in blocks.items()}
    gain = dict.fromkeys(blocks, 0)
    for index, images in enumerate(left):
        if len(images) == 1:
            gain[next(iter(images))] += waiting[index].requests.cpu_millis
    # A max-heap by (gain, total CPU blocked, -name); gains only grow, so an entry whose gain is stale is skipped.
    heap = [(-gain[image], -total[image], image) for image in blocks]
    heapq.heapify(heap)
    done: set[str] = set()
    steps: list[PlanStep] = []
    cpu, saving = today_cpu, today_saving
    while heap:
        negative_gain, _, image = heapq.heappop(heap)
        if image in done or -negative_gain != gain[image]:
            continue
        done.add(image)
        unlocked: list[WorkloadReport] = []
        for index in blocks[image]:
            images = left[index]
            images.discard(image)
            if not images:
                unlocked.append(waiting[index])
            elif len(images) == 1:
                last = next(iter(images))
                gain[last] += waiting[index].requests.cpu_millis
                heapq.heappush(heap, (-gain[last], -total[last], last))
        unlocked_cpu = sum(item.requests.cpu_millis for item in unlocked)
        cpu += unlocked_cpu
        if saving is not None and savings is not None:
            saving += sum((savings.by_workload[item.workload] for item in unlocked), Fraction(0))
        steps.append(PlanStep(image, tuple(item.workload for item in unlocked), unlocked_cpu, cpu, saving))
    return Plan(target, today_cpu, today_saving, tuple(steps))


def with_plan(report: Report, *, prices: Prices | None = None, target: str = "") -> Report:
    """``report`` with its prices, today's savings and the rebuild plan toward the chosen target
    (:func:`choose_target`, whose errors it raises)."""
    chosen = choose_target(report.architectures, prices, target)
    if chosen is None:
        return replace(report, prices=prices)
    savings = savings_of(report.workloads, prices, chosen) if prices is not None else None
    return replace(report, prices=prices, savings=savings, plan=build_plan(report.workloads, chosen, savings))
