"""``noe report --html``: one self-contained page a person who never saw noe can read.

The page comes from a Jinja2 template (``templates/report.html.j2``, autoescaped)
and its charts are SVG drawn by pygal and written inline. Nothing on the page
is fetched: no script (pygal's tooltip script, loaded from a CDN by default, is
turned off), no web font, no image file; the favicon is an empty data URL so a
browser does not ask the server for one.
"""

from __future__ import annotations

from typing import Any

import jinja2
import pygal
from markupsafe import Markup
from pygal.etree import etree as pygal_etree
from pygal.style import Style

from noe_core.report.build import Report, Totals
from noe_web.report.table import human_bytes, human_cores, human_money, percent

RUNNABLE, BLOCKED, UNKNOWN = "#2e7d32", "#c62828", "#9e9e9e"
SAVING = "#1565c0"
_MAX_STEP_LABELS = 40
_FONT = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', Arial, sans-serif"
_MAX_NAMESPACES = 40
_IMAGE_LABEL = 56


def _svg(chart: Any) -> Markup:
    """The chart as inline SVG, without scripts.

    pygal always embeds a ``<script>`` holding its tooltip configuration; with its
    tooltip script off it does nothing, so it is taken out of the tree. The XML
    serialiser escapes every label and title, which makes the result safe markup.
    """
    tree = chart.render_tree()
    for parent in tree.iter():
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return Markup(pygal_etree.tostring(tree, encoding="unicode"))  # noqa: S704 - escaped by the XML serialiser


def _style(*colors: str) -> Style:
    return Style(
        background="white",
        plot_background="white",
        foreground="#222",
        foreground_strong="#111",
        foreground_subtle="#666",
        colors=colors,
        font_family=_FONT,
        label_font_family=_FONT,
        major_label_font_family=_FONT,
        title_font_family=_FONT,
        legend_font_family=_FONT,
        value_font_family=_FONT,
        label_font_size=12,
        major_label_font_size=12,
        legend_font_size=13,
        title_font_size=15,
        value_font_size=11,
    )


def _common(height: int) -> dict[str, Any]:
    return {
        "js": [],  # pygal's default loads its tooltip script from a CDN
        "disable_xml_declaration": True,
        "width": 900,
        "height": height,
        "legend_at_bottom": True,
        "legend_at_bottom_columns": 3,
        "show_y_guides": False,
        "print_values": False,
        "truncate_label": _IMAGE_LABEL,
        "truncate_legend": -1,
        "margin": 12,
    }


def namespace_chart(report: Report, arch: str) -> Markup:
    """CPU per namespace that could run on ``arch``, that is blocked, and that is unknown (stacked)."""
    rows = sorted(report.namespaces.items(), key=lambda item: (-item[1].all.cpu_millis, item[0]))
    shown: list[tuple[str, Totals]] = rows[:_MAX_NAMESPACES]
    if len(rows) > _MAX_NAMESPACES:
        rest = rows[_MAX_NAMESPACES:]
        label = f"{len(rest)} other namespaces"
        shown.append(
            (
                label,
                Totals.of([w for w in report.workloads if w.workload.namespace in dict(rest)], report.architectures),
            )
        )
    shown.reverse()  # pygal draws the first label at the bottom: the largest namespace goes on top
    chart = pygal.HorizontalStackedBar(style=_style(RUNNABLE, BLOCKED, UNKNOWN), **_common(120 + 22 * len(shown)))
    chart.title = f"Requested CPU per namespace (cores): can it run on {arch}?"
    chart.x_labels = [name for name, _ in shown]
    runnable = [t.runnable[arch].cpu_millis / 1000 for _, t in shown]
    blocked = [t.blocked[arch].cpu_millis / 1000 for _, t in shown]
    unknown = [(t.all.cpu_millis - t.runnable[arch].cpu_millis - t.blocked[arch].cpu_millis) / 1000 for _, t in shown]
    chart.add(f"runnable on {arch}", runnable)
    chart.add("blocked by an image", blocked)
    chart.add("unknown (an image not inspected)", unknown)
    return _svg(chart)


def blockers_chart(report: Report, arch: str, top: int) -> Markup | None:
    """The images that keep the most CPU from ``arch``; ``None`` when nothing blocks it."""
    blockers = report.top_blockers(arch, top)
    if not blockers:
        return None
    blockers.reverse()
    chart = pygal.HorizontalBar(style=_style(BLOCKED), show_legend=False, **_common(100 + 30 * len(blockers)))
    chart.title = f"Images that block the most CPU from {arch} (cores)"
    chart.x_labels = [image.image for image in blockers]
    chart.add("CPU blocked", [image.blocking[arch].cpu_millis / 1000 for image in blockers])
    return _svg(chart)


def plan_chart(report: Report) -> Markup | None:
    """Runnable CPU on the target (and the monthly saving) after each rebuild, today first; ``None`` without steps."""
    plan = report.plan
    if plan is None or not plan.steps:
        return None
    labels = ["today", *(str(number) for number in range(1, len(plan.steps) + 1))]
    options = _common(420)
    options["legend_at_bottom_columns"] = 2
    chart = pygal.Line(
        style=_style(RUNNABLE, SAVING),
        fill=False,
        dots_size=3,
        x_title="images rebuilt or upgraded, in the plan's order",
        show_minor_x_labels=len(labels) <= _MAX_STEP_LABELS,
        x_labels_major_every=max(1, len(labels) // 10),
        value_formatter=lambda value: f"{value:,.0f}",
        **options,
    )
    chart.title = f"Toward {plan.target}: what each rebuild makes runnable"
    chart.x_labels = labels
    chart.add(
        f"CPU runnable on {plan.target} (cores)",
        [plan.runnable_cpu_millis / 1000, *(step.runnable_cpu_millis / 1000 for step in plan.steps)],
    )
    if plan.monthly_saving is not None:
        savings = [plan.monthly_saving, *(step.monthly_saving for step in plan.steps)]
        chart.add("saving a month (right axis)", [float(amount or 0) for amount in savings], secondary=True)
    return _svg(chart)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("noe_web.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(cores=human_cores, memory=human_bytes, money=human_money)
    env.globals.update(percent=percent)
    return env


def render_html(report: Report, *, source: str, generated: str, top: int = 10) -> str:
    """The whole page as a string."""
    charts = [
        {"arch": arch, "namespaces": namespace_chart(report, arch), "blockers": blockers_chart(report, arch, top)}
        for arch in report.architectures
    ]
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report,
        source=source,
        generated=generated,
        charts=charts,
        plan_chart=plan_chart(report),
        top=top,
        colors={"runnable": RUNNABLE, "blocked": BLOCKED, "unknown": UNKNOWN, "saving": SAVING},
    )
