"""The terminal report, and the number formats the table and the HTML page share."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from noe_core.k8s.resources import cores
from noe_core.report.build import Report, WorkloadReport
from noe_core.report.pricing import money


def human_bytes(value: int) -> str:
    """``1610612736`` → ``1.5Gi`` (binary units, as memory requests are usually written)."""
    amount = float(value)
    for unit in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
        if amount < 1024 or unit == "Pi":
            return f"{amount:.0f}{unit}" if amount == int(amount) else f"{amount:.1f}{unit}"
        amount /= 1024
    return f"{value}"  # pragma: no cover - the loop always returns


def human_cores(cpu_millis: int) -> str:
    return f"{cores(cpu_millis):g}"


def human_money(amount: Fraction | None) -> str:
    """``Fraction(12345, 1000)`` → ``12.35``; ``-`` without prices (no currency: the prices' own)."""
    return "-" if amount is None else f"{money(amount):,.2f}"


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


_MARK = {"runnable": "yes", "blocked": "no", "unknown": "?"}


def _mark(item: WorkloadReport, arch: str) -> str:
    """``yes``/``no``/``?``, or what the nodes of ``arch`` need when only some can run it (``v3+``)."""
    status = item.status(arch)
    return item.needs[arch].short if status == "limited" else _MARK[status]


def _table(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


def render_table(report: Report, *, top: int = 10) -> str:
    """The terminal report: workloads, totals per namespace and architecture, the top blocking images."""
    archs = report.architectures
    out: list[str] = []
    rows: list[list[str]] = [
        ["NAMESPACE", "KIND", "NAME", "PODS", "CPU", "MEMORY", *(a.upper() for a in archs), "BLOCKED BY / ERROR"]
    ]
    for item in report.workloads:
        why = item.error or "; ".join(
            f"{arch}: {', '.join(item.blocking[arch])}" for arch in archs if item.blocking.get(arch)
        )
        rows.append(
            [
                item.workload.namespace,
                item.workload.kind,
                item.workload.name,
                str(item.pods),
                human_cores(item.requests.cpu_millis),
                human_bytes(item.requests.memory_bytes),
                *(_mark(item, arch) for arch in archs),
                why,
            ]
        )
    out += _table(rows, frozenset({3, 4, 5}))
    out.append("")
    total = report.totals.all
    rows = [["ARCH", "WORKLOADS", "PODS", "CPU", "CPU%", "MEMORY", "BLOCKED CPU", "UNKNOWN CPU"]]
    for arch in archs:
        ok = report.totals.runnable[arch]
        rows.append(
            [
                arch,
                f"{ok.workloads}/{total.workloads}",
                f"{ok.pods}/{total.pods}",
                f"{human_cores(ok.cpu_millis)}/{human_cores(total.cpu_millis)}",
                percent(ok.cpu_millis, total.cpu_millis),
                human_bytes(ok.memory_bytes),
                human_cores(report.totals.blocked[arch].cpu_millis),
                human_cores(report.totals.unknown.cpu_millis),
            ]
        )
    out.append("Runnable today, cluster totals (CPU in cores):")
    out += _table(rows, frozenset({1, 2, 3, 4, 5, 6, 7}))
    out.append("")
    savings = report.savings
    rows = [["NAMESPACE", "WORKLOADS", "PODS", "CPU", *(f"{a.upper()} CPU" for a in archs), "UNKNOWN CPU"]]
    if savings is not None:
        rows[0].append(f"SAVING/MONTH ON {savings.target.upper()}")
    for name, totals in report.namespaces.items():
        shares = [
            f"{human_cores(totals.runnable[a].cpu_millis)} "
            f"({percent(totals.runnable[a].cpu_millis, totals.all.cpu_millis)})"
            for a in archs
        ]
        rows.append(
            [
                name,
                str(totals.all.workloads),
                str(totals.all.pods),
                human_cores(totals.all.cpu_millis),
                *shares,
                human_cores(totals.unknown.cpu_millis),
                *([human_money(savings.by_namespace.get(name))] if savings is not None else []),
            ]
        )
    out.append("Per namespace (CPU that can run on each architecture):")
    out += _table(rows, frozenset(range(1, 6 + len(archs))))
    for arch in archs:
        blockers = report.top_blockers(arch, top)
        if not blockers:
            continue
        out.append("")
        out.append(f"Images that block the most CPU from {arch}:")
        rows = [["IMAGE", "CPU", "WORKLOADS", "PODS", "OFFERS"]]
        for image in blockers:
            figures = image.blocking[arch]
            offers = ", ".join(sorted(image.support.architectures or ())) or "none usable"
            rows.append(
                [image.image, human_cores(figures.cpu_millis), str(figures.workloads), str(figures.pods), offers]
            )
        out += _table(rows, frozenset({1, 2, 3}))
    out += _rollouts(report)
    if report.learned:
        out += [
            "",
            "Learned from exec format errors (noe-learned-platforms):",
            *(f"  {line}" for line in report.learned),
        ]
    out += _plan(report)
    failed = [image for image in report.images if image.support.architectures is None]
    if failed:
        out.append("")
        out.append(f"Images that could not be inspected ({len(failed)}):")
        out += [f"  {image.image}: {image.support.error}" for image in failed]
    return "\n".join(out) + "\n"


def _rollouts(report: Report) -> list[str]:
    """Workloads in a placement policy's rollout, as their pods' ``arch.noe.adevinta.com/rollout`` labels say."""
    rows = [["NAMESPACE", "KIND", "NAME", "ROLLOUT TO", "COHORT PODS", "CONTROL PODS"]]
    for item in report.workloads:
        state = item.rollout_state
        if state is not None:
            w = item.workload
            arch = state["architecture"] or "-"
            rows.append([w.namespace, w.kind, w.name, arch, str(state["cohort"]), str(state["control"])])
    if len(rows) == 1:
        return []
    return ["", "Rollouts (pods by group):", *_table(rows, frozenset({4, 5}))]


def _plan(report: Report) -> list[str]:
    """The savings today and the whole rebuild plan, with newer-tag hints."""
    plan = report.plan
    if plan is None:
        return []
    out = [""]
    today = f"{human_cores(plan.runnable_cpu_millis)} cores runnable today"
    if plan.monthly_saving is not None:
        today += f", saving {human_money(plan.monthly_saving)} a month"
    if not plan.steps:
        out.append(f"Nothing blocks {plan.target} among the workloads whose images could all be inspected ({today}).")
        return out
    out.append(f"Rebuild plan toward {plan.target} ({today}), best first:")
    rows = [["STEP", "IMAGE", "UNLOCKS", "CPU", "RUNNABLE CPU", "SAVING/MONTH", "OR UPGRADE"]]
    for number, step in enumerate(plan.steps, 1):
        hint = f"to {step.upgrade.tag}" if step.upgrade is not None else ""
        rows.append(
            [
                str(number),
                step.image,
                str(len(step.unlocked)),
                human_cores(step.unlocked_cpu_millis),
                human_cores(step.runnable_cpu_millis),
                human_money(step.monthly_saving),
                hint,
            ]
        )
    return out + _table(rows, frozenset({0, 2, 3, 4, 5}))
