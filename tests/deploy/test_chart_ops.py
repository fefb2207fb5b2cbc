"""The chart as operators run it: rollouts, scraping, network, selectors, `helm test`, plain manifests.

Rendered by the real helm and validated against the Kubernetes schemas
(tests/deploy/test_deploy.py's ``validate``); values are checked against what the
program accepts (``noe serve``'s own parser and ``ServeConfig``).
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.certs import make_ca
from tests.support.chart import KUBE_VERSIONS, validate
from tests.support.fake_kube_api import start_fake_kube_api
from tests.support.helm import run_helm
from tests.support.paths import ROOT

pytestmark = pytest.mark.deploy

CHART = ROOT / "deploy" / "helm" / "noe"
NAMESPACE = "noe-system"


def render(
    *settings: str, values: dict[str, Any] | None = None, tmp: Path | None = None, check: bool = True
) -> list[dict[str, Any]] | subprocess.CompletedProcess[str]:
    args = ["template", "noe", str(CHART), "--namespace", NAMESPACE, *settings]
    if values is not None:
        assert tmp is not None
        path = tmp / "values.json"
        path.write_text(json.dumps(values))
        args += ["-f", str(path)]
    proc = run_helm(args, check=check)
    if not check:
        return proc
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def docs_of(*settings: str, **kw: Any) -> list[dict[str, Any]]:
    out = render(*settings, **kw)
    assert isinstance(out, list)
    return out


def refused(*settings: str) -> str:
    proc = render(*settings, check=False)
    assert isinstance(proc, subprocess.CompletedProcess)
    assert proc.returncode != 0, "rendered although it should be refused"
    return proc.stderr


def kind(docs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == name]


def webhook_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = kind(docs, "Deployment")
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(c for c in webhook_pod(docs)["containers"] if c["name"] == "webhook")


def flag(docs: list[dict[str, Any]], name: str) -> list[str]:
    return [a.split("=", 1)[1] for a in container(docs)["args"] if a.startswith(name + "=")]


def serve_config(docs: list[dict[str, Any]]) -> Any:
    """The webhook container's arguments through `noe serve`'s real parser and settings."""
    from noe_web.commands import build_parser
    from noe_web.commands.config import ServeConfig

    # The pod's mounted certificate Secret, stood in for by a real pair in the same layout.
    work = Path(tempfile.mkdtemp(prefix="noe-chart-certs-"))
    try:
        pair = make_ca("chart CA", work / "ca").issue(["localhost"])
        (work / "tls").mkdir()
        shutil.copy(pair.cert_file, work / "tls" / "tls.crt")
        shutil.copy(pair.key_file, work / "tls" / "tls.key")
        args = [f"--cert-dir={work / 'tls'}" if a.startswith("--cert-dir=") else a for a in container(docs)["args"]]
        return ServeConfig.from_args(build_parser().parse_args(args))
    finally:
        shutil.rmtree(work)


# --- 3. safe rollouts ------------------------------------------------------------------------------


def test_default_install_survives_a_drain_and_a_rollout() -> None:
    docs = docs_of()
    [deployment] = kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    [pdb] = kind(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 < deployment["spec"]["replicas"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    spread = {c["topologyKey"]: c for c in webhook_pod(docs)["topologySpreadConstraints"]}
    assert set(spread) == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert webhook_pod(docs)["priorityClassName"] == "system-cluster-critical"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (("--set", "podDisruptionBudget.minAvailable=2"), "blocks every node drain"),
        (("--set", "replicas=1"), "blocks every node drain"),
        (("--set", "podDisruptionBudget.minAvailable=100%"), "blocks every node drain"),
        (
            ("--set", "podDisruptionBudget.minAvailable=null", "--set", "podDisruptionBudget.maxUnavailable=0"),
            "blocks every node drain",
        ),
        (
            ("--set", "ha.enabled=true", "--set", "ha.replicas=2", "--set", "ha.minAvailable=2"),
            "blocks every node drain",
        ),
        (("--set", "podDisruptionBudget.maxUnavailable=1"), "exactly one of minAvailable and maxUnavailable"),
        (("--set", "gracefulTimeout=10"), "gracefulTimeout"),
        (("--set", "terminationGracePeriodSeconds=20"), "terminationGracePeriodSeconds"),
    ],
)
def test_settings_that_would_drop_admissions_are_refused(settings: tuple[str, ...], message: str) -> None:
    assert message in refused(*settings)


def test_budgets_that_let_a_drain_through_render() -> None:
    one = docs_of("--set", "replicas=1", "--set", "podDisruptionBudget.enabled=false")
    assert not kind(one, "PodDisruptionBudget") and kind(one, "Deployment")[0]["spec"]["replicas"] == 1
    three = docs_of("--set", "replicas=3", "--set", "podDisruptionBudget.minAvailable=2")
    assert kind(three, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 2
    pct = docs_of("--set", "podDisruptionBudget.minAvailable=null", "--set", "podDisruptionBudget.maxUnavailable=50%")
    assert kind(pct, "PodDisruptionBudget")[0]["spec"] == {
        "maxUnavailable": "50%",
        "selector": kind(pct, "PodDisruptionBudget")[0]["spec"]["selector"],
    }
    assert "priorityClassName" not in webhook_pod(docs_of("--set", "priorityClassName="))


def test_shutdown_outlasts_the_webhook_timeout() -> None:
    docs = docs_of()
    [hook] = kind(docs, "MutatingWebhookConfiguration")[0]["webhooks"]
    pod = webhook_pod(docs)
    pre_stop = container(docs)["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep" and int(pre_stop[1]) > 0
    graceful = float(flag(docs, "--graceful-timeout")[0])
    assert graceful > hook["timeoutSeconds"]
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + graceful
    assert serve_config(docs).graceful_timeout == graceful  # noe serve takes it (tests/e2e/test_serve_shutdown.py)


# --- 8. values the schema takes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "flag_name", "seconds"),
    [
        (("--set", "cacheTTL=1h"), "--cache-ttl", 3600.0),
        (("--set", "cacheTTL=1h30m"), "--cache-ttl", 5400.0),
        (("--set", "negativeCacheTTL=45s"), "--negative-cache-ttl", 45.0),
        (("--set", "negativeCacheTTL=0.5"), "--negative-cache-ttl", 0.5),
        (("--set", "cacheTTL=300"), "--cache-ttl", 300.0),
        (("--set", "admissionDeadline=4.5"), "--admission-deadline", 4.5),
        (("--set-string", "admissionDeadline=3"), "--admission-deadline", 3.0),
    ],
)
def test_go_durations_and_set_decimals_are_accepted(settings: tuple[str, ...], flag_name: str, seconds: float) -> None:
    docs = docs_of(*settings)
    assert flag(docs, flag_name)
    config = serve_config(docs)
    got = {
        "--cache-ttl": lambda: config.registry.cache_ttl,
        "--negative-cache-ttl": lambda: config.registry.negative_cache_ttl,
        "--admission-deadline": lambda: config.admission_deadline,
    }[flag_name]()
    assert got == seconds


@pytest.mark.parametrize(
    "settings",
    [
        ("--set", "cacheTTL=1 hour"),
        ("--set", "cacheTTL=-1s"),
        ("--set", "admissionDeadline=fast"),
        ("--set", "admissionDeadline=10"),
    ],
)
def test_bad_durations_are_refused_by_the_schema_or_the_chart(settings: tuple[str, ...]) -> None:
    message = refused(*settings)
    assert "cacheTTL" in message or "admissionDeadline" in message, message


def test_metrics_disabled_means_no_metrics_server_at_all() -> None:
    docs = docs_of(
        "--set",
        "metrics.enabled=false",
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "podMonitor.enabled=true",
        "--set",
        "networkPolicy.enabled=true",
    )
    assert flag(docs, "--metrics-addr") == ["0"]
    assert serve_config(docs).metrics_enabled is False
    assert all(p["name"] != "metrics" for p in container(docs)["ports"])
    assert all(p["name"] != "metrics" for s in kind(docs, "Service") for p in s["spec"]["ports"])
    assert not kind(docs, "ServiceMonitor") and not kind(docs, "PodMonitor")
    annotations = kind(docs, "Deployment")[0]["spec"]["template"]["metadata"]["annotations"]
    assert "prometheus.io/scrape" not in annotations
    [policy] = kind(docs, "NetworkPolicy")
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == ["https"]
    on = docs_of()
    assert serve_config(on).metrics_enabled is True
    assert kind(on, "Deployment")[0]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8080"


def test_monitors_honor_the_go_noe_namespace_label_and_podmonitor_scrapes_the_metrics_port() -> None:
    docs = docs_of("--set", "serviceMonitor.enabled=true", "--set", "podMonitor.enabled=true")
    [sm] = kind(docs, "ServiceMonitor")
    [pm] = kind(docs, "PodMonitor")
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True
    assert pm["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    ports = {p["name"] for p in container(docs)["ports"]}
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] in ports
    labels = kind(docs, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # jobLabel: the job is "noe", which the alerts select by default
    assert labels[pm["spec"]["jobLabel"]] == "noe"


# --- 8. network, host network, selectors, service account, volumes -----------------------------------


def test_network_policy_allows_exactly_what_noe_needs() -> None:
    docs = docs_of(
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring",
    )
    [policy] = kind(docs, "NetworkPolicy")
    spec = policy["spec"]
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    assert (
        spec["podSelector"]["matchLabels"].items()
        <= kind(docs, "Deployment")[0]["spec"]["template"]["metadata"]["labels"].items()
    )
    names = {p["name"] for p in container(docs)["ports"]}
    ingress = {p["port"]: rule for rule in spec["ingress"] for p in rule["ports"]}
    assert set(ingress) == names == {"https", "metrics"}
    assert "from" not in ingress["https"]  # the API server is not a pod a selector can name
    assert ingress["metrics"]["from"] == [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]
    egress = [(p["port"], p["protocol"]) for rule in spec["egress"] for p in rule["ports"]]
    assert {(53, "UDP"), (53, "TCP"), (443, "TCP"), (6443, "TCP"), (80, "TCP")} <= set(egress)
    assert not kind(docs_of(), "NetworkPolicy")


def test_host_network_brings_its_dns_policy() -> None:
    pod = webhook_pod(docs_of("--set", "hostNetwork=true"))
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert webhook_pod(docs_of("--set", "hostNetwork=true", "--set", "dnsPolicy=Default"))["dnsPolicy"] == "Default"
    default = webhook_pod(docs_of())
    assert "hostNetwork" not in default and "dnsPolicy" not in default


def test_selectors_and_match_conditions_reach_the_webhook(tmp_path: Path) -> None:
    values = {
        "namespaceSelector": {
            "matchLabels": {"noe.example.com/enabled": "true"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["system"]}],
        },
        "objectSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        "matchConditions": [{"name": "not-a-job", "expression": "!has(object.metadata.ownerReferences)"}],
    }
    docs = docs_of(values=values, tmp=tmp_path)
    [hook] = kind(docs, "MutatingWebhookConfiguration")[0]["webhooks"]
    ns = hook["namespaceSelector"]
    assert ns["matchLabels"] == {"noe.example.com/enabled": "true"}
    keys = [e["key"] for e in ns["matchExpressions"]]
    assert keys == ["kubernetes.io/metadata.name", "arch.noe.adevinta.com/skip", "tier"]  # ours stay first
    assert [e["key"] for e in hook["objectSelector"]["matchExpressions"]] == ["arch.noe.adevinta.com/skip", "app"]
    assert hook["matchConditions"] == values["matchConditions"]
    for version in (KUBE_VERSIONS[0], KUBE_VERSIONS[-1]):
        validate(kind(docs, "MutatingWebhookConfiguration")[0], version)


def test_an_existing_service_account_is_used_and_bound() -> None:
    docs = docs_of("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=platform-noe")
    assert webhook_pod(docs)["serviceAccountName"] == "platform-noe"
    assert not [
        sa
        for sa in kind(docs, "ServiceAccount")
        if sa["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    ]
    binding = next(b for b in kind(docs, "ClusterRoleBinding") if not b["metadata"]["name"].endswith("-certs"))
    assert binding["subjects"][0]["name"] == "platform-noe"
    assert "serviceAccount.name" in refused("--set", "serviceAccount.create=false")
    named = docs_of("--set", "serviceAccount.name=noe-sa")
    assert webhook_pod(named)["serviceAccountName"] == "noe-sa"
    assert [
        sa["metadata"]["name"]
        for sa in kind(named, "ServiceAccount")
        if sa["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    ] == ["noe-sa"]


def test_extra_volumes_and_mounts(tmp_path: Path) -> None:
    values = {
        "extraVolumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
    }
    docs = docs_of(values=values, tmp=tmp_path)
    assert {"name": "corp-ca", "configMap": {"name": "corp-ca"}} in webhook_pod(docs)["volumes"]
    assert values["extraVolumeMounts"][0] in container(docs)["volumeMounts"]


def test_everything_on_validates_against_kubernetes(tmp_path: Path) -> None:
    values = {
        "networkPolicy": {"enabled": True},
        "hostNetwork": True,
        "serviceMonitor": {"enabled": True},
        "podMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True, "folder": "Platform"},
        "nodeCredentials": {"enabled": True},
        "matchConditions": [{"name": "all", "expression": "true"}],
        "extraVolumes": [{"name": "x", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "x", "mountPath": "/x"}],
    }
    docs = docs_of(values=values, tmp=tmp_path)
    for version in (KUBE_VERSIONS[0], KUBE_VERSIONS[-1]):
        for doc in docs:
            validate(doc, version)
    lint = run_helm(["lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", str(tmp_path / "values.json")])
    assert "0 chart(s) failed" in lint.stdout


# --- 8. `helm test` ----------------------------------------------------------------------------------


def _test_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [pod] = [d for d in kind(docs, "Pod") if d["metadata"]["annotations"].get("helm.sh/hook") == "test"]
    return pod


def test_helm_test_pod_and_its_narrow_rights() -> None:
    docs = docs_of()
    pod = _test_pod(docs)
    [role] = [r for r in kind(docs, "Role") if r["metadata"]["name"] == pod["spec"]["serviceAccountName"]]
    assert role["metadata"]["namespace"] == "default" != NAMESPACE
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["PROBE_NAMESPACE"] == "default"
    assert not [p for p in kind(docs_of("--set", "test.enabled=false"), "Pod")]
    # in the release namespace noe sees nothing: no test rather than a test that must fail
    assert not kind(docs_of("--set", f"test.namespace={NAMESPACE}"), "Pod")


def _run_test_pod(pod: dict[str, Any], api_url: str, sa_dir: Path) -> subprocess.CompletedProcess[str]:
    c = pod["spec"]["containers"][0]
    host, port = api_url.removeprefix("https://").rsplit(":", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "SSL_", "REQUESTS_"))}
    env.update({e["name"]: e["value"] for e in c["env"]})
    env.update({"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "SERVICEACCOUNT_DIR": str(sa_dir)})
    assert c["command"][:1] == ["python3"]
    return subprocess.run(
        [sys.executable, *c["command"][1:], *c["args"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_helm_test_sends_a_dry_run_pod_through_the_webhook(tmp_path: Path) -> None:
    """The test pod's script, run against an API server that calls noe's real admission for dry-run pods."""
    from noe_core.image.declared import StaticPlatforms
    from noe_core.policies.settings import PolicySettings
    from noe_web.metrics import Metrics
    from noe_web.webhook.admission import AdmissionService
    from noe_web.webhook.app import Services, create_app

    docs = docs_of()
    pod = _test_pod(docs)
    probe = next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "PROBE_IMAGE")
    static = StaticPlatforms.from_mapping({probe: ["linux/amd64", "linux/arm64"]})
    app = create_app(Services(AdmissionService(policy=PolicySettings(), metrics=Metrics(), static=static)))
    client = app.test_client()

    def admit(review: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = client.post("/mutate", json=review).get_json()
        return answer

    ca = make_ca("helm-test kube CA", tmp_path / "ca")
    sa_dir = tmp_path / "sa"
    sa_dir.mkdir()
    (sa_dir / "token").write_text("helm-test-token\n")
    (sa_dir / "ca.crt").write_bytes(ca.ca_file.read_bytes())
    try:
        with start_fake_kube_api(ca, tokens=("helm-test-token",)) as api:
            api.state.admit = admit
            ok = _run_test_pod(pod, api.url, sa_dir)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            assert ok.stdout.strip() == "OK: noe placed the dry-run pod on amd64, arm64"
            created = [r for r in api.requests_snapshot() if r.method == "POST"]
            assert created and "dryRun=All" in created[0].path and "/namespaces/default/pods" in created[0].path
            api.state.admit = None  # the webhook did not answer (failed open)
            failed = _run_test_pod(pod, api.url, sa_dir)
            assert failed.returncode == 1 and failed.stdout.startswith("FAIL: "), failed.stdout + failed.stderr
            assert failed.stdout.count("\n") == 1
    finally:
        app.extensions["noe"].close()


# --- 8. Chart.yaml and the plain manifests --------------------------------------------------------------


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    source = cfg["metadata"]["url"]
    assert chart["home"] == source and source in chart["sources"]
    assert "https://github.com/adevinta/noe" in chart["sources"]
    assert chart["icon"].endswith("/docs/icon.svg") and (ROOT / "docs" / "icon.svg").is_file()
    assert chart["annotations"]["artifacthub.io/license"] == cfg["metadata"]["license"]
    links = yaml.safe_load(chart["annotations"]["artifacthub.io/links"])
    for link in links:
        path = link["url"].split("/tree/main/", 1)[-1].split("/blob/main/", 1)[-1]
        assert (ROOT / path).exists(), link
    assert chart["maintainers"] and chart["keywords"]


def test_plain_manifests_certificate_job_is_removed_after_it_finishes() -> None:
    docs = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "manifests" / "noe-without-cert-manager.yaml").read_text())
        if d
    ]
    [job] = kind(docs, "Job")
    assert 0 < job["spec"]["ttlSecondsAfterFinished"] <= 3600
    # and no `helm test` objects, which only Helm runs
    assert not kind(docs, "Pod")
    assert all(d["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "test" for d in docs)
