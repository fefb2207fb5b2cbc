"""The chart's ``tracing`` values: the standard ``OTEL_*`` variables the webhook container gets, and the egress rule.

Rendered with the real helm and validated against the Kubernetes schemas; the
variables rendered are then read by noe's own tracing configuration and by the
OpenTelemetry SDK, which exports a span to a local OTLP/HTTP receiver: what the
pod would send, with the resource the chart describes.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_web.tracing.config import read_tracing
from noe_web.tracing.otel import OtelTracing
from tests.support.chart import CHART, KUBE_VERSIONS, NAMESPACE, RELEASE, find, one, validate
from tests.support.helm import run_helm
from tests.support.otlp_receiver import start_otlp_receiver

pytestmark = pytest.mark.deploy

COLLECTOR = "http://otel-collector.observability.svc:4318"
TRACED: dict[str, Any] = {
    "tracing": {
        "endpoint": COLLECTOR,
        "sampler": "parentbased_traceidratio",
        "samplerArg": "0.25",
        "resourceAttributes": {"deployment.environment": "prod", "team": "platform"},
        "headersSecret": {"name": "collector-auth", "key": "otlp-headers"},
    },
    "networkPolicy": {"enabled": True},
}


def helm_template(values: dict[str, Any], tmp_path: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    return run_helm(["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(path)], check=check)


def render(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(helm_template(values, tmp_path).stdout) if doc]


def webhook_env(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = one(docs, "Deployment", "noe")["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def as_kubelet_sets_it(env: list[dict[str, Any]], pod: str = "noe-7d9f-abcde") -> dict[str, str]:
    """The environment the container starts with: fieldRefs filled, ``$(VAR)`` expanded from the ones before."""
    fields = {"metadata.name": pod, "metadata.namespace": NAMESPACE}
    out: dict[str, str] = {}
    for var in env:
        if "value" in var:
            out[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: out.get(m[1], m[0]), var["value"])
        elif "fieldRef" in var.get("valueFrom", {}):
            out[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return out


def test_off_by_default_no_otel_variable_and_no_collector_egress(tmp_path: Path) -> None:
    docs = render({"networkPolicy": {"enabled": True}}, tmp_path)
    names = {var["name"] for var in webhook_env(docs)}
    assert not {n for n in names if n.startswith("OTEL_")}
    assert not read_tracing(as_kubelet_sets_it(webhook_env(docs))).enabled
    egress = one(docs, "NetworkPolicy")["spec"]["egress"]
    assert not [rule for rule in egress if {"port": 4318, "protocol": "TCP"} in rule.get("ports", [])]


def test_an_endpoint_turns_tracing_on_with_the_values_as_otel_variables(tmp_path: Path) -> None:
    docs = render(TRACED, tmp_path)
    for doc in docs:
        validate(doc, KUBE_VERSIONS[-1])
    env = webhook_env(docs)
    started = as_kubelet_sets_it(env)
    assert started["OTEL_EXPORTER_OTLP_ENDPOINT"] == COLLECTOR
    assert started["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert started["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
    config = read_tracing(started)
    assert config.enabled and config.exporters == ("otlp_proto_http",)
    assert config.describe()["endpoint"] == COLLECTOR
    # The collector's credentials come from the Secret: the pod spec names it, never its content.
    (headers,) = [var for var in env if var["name"] == "OTEL_EXPORTER_OTLP_HEADERS"]
    assert headers == {
        "name": "OTEL_EXPORTER_OTLP_HEADERS",
        "valueFrom": {"secretKeyRef": {"name": "collector-auth", "key": "otlp-headers"}},
    }
    # Only the webhook traces: the controller's pods get no OTEL_* variable.
    for deployment in find(docs, "Deployment"):
        if deployment["metadata"]["name"] != "noe":
            assert not [
                v
                for c in deployment["spec"]["template"]["spec"]["containers"]
                for v in c.get("env", [])
                if v["name"].startswith("OTEL_")
            ]
    # With a NetworkPolicy, the webhook may reach the collector's port.
    egress = one(docs, "NetworkPolicy")["spec"]["egress"]
    assert {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 4318, "protocol": "TCP"}]} in egress


def test_the_variables_rendered_export_spans_with_the_pods_resource(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OpenTelemetry SDK reads the rendered variables (collector moved to a local receiver) and exports."""
    started = as_kubelet_sets_it(webhook_env(render(TRACED, tmp_path)))
    with start_otlp_receiver() as otlp:
        started["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp.base_endpoint
        started["OTEL_EXPORTER_OTLP_HEADERS"] = "authorization=Bearer collector-token"  # what the Secret holds
        started["OTEL_TRACES_SAMPLER"] = "parentbased_always_on"  # a ratio would make the span a coin toss
        for name, value in started.items():
            if name.startswith("OTEL_"):
                monkeypatch.setenv(name, value)
        tracing = OtelTracing.start(read_tracing(started).exporters)
        with tracing.span("registry GET", {"server.address": "registry.corp"}, client=True):
            pass
        tracing.shutdown()
        (span,) = otlp.wait_for(lambda got: len(got) == 1)
        sent = {name.lower(): value for name, value in otlp.exports[-1].items()}
        assert sent["authorization"] == "Bearer collector-token"
    assert span.name == "registry GET"
    assert span.resource["service.name"] == "noe-webhook"
    assert span.resource["k8s.pod.name"] == "noe-7d9f-abcde"
    assert span.resource["k8s.namespace.name"] == NAMESPACE
    assert span.resource["deployment.environment"] == "prod" and span.resource["team"] == "platform"


@pytest.mark.parametrize(
    "tracing",
    [
        {"endpoint": "otel-collector:4318"},  # no scheme: the exporter would refuse it in every pod
        {"endpoint": "http://collector:4318/?token=abc"},  # a secret in a query belongs in headersSecret
        {"endpoint": COLLECTOR, "sampler": "sometimes"},
        {"endpoint": COLLECTOR, "resourceAttributes": {"team": "a,b"}},
        {"endpoint": COLLECTOR, "exporter": "zipkin"},
    ],
)
def test_the_schema_refuses_values_the_sdk_would_misread(tracing: dict[str, Any], tmp_path: Path) -> None:
    proc = helm_template({"tracing": tracing}, tmp_path, check=False)
    assert proc.returncode != 0 and "values don't meet the specifications of the schema" in proc.stderr, proc.stderr
