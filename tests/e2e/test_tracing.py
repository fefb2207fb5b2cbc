"""Tracing end to end: ``noe serve`` with the standard ``OTEL_*`` variables, spans read by a local OTLP/HTTP receiver.

The real stack: a ``noe serve`` subprocess (2 workers), the real registry
(anonymous) and a token-auth registry behind the tests' token server, the
Kubernetes API stand-in holding the pull Secret and receiving the Events, and
an OTLP/HTTP receiver decoding what the OpenTelemetry exporter sends. The trees
asserted are what an on-call engineer sees in a tracing backend.
"""

from __future__ import annotations

import base64
import json
import secrets
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core.testing import admission_review, pod
from tests.support.certs import make_ca
from tests.support.fake_kube_api import FakeKubeAPI, pull_secret, start_fake_kube_api
from tests.support.images import push_docker_manifest_list, push_docker_single
from tests.support.noe_serve import NoeProcess, apply, archs_allowed, start_noe, uid
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, start_otlp_receiver
from tests.support.registry_server import RegistryServer
from tests.support.token_server import TokenServer

pytestmark = [pytest.mark.e2e, pytest.mark.registry]

KUBE_TOKEN = "kube-tracing-token-" + uuid.uuid4().hex


def traceparent() -> tuple[str, str, str]:
    """A fresh W3C ``traceparent`` (sampled) and its trace id and parent span id."""
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent}-01", trace_id, parent


