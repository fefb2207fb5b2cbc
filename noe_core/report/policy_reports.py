"""The report as PolicyReports (``wgpolicyk8s.io/v1alpha2``), where platform teams already look.

One PolicyReport per namespace, named ``noe-<target>``, with one result per
workload (Kyverno's Policy Reporter UI and ``kubectl get policyreport`` read
them):

* ``pass`` — runnable on the target: every image offers it;
* ``fail`` — blocked on the target; the message names the images that do not
  offer it (also when another image could not be inspected: what is known to
  block is what a team can act on);
* ``error`` — an image could not be inspected, and nothing inspected blocks it;
  the message names the image and why.

The summary counts the results. Properties (strings, as the CRD wants) carry
the workload's pods and requests, the blocking images with their newer-tag
hints, and with prices its monthly cost and saving. Ready for ``kubectl
apply``: no status, no server-set field. Pure: the time is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from noe_core.k8s.resources import cores
from noe_core.report.build import Report, WorkloadReport
from noe_core.report.plan import Upgrade, canonical_image
from noe_core.report.pricing import money

API_VERSION = "wgpolicyk8s.io/v1alpha2"
KIND = "PolicyReport"
POLICY = "noe-architecture"
SOURCE = "noe"
CATEGORY = "CPU architecture"
MANAGED_BY = {"app.kubernetes.io/managed-by": "noe"}
OUTCOMES = ("pass", "fail", "warn", "error", "skip")
API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "Pod": "v1",
}


def report_name(target: str) -> str:
    """The PolicyReport's name in each namespace: one report per target architecture."""
    return f"noe-{target}"


def _resource(item: WorkloadReport) -> dict[str, str]:
    workload = item.workload
    ref = {"kind": workload.kind, "name": workload.name, "namespace": workload.namespace}
    version = API_VERSIONS.get(workload.kind)
    return {"apiVersion": version, **ref} if version else ref


def _outcome(item: WorkloadReport, target: str) -> tuple[str, str]:
    status = item.status(target)
    if status == "runnable":
        return "pass", f"runnable on {target}: every image offers it"
    if status == "blocked":
        message = f"blocked on {target} by {', '.join(item.blocking[target])}"
        return "fail", message if item.error is None else f"{message}; {item.error}"
    if status == "limited":
        return "warn", f"runnable only on some {target} nodes: {item.needs[target].text}"
    return "error", item.error or "not inspected"


def result(
    item: WorkloadReport,
    report: Report,
    target: str,
    *,
    seconds: int,
    upgrades: Mapping[str, Upgrade],
) -> dict[str, Any]:
    """One workload's result on ``target``."""
    outcome, message = _outcome(item, target)
    properties = {
        "pods": str(item.pods),
        "cpu": f"{cores(item.requests.cpu_millis)}",
        "memory_bytes": str(item.requests.memory_bytes),
    }
    blocking = item.blocking.get(target, ())
    if blocking:
        properties["blocking_images"] = ", ".join(blocking)
        hints = [(image, upgrades.get(canonical_image(image))) for image in blocking]
        shown = [f"{image} → {hint.tag}" for image, hint in hints if hint is not None]
        if shown:
            properties["upgrades"] = ", ".join(shown)
    if report.prices is not None:
        cpu, memory = item.requests.cpu_millis, item.requests.memory_bytes
        for arch, cost in report.prices.costs(cpu, memory, item.runnable_on(report.prices.architectures)).items():
            properties[f"monthly_cost.{arch}"] = f"{money(cost):.2f}"
        saving = report.saving_of(item.workload)
        if saving is not None:
            properties["monthly_saving"] = f"{money(saving):.2f}"
    return {
        "source": SOURCE,
        "policy": POLICY,
        "rule": f"runs-on-{target}",
        "category": CATEGORY,
        "result": outcome,
        "scored": True,
        "message": message,
        "timestamp": {"seconds": seconds, "nanos": 0},
        "resources": [_resource(item)],
        "properties": properties,
    }


def summary(results: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    for item in results:
        counts[item["result"]] += 1
    return counts


def policy_reports(report: Report, target: str, *, seconds: int) -> list[dict[str, Any]]:
    """One PolicyReport per namespace of ``report``, judged on ``target``, stamped with ``seconds`` (Unix time)."""
    upgrades: dict[str, Upgrade] = {}
    if report.plan is not None and report.plan.target == target:
        upgrades = {step.image: step.upgrade for step in report.plan.steps if step.upgrade is not None}
    by_namespace: dict[str, list[dict[str, Any]]] = {name: [] for name in report.namespaces}
    for item in report.workloads:
        by_namespace.setdefault(item.workload.namespace, []).append(
            result(item, report, target, seconds=seconds, upgrades=upgrades)
        )
    return [namespace_report(namespace, target, results) for namespace, results in sorted(by_namespace.items())]


def namespace_report(namespace: str, target: str, results: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The PolicyReport of ``namespace`` holding ``results`` (none: a namespace whose workloads went away)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": report_name(target), "namespace": namespace, "labels": dict(MANAGED_BY)},
        "summary": summary(results),
        "results": list(results),
    }


def same_results(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two PolicyReports say the same thing, whenever each result was found (timestamps aside)."""

    def meaning(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
        results = doc.get("results")
        if not isinstance(results, list):
            return []
        return [{k: v for k, v in r.items() if k != "timestamp"} for r in results if isinstance(r, Mapping)]

    return meaning(old) == meaning(new)
