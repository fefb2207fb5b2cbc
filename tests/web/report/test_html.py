"""``noe report --html``: one self-contained page, opened in headless Chromium.

The page must show its charts (inline SVG: pixels of the runnable and blocked
colours in the screenshot), carry the headline numbers of the JSON report, and
make no network request at all — checked against a control page that does.
"""

from __future__ import annotations

import html.parser
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.support.browser import open_page
from tests.support.cli import run_cli
from tests.support.cluster import generate

CHARTS_SCRIPT = """
[...document.querySelectorAll('svg.pygal-chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  return {width: box.width, height: box.height, bars: svg.querySelectorAll('.rect').length,
          dots: svg.querySelectorAll('.dot').length, title: (svg.querySelector('.title') || {}).textContent || ''};
})
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("html")
    cluster, platforms, _ = generate(directory, pods=1200, namespaces=12)
    out = directory / "report.html"
    code, stdout, err = run_cli(
        *["report", "-f", str(cluster), "--platforms", str(platforms), "--html", str(out), "-o", "json"],
        *["--prices", "amd64=0.0464,arm64=0.0368"],
    )
    assert code == 0, err
    return out, json.loads(stdout)


class _Links(html.parser.HTMLParser):
    """Every attribute that could make a browser fetch something, and every script."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        for name, value in attrs:
            if (
                name in ("src", "href", "xlink:href", "srcset", "poster", "data")
                and value
                and not value.startswith(("data:", "#"))
            ):
                self.fetches.append(f"{tag} {name}={value}")


def test_page_references_nothing_outside_itself(page: tuple[Path, dict[str, Any]]) -> None:
    text = page[0].read_text()
    parser = _Links()
    parser.feed(text)
    assert parser.fetches == [] and parser.scripts == 0
    assert "@import" not in text and "url(" not in text
    assert text.count("<svg") == 5  # the plan; per architecture: namespaces, and the images that block it


def test_chromium_shows_the_charts_and_makes_no_request(page: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, report = page
    url = path.as_uri()
    result = open_page(url, CHARTS_SCRIPT)
    assert result.requests == [url], result.requests  # the document itself, from the file: nothing else

    plan_chart, *charts = result.value
    assert plan_chart["title"] == "Toward arm64: what each rebuild makes runnable"
    # one point per step and today, for the runnable CPU and for the saving
    assert plan_chart["dots"] == 2 * (len(report["plan"]["steps"]) + 1) and plan_chart["width"] > 600
    assert len(charts) == 4
    assert all(chart["width"] > 600 and chart["height"] > 150 and chart["bars"] > 0 for chart in charts), charts
    assert [chart["title"] for chart in charts] == [
        "Requested CPU per namespace (cores): can it run on amd64?",
        "Images that block the most CPU from amd64 (cores)",
        "Requested CPU per namespace (cores): can it run on arm64?",
        "Images that block the most CPU from arm64 (cores)",
    ]
    # one stacked bar per namespace and series, one bar per blocking image
    assert charts[0]["bars"] == 3 * len(report["namespaces"])

    shot = tmp_path / "report.png"
    shot.write_bytes(result.png)
    image = Image.open(io.BytesIO(result.png)).convert("RGB")
    assert image.width == 1280 and image.height > 2000
    greens = reds = 0
    data = image.tobytes()
    for r, g, b in zip(data[0::3], data[1::3], data[2::3], strict=True):
        if g > r + 40 and g > b + 40:
            greens += 1
        elif r > g + 60 and r > b + 60:
            reds += 1
    assert greens > 20_000 and reds > 20_000, (greens, reds)  # the bars are drawn, not just their legend


def test_headline_numbers_are_the_reports(page: tuple[Path, dict[str, Any]]) -> None:
    path, report = page
    text = path.read_text()
    totals = report["totals"]
    arm = totals["runnable"]["arm64"]
    share = f"{100 * arm['cpu_cores'] / totals['cpu_cores']:.0f}%"
    assert share in text
    assert f"<strong>{arm['workloads']}</strong> of {totals['workloads']} workloads" in text
    for workload in report["workloads"][:50]:
        assert workload["name"] in text
    assert f"{report['savings']['monthly']:,.2f}" in text  # the saving today, in its card
    plan = report["plan"]
    table = text.split("<h2>Rebuild plan toward arm64</h2>", 1)[1].split("</table>", 1)[0]
    rows = [row for row in table.split("<tr>")[2:]]
    assert len(rows) == len(plan["steps"])  # the whole plan
    for row, step in zip(rows, plan["steps"], strict=True):
        assert f"<td>{step['image']}</td>" in row and f"{step['monthly_saving']:,.2f}" in row


def test_the_detector_sees_a_page_that_fetches(tmp_path: Path) -> None:
    """Control: the same harness does report requests when a page makes them."""
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><link rel="icon" href="data:,"><img src="http://127.0.0.1:9/pixel.png">'
        '<link rel="stylesheet" href="https://cdn.example.invalid/style.css"><p>control</p>'
    )
    result = open_page(control.as_uri())
    assert control.as_uri() in result.requests
    assert "http://127.0.0.1:9/pixel.png" in result.requests
    assert "https://cdn.example.invalid/style.css" in result.requests
