"""``noe report -o csv``: one row per workload, for a spreadsheet.

Columns: ``namespace, kind, name, pods, cpu_cores, memory_bytes``, then per
architecture of interest ``runnable_<arch>`` (``yes``, ``no`` or ``unknown``)
and ``blocking_images_<arch>`` (the images that do not offer it, separated by
spaces), ``error`` (images that could not be inspected, and why), and with
prices ``monthly_cost_<arch>`` per priced architecture (empty where the workload
cannot run) and ``monthly_saving`` on the plan's target. Text that a
spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@`` first) is
prefixed with ``'``: an owner's kind or a registry's error message come from
outside.
"""

from __future__ import annotations

import csv
import io

from noe_core.k8s.resources import cores
from noe_core.report.build import Report, WorkloadReport
from noe_core.report.pricing import money

_MARK = {"runnable": "yes", "blocked": "no", "unknown": "unknown"}


def _mark(item: WorkloadReport, arch: str) -> str:
    """``yes``/``no``/``unknown``, or ``limited: <what its nodes need>`` (``limited: linux/amd64 v3+``)."""
    status = item.status(arch)
    return f"limited: {item.needs[arch].text}" if status == "limited" else _MARK[status]


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _text(value: str) -> str:
    return f"'{value}" if value.startswith(_FORMULA) else value


def render_csv(report: Report) -> str:
    """The CSV document, header first, rows in the report's order (namespace, kind, name)."""
    archs = report.architectures
    priced = report.prices.architectures if report.prices is not None else ()
    header = [
        "namespace",
        "kind",
        "name",
        "pods",
        "cpu_cores",
        "memory_bytes",
        *(f"runnable_{arch}" for arch in archs),
        *(f"blocking_images_{arch}" for arch in archs),
        "error",
        *(f"monthly_cost_{arch}" for arch in priced),
        *(["monthly_saving"] if report.savings is not None else []),
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for item in report.workloads:
        cpu, memory = item.requests.cpu_millis, item.requests.memory_bytes
        row = [
            _text(item.workload.namespace),
            _text(item.workload.kind),
            _text(item.workload.name),
            str(item.pods),
            str(cores(cpu)),
            str(memory),
            *(_mark(item, arch) for arch in archs),
            *(_text(" ".join(item.blocking.get(arch, ()))) for arch in archs),
            _text(item.error or ""),
        ]
        if report.prices is not None:
            costs = report.prices.costs(cpu, memory, item.runnable_on(priced))
            row += [f"{money(costs[arch]):.2f}" if arch in costs else "" for arch in priced]
        saving = report.saving_of(item.workload)
        if saving is not None:
            row.append(f"{money(saving):.2f}")
        writer.writerow(row)
    return out.getvalue()
