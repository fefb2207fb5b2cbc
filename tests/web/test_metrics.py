"""Metric labels stay bounded whatever clients send."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

from noe_web.metrics import MAX_KIND_VALUES, MAX_LABEL_VALUES, OTHER, Metrics
from tests.support.paths import ROOT


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
    kinds = _label_values(metrics, "noe_admissions_total", "resource_kind")
    assert len(kinds) == MAX_KIND_VALUES + 2 and {"Pod", OTHER} <= kinds
    skipped = _label_values(metrics, "noe_hook_update_skip_total", "resource_kind")
    assert len(skipped) == MAX_KIND_VALUES + 2 and {"DaemonSet", OTHER} <= skipped


def test_namespaces_are_bounded_and_overlong_values_are_other() -> None:
    metrics = Metrics()
    metrics.admission(namespace="x" * 100_000, kind="K" * 100_000, decision="allowed", seconds=0.01)
    assert _label_values(metrics, "noe_admissions_total", "resource_namespace") == {OTHER}
    assert _label_values(metrics, "noe_admissions_total", "resource_kind") == {OTHER}
    for index in range(MAX_LABEL_VALUES + 50):
        metrics.admission(namespace=f"ns{index}", kind="Pod", decision="allowed", seconds=0.01)
    assert len(_label_values(metrics, "noe_admissions_total", "resource_namespace")) == MAX_LABEL_VALUES + 1


# --- names and labels that work under kube-prometheus ------------------------------------------


def _families(metrics: Metrics) -> dict[str, set[str]]:
    """Family name -> its label names, as exposed (counters without their _total suffix)."""
    out: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        out.setdefault(family.name, set())
        for sample in family.samples:
            out[family.name] |= set(sample.labels) - {"le"}
    return out


def _exercised() -> Metrics:
    metrics = Metrics()
    metrics.admission(namespace="team-a", kind="Pod", decision="mutated", seconds=0.01)
    metrics.skipped("Pod", "UPDATE")
    metrics.pull_secrets_failed("team-a")
    metrics.request("r.example", "GET", 200)
    metrics.cache_hit("tag")
    metrics.cache_miss("digest")
    metrics.coalesced("image")
    metrics.token_fetch("r.example", "ok")
    metrics.rate_limit("r.example", 5, 100)
    metrics.error("r.example", "not_found")
    metrics.static_lookups.inc()
    metrics.events.labels("written").inc()
    metrics.bad_requests.labels("not_json").inc()
    metrics.registry_request_duration.labels("r.example", "GET").observe(0.1)
    metrics.cache_evictions.labels("content").inc()
    metrics.redis_call("content", 0.0004, error=True)
    metrics.redis_up("valkey.noe-system.svc:6379", True)
    return metrics


def test_the_target_label_namespace_is_only_on_the_go_noe_family() -> None:
    """Prometheus' Kubernetes discovery sets `namespace` (noe's own); ours would become exported_namespace."""
    families = _families(_exercised())
    with_namespace = {name for name, labels in families.items() if "namespace" in labels}
    assert with_namespace == {"noe_hook_arch_selector_injected", "noe_hook_image_pull_secret_failed"}
    assert "resource_namespace" in families["noe_admissions"]


def test_no_label_name_means_two_things() -> None:
    families = _families(_exercised())
    assert not any("kind" in labels for labels in families.values()), "kind meant three things"
    assert families["noe_admissions"] == {"resource_namespace", "resource_kind", "decision"}
    assert families["noe_hook_update_skip"] == {"resource_kind", "operation"}
    assert families["noe_hook_registry_errors"] == {"registry", "reason"}
    for name in ("noe_registry_cache_hits", "noe_registry_cache_misses", "noe_registry_cache_coalesced"):
        assert families[name] == {"lookup"}, name
    # Go Noe's families, with Go Noe's labels
    assert families["noe_hook_arch_selector_injected"] == {"namespace", "selector"}
    assert families["noe_registry_cache_responses"] == {"cache"}
    assert families["noe_registry_cache_requests"] == set()
    assert families["noe_registry_rate_limit_remaining"] == {"registry"}


def test_build_info_names_the_installed_version() -> None:
    metrics = Metrics()
    version = metadata.version("noe-webhook")
    labels = {"version": version, "python_version": platform.python_version()}
    assert metrics.registry.get_sample_value("noe_build_info", labels) == 1


def test_go_cache_families_follow_our_cache_counters() -> None:
    metrics = _exercised()
    sample = metrics.registry.get_sample_value
    assert sample("noe_registry_cache_requests_total") == 2
    assert sample("noe_registry_cache_responses_total", {"cache": "hit"}) == 1
    assert sample("noe_registry_cache_responses_total", {"cache": "miss"}) == 1


# --- docs/metrics.md says what is true --------------------------------------------------------

NONE = "\N{EN DASH}"  # the doc's "no labels"
_DOC = (ROOT / "docs" / "metrics.md").read_text()

# Every family adevinta/noe registers (pkg/arch/hook.go, pkg/controllers/pod.go, pkg/registry/registry.go,
# pkg/registry/cache.go twice, pkg/httputils/monitored.go for the registry client and the /mutate handler).
GO_NOE_FAMILIES = {
    "noe_hook_image_pull_secret_failed_total",
    "noe_hook_registry_errors_total",
    "noe_hook_update_skip_total",
    "noe_hook_arch_selector_injected_total",
    "noe_hook_preferred_architecture_not_available_total",
    "noe_hook_node_match_injections_total",
    "noe_images_count",
    "noe_pods_deletion_total",
    "noe_registry_requests_total",
    "noe_registry_responses_total",
    "noe_registry_errors_total",
    "noe_registry_rate_limit_remaining",
    "noe_registry_rate_limit_limit",
    "noe_registry_rate_limit_window_seconds",
    "noe_registry_cache_requests_total",
    "noe_registry_cache_responses_total",
    "noe_registry_authentication_cache_requests_total",
    "noe_registry_authentication_cache_responses_total",
    "noe_http_client_count",
    "noe_http_client_duration_seconds",
    "noe_webhook_count",
    "noe_webhook_duration_seconds",
}


def _doc_table(heading: str) -> list[list[str]]:
    section = _DOC.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _exposed_names(metrics: Metrics) -> dict[str, str]:
    """Documented name (counters with _total) -> type."""
    out = {}
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        out[name] = "gauge (1)" if name == "noe_build_info" else family.type
    return out


def test_metrics_doc_lists_exactly_the_families_exposed_with_their_labels() -> None:
    exposed = _exposed_names(_exercised())
    families = {f"{k}_total" if f"{k}_total" in exposed else k: v for k, v in _families(_exercised()).items()}
    documented = {row[0].strip("`"): row for row in _doc_table("## Families")}
    assert set(documented) == set(exposed)
    for name, row in documented.items():
        assert row[1] == exposed[name], name
        labels = set() if row[2] == NONE else {part.strip().strip("`").split(" ")[0] for part in row[2].split(",")}
        assert labels == families[name], name


def test_metrics_doc_maps_every_go_noe_family_and_kept_means_kept() -> None:
    rows = {row[0].strip("`"): row for row in _doc_table("## From the Go Noe")}
    assert set(rows) == GO_NOE_FAMILIES
    exposed = _exposed_names(_exercised())
    families = {f"{k}_total" if f"{k}_total" in exposed else k: v for k, v in _families(_exercised()).items()}
    for name, (_, go_labels, here, _note) in rows.items():
        if here.startswith("kept"):
            assert name in exposed, f"{name} is said to be kept but is not exported"
            if "same labels" in here:
                wanted = set() if go_labels == NONE else {p.strip().strip("`") for p in go_labels.split(",")}
                assert families[name] == wanted, name
        elif here != "not exported":
            for ours in {m.strip("`").split("{")[0] for m in here.split(", ")}:
                assert ours in exposed, f"{name} maps to {ours}, which is not exported"
        else:
            assert name not in exposed


def test_unreadable_pull_secrets_are_counted_per_namespace(tmp_path: Path) -> None:
    """Go Noe's noe_hook_image_pull_secret_failed_total, from a real admission against an HTTPS API peer."""
    from noe_core.policies.settings import PolicySettings
    from noe_core.registry.resolver import Resolver
    from noe_core.registry.settings import RegistrySettings
    from noe_core.registry.transport import make_session
    from noe_core.testing import admission_review, pod
    from noe_web.kube.client import KubeClient
    from noe_web.kube.config import load_kubeconfig
    from noe_web.webhook.admission import AdmissionService
    from tests.support.certs import make_ca
    from tests.support.fake_kube_api import start_fake_kube_api

    metrics = Metrics()
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",))
    session = make_session(settings)
    with start_fake_kube_api(make_ca("metrics kube CA", tmp_path / "ca"), tokens=("t",)) as api:
        api.add_secret(
            "team",
            "good",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "good"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": "e30="},
            },
        )
        kube = KubeClient(load_kubeconfig(api.write_kubeconfig(tmp_path / "kc", token="t")), timeout=5.0)
        service = AdmissionService(
            policy=PolicySettings(),
            metrics=metrics,
            deadline_seconds=3.0,
            resolver=Resolver(session, settings=settings),
            kube=kube,
        )
        try:
            p = pod(["127.0.0.1:1/private/app:1"], namespace="team")
            p["spec"]["imagePullSecrets"] = [{"name": "good"}, {"name": "gone"}, {"name": "also-gone"}]
            response = service.review(admission_review(p))["response"]
        finally:
            service.close()
            kube.close()
            session.close()
    assert any("gone not found" in w for w in response["warnings"])
    assert metrics.registry.get_sample_value("noe_hook_image_pull_secret_failed_total", {"namespace": "team"}) == 2
