"""``noe serve`` end to end: a real subprocess over TLS, real registries, a real HTTPS Kubernetes API peer.

One server process is shared by the module (start-up costs seconds on a small
machine); tests use distinct namespaces, names and images so they do not
depend on each other's order, except the last one, which reads the whole
output of the process.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography import x509

from noe_core.testing import admission_review, daemonset, pod
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.images import PushedImage, push_docker_single
from tests.support.noe_serve import NoeProcess, apply, archs_allowed, linux_archs, post_review, start_noe, uid
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.registry]

KUBE_TOKEN = "kube-e2e-token-" + uuid.uuid4().hex
DEADLINE = 2.0
SLACK = 1.5


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("e2e kube CA", tmp_path_factory.mktemp("e2e-kube-ca"))


@pytest.fixture(scope="module")
def kube_api(kube_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(kube_ca, tokens=(KUBE_TOKEN,)) as api:
        yield api


@pytest.fixture(scope="module")
def hanging_registry() -> Iterator[str]:
    """Accepts TCP connections (the kernel's backlog) and never answers a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=256)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture(scope="module")
def serving_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("e2e serving CA", tmp_path_factory.mktemp("e2e-serving-ca"))


@pytest.fixture(scope="module")
def live_certs(tmp_path_factory: pytest.TempPathFactory, serving_ca: CA) -> Path:
    """A directory laid out like a mounted cert-manager Secret (tls.crt, tls.key)."""
    live = tmp_path_factory.mktemp("e2e-live-certs")
    pair = serving_ca.issue(["127.0.0.1", "localhost"], name="first")
    (live / "tls.crt").write_bytes(pair.cert_file.read_bytes())
    (live / "tls.key").write_bytes(pair.key_file.read_bytes())
    return live


@pytest.fixture(scope="module")
def noe(  # noqa: PLR0917
    tmp_path_factory: pytest.TempPathFactory,
    registry: RegistryServer,
    basic_registry: RegistryServer,
    kube_api: FakeKubeAPI,
    live_certs: Path,
    serving_ca: CA,
) -> Iterator[NoeProcess]:
    work = tmp_path_factory.mktemp("e2e-noe")
    kubeconfig = kube_api.write_kubeconfig(work / "kubeconfig", token=KUBE_TOKEN)
    platforms = work / "platforms.json"
    platforms.write_text(json.dumps({"static.example/*": ["linux/amd64", "linux/arm64"]}))
    proc = start_noe(
        work,
        [
            "--cert-dir",
            str(live_certs),
            "--kubeconfig",
            str(kubeconfig),
            "--image-platforms",
            str(platforms),
            "--insecure-registries",
            "127.0.0.1:*",
            "--strict-namespaces",
            "strict",
            "--admission-deadline",
            str(DEADLINE),
            "--workers",
            "2",
            "--threads",
            "8",
            "--state-dir",
            str(work / "state"),
        ],
        serving_ca.ca_file,
    )
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def http(noe: NoeProcess) -> Iterator[requests.Session]:
    with noe.session() as s:
        yield s


# ----------------------------------------------------------------------------- admissions


def test_multi_arch_pod(noe: NoeProcess, http: requests.Session, pushed_images: dict[str, PushedImage]) -> None:
    image = pushed_images["docker-manifest-list"]
    review = admission_review(pod([image.reference], namespace="e2e-multi"), uid=uid())
    response = post_review(http, noe, review)
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    assert "warnings" not in response
    assert archs_allowed(apply(review, response)) == linux_archs(image) & {"amd64", "arm64", "ppc64le", "s390x"}


def test_single_arch_arm64_pod(noe: NoeProcess, http: requests.Session, pushed_images: dict[str, PushedImage]) -> None:
    image = pushed_images["docker-single-arm64"]
    review = admission_review(pod([image.reference], namespace="e2e-arm"), uid=uid())
    response = post_review(http, noe, review)
    assert archs_allowed(apply(review, response)) == {"arm64"}


def test_no_common_architecture_is_denied(
    noe: NoeProcess, http: requests.Session, pushed_images: dict[str, PushedImage]
) -> None:
    arm, x86 = pushed_images["docker-single-arm64"], pushed_images["oci-single-amd64"]
    review = admission_review(pod([arm.reference, x86.reference], namespace="e2e-deny"), uid=uid())
    response = post_review(http, noe, review)
    assert response["allowed"] is False and "patch" not in response
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert arm.repository in message and x86.repository in message


def _pull_secret(registry: RegistryServer, user: str, password: str) -> dict[str, Any]:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = {"auths": {registry.host: {"username": user, "password": password, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": "e2e-private"},
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


def test_private_image_through_a_pull_secret(  # noqa: PLR0917
    noe: NoeProcess,
    http: requests.Session,
    kube_api: FakeKubeAPI,
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
) -> None:
    image = basic_pushed_images["docker-single-arm64"]
    kube_api.add_secret("e2e-private", "regcred", _pull_secret(basic_registry, *basic_credentials))
    p = pod([image.reference], namespace="e2e-private", name="private-1")
    p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    review = admission_review(p, uid=uid())
    response = post_review(http, noe, review)
    assert "warnings" not in response, response.get("warnings")
    assert archs_allowed(apply(review, response)) == {"arm64"}
    gets = [r for r in kube_api.requests_snapshot() if r.method == "GET"]
    assert any(r.path == "/api/v1/namespaces/e2e-private/secrets/regcred" for r in gets)
    assert all(r.auth == f"token:{KUBE_TOKEN}" for r in gets)


def test_private_image_on_a_token_registry_through_a_pull_secret(  # noqa: PLR0917
    noe: NoeProcess,
    http: requests.Session,
    kube_api: FakeKubeAPI,
    token_registry: RegistryServer,
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
) -> None:
    image = token_pushed_images["docker-manifest-list"]
    secret = _pull_secret(token_registry, *token_credentials)
    secret["metadata"] = {"name": "robot", "namespace": "e2e-token"}
    kube_api.add_secret("e2e-token", "robot", secret)
    p = pod([image.reference], namespace="e2e-token", name="private-token")
    without = post_review(http, noe, admission_review(p, uid=uid()))
    assert "patch" not in without and any("cannot inspect" in w for w in without["warnings"])
    p["spec"]["imagePullSecrets"] = [{"name": "robot"}]
    review = admission_review(p, uid=uid())
    response = post_review(http, noe, review)
    assert "warnings" not in response, response.get("warnings")
    assert archs_allowed(apply(review, response)) == linux_archs(image) & {"amd64", "arm64", "ppc64le", "s390x"}


def test_missing_pull_secret_is_a_warning_and_anonymous_access(
    noe: NoeProcess, http: requests.Session, basic_pushed_images: dict[str, PushedImage]
) -> None:
    image = basic_pushed_images["oci-single-amd64"]
    p = pod([image.reference], namespace="e2e-private", name="private-2")
    p["spec"]["imagePullSecrets"] = [{"name": "absent"}]
    response = post_review(http, noe, admission_review(p, uid=uid()))
    assert response["allowed"] is True and "patch" not in response
    warnings = response["warnings"]
    assert any("e2e-private/absent not found" in w for w in warnings), warnings
    assert any("cannot inspect" in w for w in warnings), warnings


def test_strict_namespace_denies_an_image_that_cannot_be_inspected(
    noe: NoeProcess, http: requests.Session, registry: RegistryServer, pushed_images: dict[str, PushedImage]
) -> None:
    missing = f"{registry.host}/does/not-exist:1"
    ok = pushed_images["docker-single-arm64"].reference
    strict = post_review(http, noe, admission_review(pod([ok, missing], namespace="strict"), uid=uid()))
    assert strict["allowed"] is False and strict["status"]["code"] == 403
    assert "strict" in strict["status"]["message"]
    lenient = post_review(http, noe, admission_review(pod([ok, missing], namespace="lenient"), uid=uid()))
    assert lenient["allowed"] is True and any("does/not-exist" in w for w in lenient["warnings"])


def _owned_pod(image: str, namespace: str, rs: str) -> dict[str, Any]:
    p = pod([image], namespace=namespace)
    p["metadata"].pop("name")
    p["metadata"]["generateName"] = f"{rs}-"
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": uid(), "controller": True}
    ]
    return p


def test_events_on_pod_and_owner_but_not_on_dry_run(
    noe: NoeProcess, http: requests.Session, kube_api: FakeKubeAPI, pushed_images: dict[str, PushedImage]
) -> None:
    image = pushed_images["docker-single-arm64"].reference
    dry = admission_review(_owned_pod(image, "e2e-events", "dry-rs"), dry_run=True, uid=uid())
    dry_response = post_review(http, noe, dry)
    assert dry_response["allowed"] is True and "patch" in dry_response  # same answer as without dry-run
    post_review(http, noe, admission_review(_owned_pod(image, "e2e-events", "web-rs"), uid=uid()))

    def ours() -> list[dict[str, Any]]:
        return [e for e in kube_api.events_snapshot() if e["metadata"]["namespace"] == "e2e-events"]

    end = time.monotonic() + 15
    while time.monotonic() < end and len(ours()) < 2:
        time.sleep(0.05)
    time.sleep(0.5)  # anything the dry-run might (wrongly) have queued has had time to land too
    events = ours()
    assert len(events) == 2, events
    by_kind = {e["involvedObject"]["kind"]: e for e in events}
    assert set(by_kind) == {"Pod", "ReplicaSet"}
    pod_event, rs_event = by_kind["Pod"], by_kind["ReplicaSet"]
    for event in events:
        assert event["type"] == "Normal" and event["reason"] == "InjectedNodeSelector"
        assert "arm64" in event["message"]
        assert event["reportingComponent"] and event["reportingInstance"]
    assert pod_event["metadata"]["name"].startswith("web-rs-")
    assert "name" not in pod_event["involvedObject"]  # not named yet at admission
    assert rs_event["involvedObject"]["name"] == "web-rs"
    assert not any("dry-rs" in json.dumps(e) for e in kube_api.events_snapshot())


def test_denied_pod_gets_a_warning_event(
    noe: NoeProcess, http: requests.Session, kube_api: FakeKubeAPI, pushed_images: dict[str, PushedImage]
) -> None:
    arm, x86 = pushed_images["docker-single-arm64"].reference, pushed_images["oci-single-amd64"].reference
    p = pod([arm, x86], namespace="e2e-warn", name="split-brain")
    assert post_review(http, noe, admission_review(p, uid=uid()))["allowed"] is False
    end = time.monotonic() + 15
    while time.monotonic() < end:
        events = [e for e in kube_api.events_snapshot() if e["metadata"]["namespace"] == "e2e-warn"]
        if events:
            break
        time.sleep(0.05)
    assert events[0]["type"] == "Warning" and events[0]["reason"] == "FailedToInjectNodeSelector"
    assert events[0]["involvedObject"]["name"] == "split-brain"


def test_daemonset_update_is_mutated_and_pod_update_untouched(
    noe: NoeProcess, http: requests.Session, pushed_images: dict[str, PushedImage]
) -> None:
    image = pushed_images["docker-single-arm64"].reference
    ds = daemonset([image], namespace="e2e-ds")
    review = admission_review(ds, "UPDATE", old_object=ds, uid=uid())
    response = post_review(http, noe, review)
    assert archs_allowed(apply(review, response)) == {"arm64"}
    p = pod([image], namespace="e2e-ds")
    untouched = post_review(http, noe, admission_review(p, "UPDATE", old_object=p, uid=uid()))
    assert untouched == {"uid": untouched["uid"], "allowed": True}


def test_v1beta1_answered_in_v1beta1(
    noe: NoeProcess, http: requests.Session, pushed_images: dict[str, PushedImage]
) -> None:
    review = admission_review(
        pod([pushed_images["oci-single-amd64"].reference]), api_version="admission.k8s.io/v1beta1", uid=uid()
    )
    with http.post(noe.url + "/mutate", json=review, timeout=15) as resp:
        body = resp.json()
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["kind"] == "AdmissionReview"
    assert archs_allowed(apply(review, body["response"])) == {"amd64"}


@pytest.mark.parametrize(
    ("data", "status", "needle"),
    [
        (b"{not json", 400, "not JSON"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": {}}).encode(),
            400,
            "not AdmissionReview",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"kind": {"kind": "Pod"}, "operation": "CREATE", "object": {}},
                }
            ).encode(),
            400,
            "uid",
        ),
        (b'{"a": "' + b"x" * (5 * 1024 * 1024) + b'"}', 400, "larger than"),
    ],
    ids=["not-json", "wrong-kind", "missing-uid", "5MiB"],
)
def test_malformed_bodies_get_a_clear_4xx_and_the_server_keeps_serving(  # noqa: PLR0917
    noe: NoeProcess,
    http: requests.Session,
    data: bytes,
    status: int,
    needle: str,
    pushed_images: dict[str, PushedImage],
) -> None:
    with http.post(noe.url + "/mutate", data=data, headers={"Content-Type": "application/json"}, timeout=30) as resp:
        assert resp.status_code == status
        assert needle in resp.json()["message"]
    review = admission_review(pod([pushed_images["docker-single-arm64"].reference]), uid=uid())
    assert post_review(http, noe, review)["allowed"] is True


