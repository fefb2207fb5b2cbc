"""Metric labels stay bounded whatever clients send."""

from __future__ import annotations

from noe_web.metrics import MAX_KIND_VALUES, MAX_LABEL_VALUES, OTHER, Metrics


def _label_values(metrics: Metrics, name: str, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == name
    }


def test_kinds_from_requests_are_bounded_pod_and_daemonset_always_kept() -> None:
    metrics = Metrics()
    for index in range(500):
        metrics.admission(namespace="default", kind=f"Kind{index}", decision="allowed", seconds=0.01)
        metrics.skipped(f"Kind{index}", "CREATE")
    metrics.admission(namespace="default", kind="Pod", decision="mutated", seconds=0.01)
    metrics.skipped("DaemonSet", "DELETE")
    kinds = _label_values(metrics, "noe_admissions_total", "kind")
    assert len(kinds) == MAX_KIND_VALUES + 2 and {"Pod", OTHER} <= kinds
    skipped = _label_values(metrics, "noe_hook_update_skip_total", "kind")
    assert len(skipped) == MAX_KIND_VALUES + 2 and {"DaemonSet", OTHER} <= skipped


def test_namespaces_are_bounded_and_overlong_values_are_other() -> None:
    metrics = Metrics()
    metrics.admission(namespace="x" * 100_000, kind="K" * 100_000, decision="allowed", seconds=0.01)
    assert _label_values(metrics, "noe_admissions_total", "namespace") == {OTHER}
    assert _label_values(metrics, "noe_admissions_total", "kind") == {OTHER}
    for index in range(MAX_LABEL_VALUES + 50):
        metrics.admission(namespace=f"ns{index}", kind="Pod", decision="allowed", seconds=0.01)
    assert len(_label_values(metrics, "noe_admissions_total", "namespace")) == MAX_LABEL_VALUES + 1
