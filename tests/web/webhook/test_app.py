"""The Flask app's wire format, through Flask's test client (no sockets, real services)."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
from flask import Flask
from flask.testing import FlaskClient

from noe_core.image.declared import StaticPlatforms
from noe_core.placement.messages import MAX_WARNINGS
from noe_core.policies.settings import PolicySettings
from noe_core.testing import admission_review, daemonset, pod
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService
from noe_web.webhook.app import Services, create_app

PLATFORMS = {
    "multi:1": ["linux/amd64", "linux/arm64/v8"],
    "arm:1": ["linux/arm64/v8"],
    "x86:1": ["linux/amd64"],
    "corp.example/legacy/*": ["linux/amd64"],
}


def make_app(**service: Any) -> Flask:
    service.setdefault("policy", PolicySettings())
    service.setdefault("metrics", Metrics())
    service.setdefault("static", StaticPlatforms.from_mapping(PLATFORMS))
    max_body = service.pop("max_body_bytes", 3 * 1024 * 1024)
    return create_app(Services(AdmissionService(**service), max_body_bytes=max_body))


@pytest.fixture
def app() -> Iterator[Flask]:
    application = make_app()
    yield application
    application.extensions["noe"].close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def post(client: FlaskClient, doc: Any) -> tuple[int, dict[str, Any]]:
    resp = client.post("/mutate", json=doc)
    return resp.status_code, resp.get_json()


def patched(review: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(review["request"]["object"], ops)


def test_v1_multi_arch_pod_gets_a_patch_and_echoes_uid(client: FlaskClient) -> None:
    review = admission_review(pod(["multi:1"]), uid="abc-1")
    status, body = post(client, review)
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == "abc-1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    spec = patched(review, response)["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["amd64", "arm64"]


def test_v1beta1_is_answered_in_v1beta1(client: FlaskClient) -> None:
    status, body = post(client, admission_review(pod(["arm:1"]), api_version="admission.k8s.io/v1beta1"))
    assert status == 200 and body["apiVersion"] == "admission.k8s.io/v1beta1"
    assert body["response"]["allowed"] is True and "patch" in body["response"]


def test_no_common_architecture_is_denied_with_403(client: FlaskClient) -> None:
    status, body = post(client, admission_review(pod(["arm:1", "x86:1"])))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is False and "patch" not in response
    assert response["status"]["code"] == 403
    assert "arm:1" in response["status"]["message"] and "x86:1" in response["status"]["message"]


def test_pod_update_is_untouched_and_daemonset_update_is_mutated(client: FlaskClient) -> None:
    _, body = post(client, admission_review(pod(["arm:1"]), "UPDATE", old_object=pod(["arm:1"])))
    assert body["response"] == {"uid": body["response"]["uid"], "allowed": True}
    _, body = post(client, admission_review(daemonset(["arm:1"]), "UPDATE", old_object=daemonset(["arm:1"])))
    assert body["response"]["patchType"] == "JSONPatch"


def test_image_not_declared_and_no_registry_is_a_warning(client: FlaskClient) -> None:
    _, body = post(client, admission_review(pod(["multi:1", "unknown.example/app:2"])))
    response = body["response"]
    assert response["allowed"] is True and "patch" in response
    assert any("unknown.example/app:2" in w for w in response["warnings"])
    assert all(len(w) <= 120 for w in response["warnings"])


def test_glob_declaration_applies(client: FlaskClient) -> None:
    _, body = post(client, admission_review(pod(["corp.example/legacy/billing:7"])))
    assert body["response"]["allowed"] is True and "patch" in body["response"]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"not json at all", "not JSON"),
        (b"", "empty"),
        (b"[1, 2]", "must be a JSON object"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": {}}).encode(),
            "is not AdmissionReview",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"kind": {"kind": "Pod"}, "operation": "CREATE", "object": {}},
                }
            ).encode(),
            "uid",
        ),
        (json.dumps({"apiVersion": "v9", "kind": "AdmissionReview"}).encode(), "apiVersion"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
        ("\u00e9t\u00e9".encode("latin-1"), "not JSON"),
    ],
    ids=["garbage", "empty", "array", "wrong-kind", "missing-uid", "bad-version", "deep-nesting", "bad-utf8"],
)
def test_malformed_bodies_are_400_with_a_clear_message(client: FlaskClient, data: bytes, needle: str) -> None:
    resp = client.post("/mutate", data=data, content_type="application/json")
    assert resp.status_code == 400
    body = resp.get_json()
    assert body["code"] == 400 and needle in body["message"]
    # and the app still answers
    assert post(client, admission_review(pod(["arm:1"])))[0] == 200


def test_pod_with_a_malformed_spec_is_400(client: FlaskClient) -> None:
    review = admission_review(pod(["arm:1"]))
    review["request"]["object"]["spec"]["containers"] = "nope"
    resp = client.post("/mutate", json=review)
    assert resp.status_code == 400 and "containers" in resp.get_json()["message"]


def test_daemonset_with_null_template_is_400(client: FlaskClient) -> None:
    for operation in ("CREATE", "UPDATE"):
        review = admission_review(daemonset(["arm:1"]), operation)
        review["request"]["object"]["spec"]["template"] = None
        resp = client.post("/mutate", json=review)
        assert resp.status_code == 400 and "spec.template" in resp.get_json()["message"]


@pytest.mark.parametrize("kind", ["Pod", "DaemonSet", "Deployment"])
@pytest.mark.parametrize("depth", [500, 900])
def test_deeply_nested_object_is_400_not_500(client: FlaskClient, kind: str, depth: int) -> None:
    # shallow enough for json.loads, too deep for copy.deepcopy under the recursion limit
    review = admission_review(daemonset(["arm:1"]) if kind == "DaemonSet" else pod(["arm:1"]))
    review["request"]["kind"]["kind"] = kind
    body = json.dumps(review).replace('"spec": {', '"spec": {"deep": ' + "[" * depth + "]" * depth + ", ", 1)
    resp = client.post("/mutate", data=body, content_type="application/json")
    assert resp.status_code == 400 and "nested more than" in resp.get_json()["message"]


def test_pod_with_thousands_of_uninspectable_images_is_answered_within_the_deadline(client: FlaskClient) -> None:
    # 40,000 distinct images fit in the 3 MiB body limit; each earns a warning, which must not cost O(n^2),
    # and the answer carries MAX_WARNINGS of them, the last counting the rest
    review = admission_review(pod([f"img{i}:1" for i in range(40_000)]))
    started = time.monotonic()
    status, body = post(client, review)
    assert time.monotonic() - started < 5.0
    warnings = body["response"]["warnings"]
    assert status == 200 and len(warnings) == MAX_WARNINGS
    assert warnings[0].startswith("cannot inspect img0:1")
    assert warnings[-1].startswith(f"... and {40_000 - MAX_WARNINGS + 1} more warnings")


def test_null_container_entry_is_answered_not_500(client: FlaskClient) -> None:
    review = admission_review(pod(["arm:1"]))
    review["request"]["object"]["spec"]["containers"].append(None)
    status, body = post(client, review)
    assert status == 200 and body["response"]["allowed"] is True and "patch" in body["response"]


def test_too_large_body_is_400() -> None:
    app = make_app(max_body_bytes=4096)
    try:
        resp = app.test_client().post("/mutate", data=b"{" + b" " * 10_000 + b"}", content_type="application/json")
        assert resp.status_code == 400
        assert resp.get_json()["reason"] == "too_large"
        assert "larger than 4096 bytes" in resp.get_json()["message"]
    finally:
        app.extensions["noe"].close()


def test_health_endpoints(client: FlaskClient, app: Flask) -> None:
    for path in ("/livez", "/healthz"):
        resp = client.get(path)
        assert resp.status_code == 200 and resp.text == "ok\n"
    resp = client.get("/readyz")
    assert resp.status_code == 200 and resp.get_json()["status"] == "ready"
    assert client.get("/mutate").status_code == 405
    assert client.get("/nope").get_json()["code"] == 404
    app.extensions["noe"].shutting_down = True
    assert client.get("/readyz").status_code == 503
    assert client.get("/livez").status_code == 200


def test_metrics_and_log_line(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    app = make_app(metrics=metrics)
    try:
        client = app.test_client()
        with caplog.at_level(logging.INFO, logger="noe.admission"):
            p = pod(["arm:1"], name="")
            p["metadata"].pop("name")
            p["metadata"]["generateName"] = "web-abc-"
            post(client, admission_review(p, uid="u-42"))
            post(client, admission_review(pod(["arm:1", "x86:1"])))
            post(client, admission_review(pod(["arm:1"]), "UPDATE", old_object=pod(["arm:1"])))
            client.post("/mutate", data=b"zzz")
        records = [r for r in caplog.records if r.name == "noe.admission"]
        fields = records[0].fields  # type: ignore[attr-defined]
        assert fields["uid"] == "u-42" and fields["generateName"] == "web-abc-" and fields["name"] is None
        assert fields["decision"] == "mutated" and fields["images"] == ["arm:1"]
        assert {"duration_ms", "warnings", "cache_hits", "kind", "operation", "namespace"} <= set(fields)
        sample = metrics.registry.get_sample_value
        admitted = {"resource_namespace": "default", "resource_kind": "Pod"}
        assert sample("noe_admissions_total", {**admitted, "decision": "mutated"}) == 1
        assert sample("noe_admissions_total", {**admitted, "decision": "denied"}) == 1
        assert sample("noe_hook_update_skip_total", {"resource_kind": "Pod", "operation": "UPDATE"}) == 1
        assert sample("noe_hook_arch_selector_injected_total", {"namespace": "default", "selector": "affinity"}) == 1
        assert sample("noe_bad_requests_total", {"reason": "not_json"}) == 1
        assert sample("noe_admission_duration_seconds_count", {"decision": "mutated"}) == 1
    finally:
        app.extensions["noe"].close()


class _NotListedYet:
    """A policy source whose first list has not answered (the cluster's watch at start-up)."""

    ready = False

    def settings_for(self, base: PolicySettings, *, namespace: str, pod_labels: Any) -> Any:
        raise AssertionError("no admission is sent to a webhook that is not ready")


def test_readyz_waits_for_the_placement_policies_to_be_listed() -> None:
    source = _NotListedYet()
    app = make_app(policies=source)
    try:
        client = app.test_client()
        resp = client.get("/readyz")
        assert resp.status_code == 503 and resp.get_json()["status"] == "placement policies not listed yet"
        source.ready = True
        assert client.get("/readyz").status_code == 200
    finally:
        app.extensions["noe"].close()


def test_policies_are_applied_and_named_in_the_log_line(caplog: pytest.LogCaptureFixture) -> None:
    from noe_core import testing

    policies = testing.policies(
        testing.cluster_policy("arm-first", preferredArchitectures=[{"architecture": "arm64", "weight": 90}]),
        testing.placement_policy("team", "team-a", matchNodeLabels=["team"]),
    )
    app = make_app(policies=policies)
    try:
        client = app.test_client()
        with caplog.at_level(logging.INFO, logger="noe.admission"):
            review = admission_review(pod(["multi:1"], namespace="team-a", labels={"team": "a"}))
            status, body = post(client, review)
        assert status == 200
        placed = patched(review, body["response"])
        assert placed["metadata"]["annotations"] == {
            "arch.noe.adevinta.com/policies": "ClusterPlacementPolicy/arm-first,PlacementPolicy/team-a/team"
        }
        preferred = placed["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert [(t["preference"]["matchExpressions"][0]["values"], t["weight"]) for t in preferred] == [(["arm64"], 90)]
        (record,) = [r for r in caplog.records if r.name == "noe.admission"]
        assert record.fields["policies"] == [  # type: ignore[attr-defined]
            "ClusterPlacementPolicy/arm-first",
            "PlacementPolicy/team-a/team",
        ]
    finally:
        app.extensions["noe"].close()