def test_200_parallel_requests(noe: NoeProcess, pushed_images: dict[str, PushedImage]) -> None:
    images = [pushed_images[s] for s in ("docker-manifest-list", "docker-single-arm64", "oci-single-amd64")]
    local = threading.local()
    sessions: list[requests.Session] = []
    lock = threading.Lock()

    def one(i: int) -> bool:
        if not hasattr(local, "s"):
            local.s = noe.session()
            with lock:
                sessions.append(local.s)
        image = images[i % len(images)]
        review = admission_review(pod([image.reference], name=f"par-{i}", namespace="e2e-par"), uid=uid())
        response = post_review(local.s, noe, review, timeout=30)
        allowed = archs_allowed(apply(review, response))
        return allowed == linux_archs(image) & {"amd64", "arm64", "ppc64le", "s390x"}

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=24) as pool:
            results = list(pool.map(one, range(200)))
    finally:
        for s in sessions:
            s.close()
    assert results.count(True) == 200


def test_registry_that_never_answers_is_cut_at_the_deadline(
    noe: NoeProcess, http: requests.Session, hanging_registry: str, pushed_images: dict[str, PushedImage]
) -> None:
    ok = pushed_images["docker-single-arm64"].reference
    review = admission_review(pod([ok, f"{hanging_registry}/stuck/app:1"], namespace="e2e-hang"), uid=uid())
    started = time.monotonic()
    response = post_review(http, noe, review)
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE + SLACK, elapsed
    assert response["allowed"] is True
    assert any("stuck/app" in w and "timed out after 2s" in w for w in response["warnings"]), response
    assert archs_allowed(apply(review, response)) == {"arm64"}  # the inspected image still counts
    strict = admission_review(pod([ok, f"{hanging_registry}/stuck/other:1"], namespace="strict"), uid=uid())
    started = time.monotonic()
    denied = post_review(http, noe, strict)
    assert time.monotonic() - started < DEADLINE + SLACK
    assert denied["allowed"] is False


