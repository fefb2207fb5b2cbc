"""The chart's alerts and Grafana dashboard, checked by Prometheus' own promtool.

The PrometheusRule is rendered by the real helm; ``promtool check rules`` parses
it, ``promtool test rules`` runs the alert unit tests of
tests/fixtures/alerts/noe-alerts.test.yaml against it, and every dashboard
query is parsed by promtool as a recording rule. Every metric the alerts and
the dashboard read is one that noe exports (or the API server's, or ``up``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_web.controller.metrics import ControllerMetrics
from noe_web.metrics import Metrics
from tests.support.helm import run_helm
from tests.support.paths import ROOT

pytestmark = pytest.mark.deploy

CHART = ROOT / "deploy" / "helm" / "noe"
FIXTURE = ROOT / "tests" / "fixtures" / "alerts" / "noe-alerts.test.yaml"
RUNBOOKS = ROOT / "docs" / "runbooks"
NAMESPACE = "noe-system"
REQUIRED_ALERTS = {
    "NoeWebhookDown",
    "NoeWebhookFailOpen",
    "NoeAdmissionLatencyHigh",
    "NoeLookupFailureRatioHigh",
    "NoeSharedCacheUnreachable",
    "NoeDenialRatioSpike",
    "NoeRegistryRateLimitLow",
    "NoePolicyWatchStale",
    "NoeRolloutRolledBack",
    "NoePlacementUnsatisfiable",
}
# Grafana's variables, replaced by what Prometheus would receive.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$job": "noe",
    "$namespace": NAMESPACE,
}


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool not found: `python -m tests.support.system_deps` installs Debian's prometheus")
    return subprocess.run([binary, *args], capture_output=True, text=True, check=False, timeout=120, cwd=cwd)


@cache
def rendered() -> tuple[dict[str, Any], ...]:
    out = run_helm(
        [
            "template",
            "noe",
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--set",
            "prometheusRule.enabled=true",
            "--set",
            "grafanaDashboard.enabled=true",
        ]
    ).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d)


def rule_groups() -> list[dict[str, Any]]:
    [rule] = [d for d in rendered() if d["kind"] == "PrometheusRule"]
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule_groups() for r in g["rules"] if "alert" in r}


def dashboard() -> dict[str, Any]:
    [cm] = [d for d in rendered() if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    board: dict[str, Any] = json.loads(cm["data"]["noe.json"])
    return board


def dashboard_queries() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard()["panels"] for t in p.get("targets", [])]


def exported_series_names() -> set[str]:
    """Every sample name noe's /metrics (the webhook's and noe controller's) can show (histograms'
    _bucket/_sum/_count included)."""
    names: set[str] = set()
    for family in [*Metrics().registry.collect(), *ControllerMetrics().registry.collect()]:
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        elif family.type == "counter":
            names |= {family.name + "_total"}
        else:
            names.add(family.name)
    return names


def metric_names(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    return set(re.findall(r"\b(?:noe|apiserver)_[a-z_]+\b", without_strings)) | set(
        re.findall(r"\bup(?=\s*\{)", without_strings)
    )


# --- the alerts -----------------------------------------------------------------------------------


def test_promtool_checks_the_rendered_rules(tmp_path: Path) -> None:
    path = tmp_path / "noe-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups()}))
    proc = promtool("check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in proc.stdout


def test_alert_unit_tests_pass(tmp_path: Path) -> None:
    (tmp_path / "noe-rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    shutil.copy(FIXTURE, tmp_path / FIXTURE.name)
    proc = promtool("test", "rules", FIXTURE.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_is_unit_tested_firing_and_silent() -> None:
    tests = yaml.safe_load(FIXTURE.read_text())["tests"]
    firing = {c["alertname"] for t in tests for c in t.get("alert_rule_test", []) if c.get("exp_alerts")}
    silent = {c["alertname"] for t in tests for c in t.get("alert_rule_test", []) if not c.get("exp_alerts")}
    assert set(alerts()) == firing == silent


def test_the_issue_alerts_exist_and_each_has_a_runbook_page() -> None:
    found = alerts()
    assert set(found) >= REQUIRED_ALERTS
    base = yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]["runbookBaseURL"]
    assert base.endswith("/docs/runbooks")
    for name, rule in found.items():
        url = rule["annotations"]["runbook_url"]
        assert url == f"{base}/{name}.md", url
        page = (RUNBOOKS / f"{name}.md").read_text()
        assert page.startswith(f"# {name}\n")
        for section in ("## Meaning", "## Impact", "## What to do"):
            assert section in page, (name, section)
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    listed = (RUNBOOKS / "README.md").read_text()
    assert all(f"[{name}.md]" in listed for name in found)


def test_fail_open_alert_watches_the_webhook_name_noe_registers() -> None:
    out = run_helm(["template", "noe", str(CHART), "--namespace", NAMESPACE, "--set", "prometheusRule.enabled=true"])
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    [mwc] = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    names = {w["name"] for w in mwc["webhooks"]}
    expr = alerts()["NoeWebhookFailOpen"]["expr"]
    assert "apiserver_admission_webhook_fail_open_count" in expr
    assert {m for m in re.findall(r'name="([^"]+)"', expr)} == names


def test_alert_thresholds_follow_the_values() -> None:
    out = run_helm(
        [
            "template",
            "noe",
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--set",
            "prometheusRule.enabled=true",
            "--set",
            "timeoutSeconds=20",
            "--set",
            "gracefulTimeout=25",
            "--set",
            "terminationGracePeriodSeconds=40",
            "--set",
            "prometheusRule.rateLimitHeadroom=0.25",
            "--set",
            "prometheusRule.job=webhooks",
            "-s",
            "templates/prometheusrule.yaml",
        ]
    ).stdout
    rules = {r["alert"]: r for g in yaml.safe_load(out)["spec"]["groups"] for r in g["rules"]}
    assert re.search(r">\s*16(\.0)?\s*$", rules["NoeAdmissionLatencyHigh"]["expr"])  # 80 % of 20 s
    assert "< 0.25" in rules["NoeRegistryRateLimitLow"]["expr"]
    assert 'job="webhooks"' in rules["NoeWebhookDown"]["expr"]


# --- metrics the alerts and the dashboard read -------------------------------------------------------


def test_alerts_and_dashboard_read_only_metrics_that_exist() -> None:
    exported = exported_series_names() | {"up", "apiserver_admission_webhook_fail_open_count"}
    exprs = [r["expr"] for r in alerts().values()] + [q for _, q in dashboard_queries()]
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= exported, f"{sorted(names - exported)} in {expr}"


# --- the dashboard ---------------------------------------------------------------------------------------


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    rules = []
    for index, (title, query) in enumerate(dashboard_queries()):
        expr = query
        for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
            expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
        assert "$" not in expr, f"unknown Grafana variable in {title!r}: {expr}"
        rules.append({"record": f"dashboard:query_{index}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = promtool("check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


def test_dashboard_covers_what_an_operator_looks_at() -> None:
    board = dashboard()
    assert board["uid"] and board["title"]
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "job", "namespace"} <= variables
    queries = " ".join(q for _, q in dashboard_queries())
    assert re.search(r"sum by \(decision\) \(rate\(noe_admissions_total", queries)
    assert "histogram_quantile(0.99, sum by (le) (rate(noe_admission_duration_seconds_bucket" in queries
    assert "noe_registry_cache_hits_total" in queries and "noe_registry_cache_misses_total" in queries
    assert re.search(r"sum by \(registry, status\) \(rate\(noe_registry_requests_total", queries)
    assert "noe_registry_rate_limit_remaining" in queries and "noe_registry_rate_limit_limit" in queries
    assert "noe_events_total" in queries  # outcome="dropped" is one of the series
    # the shared cache's row: Redis hits, misses, errors, latency, and whether each pod reaches it
    for family in (
        'noe_registry_cache_hits_total{job=~"$job",namespace=~"$namespace",lookup="redis"}',
        'noe_registry_cache_misses_total{job=~"$job",namespace=~"$namespace",lookup="redis"}',
        "noe_registry_cache_redis_errors_total",
        "noe_registry_cache_redis_duration_seconds_bucket",
        "noe_registry_cache_redis_up",
    ):
        assert family in queries, family
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def test_monitoring_objects_are_off_by_default() -> None:
    out = run_helm(["template", "noe", str(CHART), "--namespace", NAMESPACE]).stdout
    kinds = {d["kind"] for d in yaml.safe_load_all(out) if d}
    assert not {"PrometheusRule", "ServiceMonitor", "PodMonitor"} & kinds
    assert all("grafana_dashboard" not in (d["metadata"].get("labels") or {}) for d in yaml.safe_load_all(out) if d)