def post(noe: NoeProcess, review: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    with noe.session() as s, s.post(noe.url + "/mutate", json=review, headers=headers or {}, timeout=20) as resp:
        assert resp.status_code == 200, resp.text
        answer: dict[str, Any] = resp.json()["response"]
    return answer


def in_trace(trace_id: str, spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def named(name: str, spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def has(trace_id: str, *names: str) -> Callable[[list[ReceivedSpan]], bool]:
    return lambda spans: all(named(n, in_trace(trace_id, spans)) for n in names)


def exchanges(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """The registry HTTP exchanges (token servers' included) among ``spans``."""
    return [s for s in spans if s.kind == "client" and s.name.startswith("registry ")]


def descendants(root: ReceivedSpan, spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    children = [s for s in spans if s.parent_span_id == root.span_id]
    return children + [d for c in children for d in descendants(c, spans)]


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    with start_otlp_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    ca = make_ca("tracing kube CA", tmp_path_factory.mktemp("tracing-kube-ca"))
    with start_fake_kube_api(ca, tokens=(KUBE_TOKEN,)) as api:
        yield api


def _start(work: Path, kube_api: FakeKubeAPI, env: dict[str, str], *extra: str) -> NoeProcess:
    kubeconfig = kube_api.write_kubeconfig(work / "kubeconfig", token=KUBE_TOKEN)
    platforms = work / "platforms.json"
    platforms.write_text(json.dumps({"static.example/*": ["linux/amd64", "linux/arm64"]}))
    args = [
        "--kubeconfig",
        str(kubeconfig),
        "--image-platforms",
        str(platforms),
        "--insecure-registries",
        "127.0.0.1:*",
        "--admission-deadline",
        "8",
        "--workers",
        "2",
        "--threads",
        "4",
        "--state-dir",
        str(work / "state"),
        *extra,
    ]
    return start_noe(work, args, None, env=env)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, kube_api: FakeKubeAPI, otlp: OtlpReceiver) -> Iterator[NoeProcess]:
    env = {
        # The generic endpoint: the exporter appends /v1/traces.
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.base_endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=e2e",
    }
    proc = _start(tmp_path_factory.mktemp("tracing-noe"), kube_api, env)
    try:
        yield proc
    finally:
        proc.stop()


# ----------------------------------------------------------------------------- the span tree


def test_an_admission_is_one_trace_continuing_the_api_servers_with_lookups_exchanges_and_api_calls(  # noqa: PLR0917
    traced: NoeProcess,
    otlp: OtlpReceiver,
    kube_api: FakeKubeAPI,
    registry: RegistryServer,
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_credentials: tuple[str, str],
    make_repo: Callable[..., str],
) -> None:
    public = push_docker_manifest_list(registry, make_repo(), "v1")
    private = push_docker_single(token_registry, make_repo("private/"), "v1", "arm64")
    secret = pull_secret(token_registry.host, *token_credentials, name="robot", namespace="traced")
    kube_api.add_secret("traced", "robot", secret)
    p = pod([public.reference, private.reference], namespace="traced", name="traced-1")
    p["spec"]["imagePullSecrets"] = [{"name": "robot"}]
    review = admission_review(p, uid=uid())
    header, trace_id, parent = traceparent()

    response = post(traced, review, {"traceparent": header})
    assert "warnings" not in response, response.get("warnings")
    assert archs_allowed(apply(review, response)) == {"arm64"}

    spans = in_trace(trace_id, otlp.wait_for(has(trace_id, "admission", "kubernetes POST")))
    # The admission continues the API server's trace: its trace id, and its span as parent.
    (admission,) = named("admission", spans)
    assert admission.parent_span_id == parent
    assert admission.kind == "server"
    assert admission.attributes["noe.admission.uid"] == review["request"]["uid"]
    assert admission.attributes["noe.admission.kind"] == "Pod"
    assert admission.attributes["k8s.namespace.name"] == "traced"
    assert admission.attributes["noe.admission.decision"] == "mutated"
    assert admission.attributes["http.response.status_code"] == 200
    assert admission.resource["service.name"] == "noe-webhook"
    assert admission.resource["deployment.environment"] == "e2e"
    assert not admission.error
    # Every span of the trace hangs from the admission.
    assert {s.span_id for s in descendants(admission, spans)} == {s.span_id for s in spans} - {admission.span_id}

    # One lookup per image, on the lookup threads, yet children of the admission.
    lookups = named("image lookup", spans)
    assert sorted(s.attributes["noe.image"] for s in lookups) == sorted([public.reference, private.reference])
    for lookup in lookups:
        assert lookup.parent_span_id == admission.span_id
        assert lookup.attributes["thread.name"].startswith("noe-lookup")
        assert lookup.attributes["thread.name"] != admission.attributes["thread.name"]
        assert not lookup.error
    by_image = {s.attributes["noe.image"]: s for s in lookups}
    assert by_image[private.reference].attributes["noe.image.platforms"] == "linux/arm64/v8"
    assert by_image[private.reference].attributes["noe.image.digest"] == private.digest

    # The registry exchanges are the lookups' descendants: method, host, status, bytes.
    public_exchanges = exchanges(descendants(by_image[public.reference], spans))
    assert public_exchanges, "the public image's manifest list was not fetched"
    for exchange in public_exchanges:
        assert exchange.kind == "client"
        assert exchange.attributes["server.address"] == "127.0.0.1"
        assert exchange.attributes["server.port"] == registry.port
        assert exchange.attributes["http.request.method"] == exchange.name.split()[1]
    # --insecure-registries: HTTPS first, which this plain-HTTP registry does not speak, then HTTP.
    tried, manifest = sorted(
        (s for s in public_exchanges if s.attributes["url.full"].endswith("/manifests/v1")), key=lambda s: s.start_ns
    )
    assert tried.attributes["url.full"].startswith("https://") and tried.error
    assert tried.attributes["error.type"] == "TLSFailure" and "TLS verification failed" in tried.status_message
    assert manifest.attributes["url.full"] == f"http://{registry.host}/v2/{public.repository}/manifests/v1"
    assert manifest.name == "registry GET" and not manifest.error
    assert manifest.attributes["http.response.status_code"] == 200
    assert manifest.attributes["http.response.body.size"] == len(public.manifest)
    # The manifest list's entries are checked with HEADs (no body).
    heads = named("registry HEAD", public_exchanges)
    assert len(heads) == len(public.children)
    assert all("http.response.body.size" not in h.attributes for h in heads)

    # The token registry: a 401, token requests (anonymous, then bob's) whose exchanges are the token
    # server's, then the manifest and the config blob with bob's token.
    private_tree = descendants(by_image[private.reference], spans)
    tokens = named("registry token", private_tree)
    assert {t.attributes["noe.token.grant"] for t in tokens} == {"anonymous", "basic"}
    for token in tokens:
        assert token.attributes["noe.registry"] == token_registry.host
        (token_exchange,) = [s for s in private_tree if s.parent_span_id == token.span_id]
        assert token_exchange.name == "registry GET"
        assert token_exchange.attributes["server.port"] == token_server.port
        assert token_exchange.attributes["url.full"] == token_server.realm  # without scope= or service=
        assert token_exchange.attributes["http.response.status_code"] == 200
        assert token_exchange.attributes["http.response.body.size"] > 0
    registry_exchanges = [s for s in exchanges(private_tree) if s.attributes["server.port"] == token_registry.port]
    answered = sorted(
        (s for s in registry_exchanges if "http.response.status_code" in s.attributes), key=lambda s: s.start_ns
    )
    assert all(s.attributes["error.type"] == "TLSFailure" for s in registry_exchanges if s not in answered)
    statuses = [s.attributes["http.response.status_code"] for s in answered]
    assert statuses[0] == 401 and statuses[-1] == 200, statuses
    refused = answered[0]
    assert refused.error and refused.attributes["error.type"] == "401"
    (config_digest,) = private.config_digests.values()
    blob = next(s for s in answered if s.attributes["url.full"].endswith(f"/blobs/{config_digest}"))
    assert blob.attributes["http.response.status_code"] == 200 and blob.attributes["http.response.body.size"] > 0

    # The Kubernetes API calls: the pull Secret (read for the lookups) and the Event (written after the answer).
    (secret_get,) = named("kubernetes GET", spans)
    assert secret_get.parent_span_id == admission.span_id
    assert secret_get.attributes["url.full"] == f"{kube_api.url}/api/v1/namespaces/traced/secrets/robot"
    assert secret_get.attributes["http.response.status_code"] == 200
    assert secret_get.attributes["http.response.body.size"] > 0
    event_posts = named("kubernetes POST", spans)
    assert all(e.parent_span_id == admission.span_id for e in event_posts)
    assert {e.attributes["http.response.status_code"] for e in event_posts} == {201}
    assert {e.attributes["thread.name"] for e in event_posts} == {"noe-events"}  # off the request path


def test_no_credential_in_any_span(  # noqa: PLR0917
    traced: NoeProcess,
    otlp: OtlpReceiver,
    kube_api: FakeKubeAPI,
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_credentials: tuple[str, str],
    make_repo: Callable[..., str],
) -> None:
    """Every string of every span received (this test's admission's, and the module's before it): no secret.

    One image behind Basic auth (the password goes to the registry itself, on every exchange) and
    one behind a token server (the password goes to the token server, the token to the registry).
    """
    behind_token = push_docker_manifest_list(token_registry, make_repo("private/"), "v1")
    behind_basic = push_docker_single(basic_registry, make_repo("private/"), "v1", "arm64")
    secrets_ = {
        "robot": pull_secret(token_registry.host, *token_credentials, name="robot", namespace="secretive"),
        "alice": pull_secret(basic_registry.host, *basic_credentials, name="alice", namespace="secretive"),
    }
    for name, secret in secrets_.items():
        kube_api.add_secret("secretive", name, secret)
    p = pod([behind_token.reference, behind_basic.reference], namespace="secretive", name="secretive")
    p["spec"]["imagePullSecrets"] = [{"name": name} for name in secrets_]
    header, trace_id, _ = traceparent()
    response = post(traced, admission_review(p, uid=uid()), {"traceparent": header})
    assert "warnings" not in response, response.get("warnings")
    spans = in_trace(trace_id, otlp.wait_for(has(trace_id, "admission", "registry token", "kubernetes POST")))
    # Both registries were read with the credentials: the check below would prove nothing otherwise.
    assert token_server.issued(), "no token was issued"
    basic_answers = [
        s.attributes.get("http.response.status_code")
        for s in exchanges(spans)
        if s.attributes["server.port"] == basic_registry.port
    ]
    assert 200 in basic_answers, basic_answers
    forbidden = [
        "Bearer ",
        "Basic ",
        "Authorization",
        ".dockerconfigjson",
        KUBE_TOKEN,
        *token_server.issued(),
    ]
    for user, password in (token_credentials, basic_credentials):
        forbidden += [password, base64.b64encode(f"{user}:{password}".encode()).decode()]
    forbidden += [secret["data"][".dockerconfigjson"] for secret in secrets_.values()]
    for span in otlp.spans():
        for text in span.texts():
            for needle in forbidden:
                assert needle not in text, f"{span.name} carries a credential ({text[:80]!r})"
        for value in span.attributes.values():
            assert "?" not in str(value), f"{span.name}: a query string in {value!r}"


def test_a_warm_admission_without_traceparent_starts_its_own_trace_with_no_exchange(
    traced: NoeProcess, otlp: OtlpReceiver, registry: RegistryServer, make_repo: Callable[..., str]
) -> None:
    image = push_docker_single(registry, make_repo(), "v1", "amd64").reference
    p = pod([image], namespace="warm", name="warm")
    # Dry runs: no Event is written, so nothing but the admission may join the warm one's trace.
    cold, warm = admission_review(p, uid=uid(), dry_run=True), admission_review(p, uid=uid(), dry_run=True)
    with traced.session() as s:  # one kept-alive connection: one worker, whose cache the first one fills
        for review in (cold, warm):
            with s.post(traced.url + "/mutate", json=review, timeout=20) as resp:
                assert resp.status_code == 200 and "patch" in resp.json()["response"]

    def admission_of(review: dict[str, Any], spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [
            s for s in named("admission", spans) if s.attributes.get("noe.admission.uid") == review["request"]["uid"]
        ]

    spans = otlp.wait_for(lambda got: bool(admission_of(warm, got)) and bool(admission_of(cold, got)))
    ((first,), (second,)) = admission_of(cold, spans), admission_of(warm, spans)
    assert first.parent_span_id == second.parent_span_id == ""  # roots: nobody sent a traceparent
    assert first.attributes["noe.admission.dry_run"] is True
    assert first.trace_id != second.trace_id
    assert named("image lookup", in_trace(first.trace_id, spans))
    assert first.attributes["noe.registry.requests"] > 0
    # Answered from memory: the trace is the admission alone.
    assert [s.name for s in in_trace(second.trace_id, spans)] == ["admission"]
    assert second.attributes["noe.cache.hits"] >= 1 and second.attributes["noe.registry.requests"] == 0


def test_a_failed_lookup_is_marked_and_its_admission_is_not(
    traced: NoeProcess, otlp: OtlpReceiver, registry: RegistryServer, make_repo: Callable[..., str]
) -> None:
    missing = f"{registry.host}/{make_repo()}:nope"
    review = admission_review(pod([missing], namespace="strictly", name="missing"), uid=uid())
    header, trace_id, _ = traceparent()
    post(traced, review, {"traceparent": header})
    spans = in_trace(trace_id, otlp.wait_for(has(trace_id, "admission", "image lookup")))
    (lookup,) = named("image lookup", spans)
    assert lookup.error and lookup.attributes["error.type"] == "RegistryError"
    assert (
        "HTTP 404" in lookup.status_message
        and missing.split("/", 1)[1].split(":", maxsplit=1)[0] in lookup.status_message
    )
    (exchange,) = [s for s in exchanges(spans) if "http.response.status_code" in s.attributes]
    assert exchange.parent_span_id == lookup.span_id
    assert exchange.attributes["http.response.status_code"] == 404 and exchange.error
    (admission,) = named("admission", spans)
    assert not admission.error and admission.attributes["noe.admission.decision"] == "allowed"  # with a warning


def test_a_malformed_traceparent_starts_a_new_trace(traced: NoeProcess, otlp: OtlpReceiver) -> None:
    review = admission_review(pod(["static.example/app:1"], namespace="bad-parent"), uid=uid())
    post(traced, review, {"traceparent": "00-zz-not-a-trace-01"})
    spans = otlp.wait_for(
        lambda got: any(s.attributes.get("noe.admission.uid") == review["request"]["uid"] for s in got)
    )
    (admission,) = [s for s in spans if s.attributes.get("noe.admission.uid") == review["request"]["uid"]]
    assert admission.parent_span_id == "" and len(admission.trace_id) == 32


def test_a_refused_request_is_a_span_with_its_status(traced: NoeProcess, otlp: OtlpReceiver) -> None:
    header, trace_id, _ = traceparent()
    with (
        traced.session() as s,
        s.post(
            traced.url + "/mutate",
            data=b"not json",
            headers={"traceparent": header, "Content-Type": "application/json"},
        ) as resp,
    ):
        assert resp.status_code == 400
    (admission,) = in_trace(trace_id, otlp.wait_for(has(trace_id, "admission")))
    assert admission.attributes["http.response.status_code"] == 400
    assert "noe.admission.uid" not in admission.attributes


# ----------------------------------------------------------------------------- shutdown, off, not installed


def test_sigterm_flushes_the_spans_not_yet_exported(
    tmp_path: Path, kube_api: FakeKubeAPI, registry: RegistryServer, make_repo: Callable[..., str]
) -> None:
    image = push_docker_manifest_list(registry, make_repo(), "v1").reference
    with start_otlp_receiver() as otlp:
        # Spans wait ten minutes in the batch: only the flush at exit can send them.
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "600000"}
        noe = _start(tmp_path, kube_api, env)
        try:
            header, trace_id, _ = traceparent()
            review = admission_review(pod([image], namespace="flush"), uid=uid())
            post(noe, review, {"traceparent": header})
            time.sleep(0.5)
            assert otlp.spans() == []
            noe.proc.send_signal(signal.SIGTERM)
            started = time.monotonic()
            assert noe.proc.wait(30) == 0
            assert time.monotonic() - started < 15
        finally:
            noe.stop()
        spans = in_trace(trace_id, otlp.wait_for(has(trace_id, "admission", "image lookup", "registry GET"), 2))
    (admission,) = named("admission", spans)
    assert admission.attributes["noe.admission.uid"] == review["request"]["uid"]
    assert "lost" not in noe.output()


def test_without_an_exporter_nothing_is_traced(
    tmp_path: Path, kube_api: FakeKubeAPI, registry: RegistryServer, make_repo: Callable[..., str]
) -> None:
    image = push_docker_single(registry, make_repo(), "v1").reference
    with start_otlp_receiver() as otlp:
        # The receiver listens where the SDK's own default would send (no OTEL_* variable points there).
        noe = _start(tmp_path, kube_api, {"OTEL_BSP_SCHEDULE_DELAY": "50"})
        try:
            header, _, _ = traceparent()
            response = post(noe, admission_review(pod([image], namespace="off"), uid=uid()), {"traceparent": header})
            assert archs_allowed(apply({"request": {"object": pod([image])}}, response)) == {"arm64"}
            output = noe.output()
        finally:
            noe.stop()
        time.sleep(0.3)
        assert otlp.spans() == [] and otlp.refused == 0
    startup = next(json.loads(line) for line in output.splitlines() if '"startup"' in line)
    assert startup["config"]["tracing"]["enabled"] is False
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in startup["config"]["tracing"]["off_because"]


BLOCK_OPENTELEMETRY = "import sys\nsys.modules['opentelemetry'] = None  # as if the tracing extra were not installed\n"


def test_without_the_extra_an_endpoint_is_one_warning_and_admissions_go_on(
    tmp_path: Path, kube_api: FakeKubeAPI, otlp: OtlpReceiver
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_OPENTELEMETRY)
    before = len(otlp.spans())
    env = {"PYTHONPATH": str(site), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.endpoint}
    noe = _start(tmp_path, kube_api, env)
    try:
        response = post(noe, admission_review(pod(["static.example/app:1"], namespace="no-extra"), uid=uid()))
        assert response["allowed"] and "patch" in response
    finally:
        noe.stop()
    output = noe.output()
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    warnings = [line for line in lines if line["level"] == "warning" and "noe-webhook[tracing]" in line["msg"]]
    assert len(warnings) == 1, output[-3000:]  # once, from the master: not once per worker
    assert "Traceback" not in output
    time.sleep(0.3)
    assert len(otlp.spans()) == before


def test_otel_sdk_disabled_wins_over_an_endpoint(tmp_path: Path, kube_api: FakeKubeAPI, otlp: OtlpReceiver) -> None:
    before = len(otlp.spans())
    env = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.endpoint}
    noe = _start(tmp_path, kube_api, env)
    try:
        post(noe, admission_review(pod(["static.example/app:1"], namespace="disabled"), uid=uid()))
    finally:
        noe.stop()
    assert len(otlp.spans()) == before
    startup = next(json.loads(line) for line in noe.output().splitlines() if '"startup"' in line)
    assert startup["config"]["tracing"] == {"enabled": False, "off_because": "OTEL_SDK_DISABLED=true"}