def _served_serial(noe: NoeProcess) -> int:
    context = ssl.create_default_context(cafile=str(noe.ca_file))
    with (
        socket.create_connection(("127.0.0.1", noe.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_replaced_certificate_files_are_used_without_restart(
    noe: NoeProcess,
    live_certs: Path,
    serving_ca: CA,
    hanging_registry: str,
    pushed_images: dict[str, PushedImage],
) -> None:
    old = x509.load_pem_x509_certificate((live_certs / "tls.crt").read_bytes()).serial_number
    assert _served_serial(noe) == old
    # an admission in flight (stuck on the hanging registry until the deadline) while the files change
    slow = admission_review(pod([f"{hanging_registry}/stuck/renew:1"], namespace="e2e-renew"), uid=uid())
    with concurrent.futures.ThreadPoolExecutor(1) as pool, noe.session() as s:
        in_flight = pool.submit(post_review, s, noe, slow)
        time.sleep(0.3)
        pair = serving_ca.issue(["127.0.0.1", "localhost"], name="renewed")
        for name, source in (("tls.key", pair.key_file), ("tls.crt", pair.cert_file)):
            tmp = live_certs / f".{name}.new"
            tmp.write_bytes(source.read_bytes())
            os.replace(tmp, live_certs / name)
        new = x509.load_pem_x509_certificate(pair.cert_file.read_bytes()).serial_number
        serials = {_served_serial(noe) for _ in range(6)}  # both workers, several handshakes
        assert serials == {new}
        assert in_flight.result(timeout=15)["allowed"] is True


def test_metrics_endpoint(noe: NoeProcess) -> None:
    with requests.Session() as s:
        s.trust_env = False
        with s.get(f"http://127.0.0.1:{noe.metrics_port}/metrics", timeout=10) as resp:
            text = resp.text
    for name in (
        "noe_admissions_total",
        "noe_admission_duration_seconds_bucket",
        "noe_registry_requests_total",
        "noe_hook_arch_selector_injected_total",
        "noe_registry_cache_hits_total",
        "noe_hook_update_skip_total",
        "noe_bad_requests_total",
        "noe_events_total",
        "noe_build_info",
        "noe_registry_request_duration_seconds_bucket",
    ):
        assert name in text, name
    # summed across the worker processes
    assert 'noe_admissions_total{decision="mutated",resource_kind="Pod",resource_namespace="e2e-par"} 200.0' in text
    assert "/stuck/" not in text and "docker-single-arm64" not in text  # never labelled by image


def test_slow_kubernetes_api_does_not_hold_the_admission(
    noe: NoeProcess, http: requests.Session, kube_api: FakeKubeAPI, registry: RegistryServer, unique_repo: str
) -> None:
    # An image no admission looked up before: it needs the registry, so the pod's Secrets are read.
    image = push_docker_single(registry, unique_repo, "v1").reference
    p = pod([image], namespace="e2e-slow-api", name="slow-api")
    p["spec"]["imagePullSecrets"] = [{"name": "never-answered"}]
    kube_api.state.delay = 6.0
    try:
        started = time.monotonic()
        response = post_review(http, noe, admission_review(p, uid=uid()))
        elapsed = time.monotonic() - started
    finally:
        kube_api.state.delay = 0.0
    assert elapsed < DEADLINE + SLACK, elapsed
    assert any("never-answered" in w and "anonymous" in w for w in response["warnings"]), response
    assert archs_allowed(apply({"request": {"object": p}}, response)) == {"arm64"}


def test_zz_logs_are_json_and_carry_no_secret(
    noe: NoeProcess, basic_credentials: tuple[str, str], token_credentials: tuple[str, str]
) -> None:
    output = noe.output()
    assert basic_credentials[1] not in output
    assert token_credentials[1] not in output
    assert KUBE_TOKEN not in output
    stdout = noe.out_path.read_text()
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    startup = [line for line in lines if line.get("event") == "startup"]
    assert len(startup) == 1 and startup[0]["config"]["admission_deadline"] == DEADLINE
    admissions = [line for line in lines if line.get("event") == "admission"]
    assert len(admissions) >= 200
    sample = next(a for a in admissions if a["namespace"] == "e2e-private")
    assert {
        "uid",
        "namespace",
        "name",
        "generateName",
        "kind",
        "operation",
        "images",
        "decision",
        "warnings",
        "duration_ms",
        "cache_hits",
    } <= set(sample)


# ----------------------------------------------------------------------------- other processes


def test_self_signed_default_and_readme_command(tmp_path: Path) -> None:
    noe = start_noe(
        tmp_path, ["--image-platforms", "examples/platforms.json", "--state-dir", str(tmp_path / "s")], None
    )
    try:
        lines = [json.loads(x) for x in noe.out_path.read_text().splitlines() if x.startswith("{")]
        hint = next(x for x in lines if x.get("event") == "self-signed")
        assert hint["try"].startswith(f"curl --cacert {noe.ca_file} ")
        assert "-d @examples/admission-review.json" in hint["try"]
        review = json.loads((ROOT / "examples/admission-review.json").read_text())
        with requests.Session() as s:
            s.trust_env = False
            with s.post(
                f"https://localhost:{noe.port}/mutate",
                data=json.dumps(review),
                headers={"Content-Type": "application/json"},
                verify=str(noe.ca_file),
                timeout=15,
            ) as r:
                response = r.json()["response"]
        assert response["allowed"] is True and response["patchType"] == "JSONPatch"
        assert noe.output().count("no Kubernetes API access") == 1
    finally:
        noe.stop()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--admission-deadline", "0"], "--admission-deadline"),
        (["--bind", "nonsense"], "--bind"),
        (["--preferred-arch", "s390x", "--cluster-schedulable-archs", "amd64,arm64"], "s390x"),
        (["--tls-cert-file", "/nonexistent.crt"], "--tls-key-file"),
        (["--image-platforms", "/nonexistent.json"], "--image-platforms"),
    ],
)
def test_invalid_setting_stops_startup_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOE_")}
    done = subprocess.run(
        [sys.executable, "-m", "noe_web", "serve", "--bind", "127.0.0.1:1", *args]
        if "--bind" not in args
        else [sys.executable, "-m", "noe_web", "serve", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and needle in errors[0], done.stderr
