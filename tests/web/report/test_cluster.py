"""``noe report`` against a live cluster: the Kubernetes list API (paginated) and the real registry.

The API is tests/support/fake_kube_api.py over HTTPS, reached through a
kubeconfig; images live on the real token-auth registry, public ones readable
anonymously and private ones only with the pods' pull secret.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from noe_web.commands import build_parser
from noe_web.report.command import run_report
from tests.support.certs import CA
from tests.support.cli import run_cli
from tests.support.fake_kube_api import FakeKubeAPI, pull_secret, start_fake_kube_api
from tests.support.images import PushedImage, push_oci_index, push_oci_single
from tests.support.registry_server import RegistryServer

TOKEN = "report-reader-token"

# shape -> status per architecture, read off tests/support/images.py's shapes (linux, default archs)
SHAPE_STATUS = {
    "oci-index-attestations": {"amd64": "runnable", "arm64": "runnable"},  # attestations ignored
    "docker-manifest-list": {"amd64": "runnable", "arm64": "runnable"},
    "docker-single-arm64": {"amd64": "blocked", "arm64": "runnable"},  # platform from the config blob
    "oci-single-amd64": {"amd64": "runnable", "arm64": "blocked"},
    "windows-index": {"amd64": "runnable", "arm64": "blocked"},  # windows entries are another OS
    "index-deleted-child": {"amd64": "runnable", "arm64": "blocked"},  # the arm64 child is gone
    "nested-index": {"amd64": "runnable", "arm64": "runnable"},
}


@pytest.fixture
def api(test_ca: CA) -> Any:
    with start_fake_kube_api(test_ca, tokens=(TOKEN,)) as server:
        yield server


def kubeconfig(api: FakeKubeAPI, tmp_path: Path, token: str = TOKEN) -> str:
    return str(api.write_kubeconfig(tmp_path / "kubeconfig", token=token))


def pod(
    namespace: str,
    name: str,
    images: list[str],
    *,
    owner: tuple[str, str] | None = None,
    secrets: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": owner[0], "name": owner[1], "controller": True}]
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}
            for i, image in enumerate(images)
        ],
    }
    if secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in secrets]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def owned(kind: str, namespace: str, name: str, owner: tuple[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {"kind": kind, "metadata": meta}


def test_pages_of_pods_and_their_owners_from_the_api(api: FakeKubeAPI, tmp_path: Path) -> None:
    pods = [pod(f"ns-{i % 3}", f"web-{i}", ["multi:1"], owner=("ReplicaSet", f"web-rs-{i % 3}")) for i in range(1100)]
    pods += [pod("ns-0", "nightly-abc", ["amd:1"], owner=("Job", "nightly-run-7")), pod("ns-0", "debug", ["arm:1"])]
    api.add_objects("pods", pods)
    api.add_objects(
        "replicasets", [owned("ReplicaSet", f"ns-{i}", f"web-rs-{i}", ("Deployment", "web")) for i in range(3)]
    )
    api.add_objects("jobs", [owned("Job", "ns-0", "nightly-run-7", ("CronJob", "nightly"))])
    platforms = tmp_path / "p.json"
    platforms.write_text(
        json.dumps({"multi:1": ["linux/amd64", "linux/arm64"], "amd:1": ["linux/amd64"], "arm:1": ["linux/arm64"]})
    )
    code, out, err = run_cli(
        *["report", "--kubeconfig", kubeconfig(api, tmp_path), "--platforms", str(platforms), "-o", "json"]
    )
    assert code == 0, err
    report = json.loads(out)
    rows = {(w["namespace"], w["kind"], w["name"]): w for w in report["workloads"]}
    assert set(rows) == {
        ("ns-0", "Deployment", "web"),
        ("ns-1", "Deployment", "web"),
        ("ns-2", "Deployment", "web"),
        ("ns-0", "CronJob", "nightly"),
        ("ns-0", "Pod", "debug"),
    }
    assert sum(rows[(f"ns-{i}", "Deployment", "web")]["pods"] for i in range(3)) == 1100
    assert rows[("ns-0", "CronJob", "nightly")]["status"] == {"amd64": "runnable", "arm64": "blocked"}
    assert report["totals"]["cpu_cores"] == 1102 * 0.25
    assert report["totals"]["runnable"]["arm64"]["pods"] == 1101

    paths = [r.path for r in api.requests_snapshot()]
    pod_pages = [p for p in paths if p.startswith("/api/v1/pods?")]
    assert len(pod_pages) == 3 and all("limit=500" in p for p in pod_pages)
    assert sum("continue=" in p for p in pod_pages) == 2
    assert any(p.startswith("/apis/apps/v1/replicasets?") for p in paths)
    assert any(p.startswith("/apis/batch/v1/jobs?") for p in paths)
    assert not any("/secrets/" in p for p in paths)  # --platforms: no registry, so no pull secret is read
    assert all(r.auth == f"token:{TOKEN}" for r in api.requests_snapshot())


def test_one_namespace_and_no_owner_lists_when_none_is_needed(api: FakeKubeAPI, tmp_path: Path) -> None:
    api.add_objects("pods", [pod("a", "x", ["multi:1"]), pod("b", "y", ["multi:1"])])
    platforms = tmp_path / "p.json"
    platforms.write_text(json.dumps({"multi:1": ["linux/amd64", "linux/arm64"]}))
    code, out, err = run_cli(
        *["report", "--kubeconfig", kubeconfig(api, tmp_path), "--platforms", str(platforms), "-n", "b", "-o", "json"]
    )
    assert code == 0, err
    assert [w["name"] for w in json.loads(out)["workloads"]] == ["y"]
    assert [r.path.split("?")[0] for r in api.requests_snapshot()] == [
        "/api/v1/namespaces/b/pods",
        # the placement policies each pod is decided with, as the webhook decides it (no CRD here: 404, flags)
        "/apis/arch.noe.adevinta.com/v1alpha1/clusterplacementpolicies",
        "/api/v1/namespaces/default/configmaps/noe-learned-platforms",  # what exec format errors proved
    ]


def test_images_learned_from_exec_format_errors_are_listed_and_left_out(api: FakeKubeAPI, tmp_path: Path) -> None:
    digest = "sha256:" + "f" * 64
    api.add_objects("pods", [pod("shop", "web-1", ["web:1"]), pod("shop", "api-1", ["api:1"])])
    proof = json.dumps({"architectures": ["arm64"], "evidence": ["shop/web-0"], "time": "2026-12-03T10:00:00Z"})
    configmap = {
        "metadata": {"name": "noe-learned-platforms", "namespace": "noe"},
        "data": {digest.replace(":", "-"): proof},
    }
    api.add_objects("configmaps", [configmap])
    platforms = tmp_path / "p.json"
    both = ["linux/amd64", "linux/arm64"]
    platforms.write_text(json.dumps({"web:1": {"platforms": both, "digest": digest}, "api:1": both}))
    args = [
        "report",
        "--kubeconfig",
        kubeconfig(api, tmp_path),
        "--platforms",
        str(platforms),
        "--noe-namespace",
        "noe",
    ]
    code, out, err = run_cli(*args, "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    status = {w["name"]: w["status"] for w in report["workloads"]}
    assert status == {
        "web-1": {"amd64": "runnable", "arm64": "blocked"},
        "api-1": {"amd64": "runnable", "arm64": "runnable"},
    }
    assert report["learned"] == [
        f"web:1: arm64 left out: {digest} failed with exec format error on arm64 (pod shop/web-0)"
    ]
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert (
        "Learned from exec format errors (noe-learned-platforms):" in out and f"web:1: arm64 left out: {digest}" in out
    )


@pytest.mark.parametrize(
    ("setup", "token", "message"),
    [
        (lambda api: setattr(api.state, "fail_with", 500), TOKEN, "500 InternalError"),
        (lambda api: None, "wrong-token", "401"),
        (lambda api: setattr(api.state, "expire_continue", True), TOKEN, "run again"),
    ],
)
def test_api_failures_exit_1_with_one_line(
    api: FakeKubeAPI, tmp_path: Path, setup: Any, token: str, message: str
) -> None:
    api.add_objects("pods", [pod("a", f"p{i}", ["x:1"]) for i in range(600)])
    setup(api)
    code, out, err = run_cli(*["report", "--kubeconfig", kubeconfig(api, tmp_path, token), "-o", "json"])
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and err.startswith("noe report: Kubernetes API:")
    assert TOKEN not in err


def test_no_api_configured_is_bad_input(tmp_path: Path) -> None:
    code, _, err = run_cli(*["report", "--kubeconfig", str(tmp_path / "missing")])
    assert code == 2 and "--kubeconfig" in err and "is not an existing file" in err
    ns = build_parser().parse_args(["report"])
    errors = io.StringIO()
    # no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, not in a pod
    assert run_report(ns, stderr=errors, stdout=io.StringIO(), environ={"HOME": str(tmp_path)}) == 2
    assert errors.getvalue() == (
        "noe report: no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or read a file with -f\n"
    )


def test_every_registry_lookup_failing_exits_1_after_the_report(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pod("a", "x", ["127.0.0.1:9/nothing/here:1", "127.0.0.1:9/nor/there:2"])))
    code, out, err = run_cli(
        *["report", "-f", str(path), "--insecure-registries", "127.0.0.1:*", "--lookup-timeout", "5", "-o", "json"]
    )
    assert code == 1
    assert "every registry lookup failed (2 images)" in err
    workload = json.loads(out)["workloads"][0]
    assert workload["status"] == {"amd64": "unknown", "arm64": "unknown"} and "127.0.0.1:9" in workload["error"]


# ------------------------------------------------------------------ the real registry


@pytest.mark.registry
def test_seven_shapes_public_and_private_by_tag_and_digest(
    api: FakeKubeAPI,
    tmp_path: Path,
    *,
    make_repo: Any,
    token_registry: RegistryServer,
    token_credentials: tuple[str, str],
    token_public_images: dict[str, PushedImage],
    token_pushed_images: dict[str, PushedImage],
) -> None:
    api.add_secret("shop", "regcred", pull_secret(token_registry.host, *token_credentials))
    pods: list[dict[str, Any]] = []
    expected: dict[str, dict[str, str]] = {}
    for shape, status in SHAPE_STATUS.items():
        for visibility, images in (("public", token_public_images), ("private", token_pushed_images)):
            pushed = images[shape]
            for how, reference in (("tag", pushed.reference), ("digest", pushed.by_digest)):
                name = f"{shape}-{visibility}-{how}"
                secrets = ("regcred",) if visibility == "private" else ()
                pods.append(pod("shop", name, [reference], secrets=secrets))
                expected[name] = status
    # a private image no pod with the secret uses: nothing it could borrow credentials or a cached answer from
    lone = push_oci_single(token_registry, make_repo("private/"), "v1")
    pods.append(pod("other", "no-secret", [lone.reference]))
    pods.append(pod("other", "missing-secret", [token_public_images["nested-index"].reference], secrets=("gone",)))
    api.add_objects("pods", pods)
    code, out, err = run_cli(
        *["report", "--kubeconfig", kubeconfig(api, tmp_path), "-o", "json", "--insecure-registries", "127.0.0.1:*"]
    )
    assert code == 0, err
    report = json.loads(out)
    rows = {w["name"]: w for w in report["workloads"]}
    for name, status in expected.items():
        assert rows[name]["status"] == status, (name, rows[name].get("error"))
        assert "error" not in rows[name]
    images = {i["image"]: i for i in report["images"]}
    manifest_list = token_pushed_images["docker-manifest-list"]
    assert images[manifest_list.by_digest]["architectures"] == ["amd64", "arm", "arm64", "ppc64le", "s390x"]
    assert rows["no-secret"]["status"] == {"amd64": "unknown", "arm64": "unknown"}
    refusal = rows["no-secret"]["error"]
    assert f"cannot inspect {lone.reference}: registry {token_registry.host} refused access" in refusal
    assert "(HTTP 401) after trying anonymous access" in refusal
    assert rows["missing-secret"]["status"] == {"amd64": "runnable", "arm64": "runnable"}
    assert "imagePullSecret other/gone not found; its images are read without it" in err
    secret_reads = [r.path for r in api.requests_snapshot() if "/secrets/" in r.path]
    assert sorted(secret_reads) == ["/api/v1/namespaces/other/secrets/gone", "/api/v1/namespaces/shop/secrets/regcred"]
    assert token_credentials[1] not in out + err


@pytest.mark.registry
def test_upgrade_hints_read_private_tags_with_the_pods_pull_secret(
    api: FakeKubeAPI,
    tmp_path: Path,
    *,
    make_repo: Any,
    token_registry: RegistryServer,
    token_credentials: tuple[str, str],
) -> None:
    repo = make_repo("private/")
    old = push_oci_single(token_registry, repo, "3.1.0")
    push_oci_index(token_registry, repo, "3.2.0")
    api.add_secret("shop", "regcred", pull_secret(token_registry.host, *token_credentials))
    api.add_objects("pods", [pod("shop", "encoder", [old.reference], secrets=("regcred",))])
    mark = token_registry.mark()
    code, out, err = run_cli(
        *["report", "--kubeconfig", kubeconfig(api, tmp_path), "-o", "json", "--insecure-registries", "127.0.0.1:*"]
    )
    assert code == 0 and err == "", err
    step = json.loads(out)["plan"]["steps"][0]
    assert step["image"] == old.reference
    assert step["upgrade"] == {"tag": "3.2.0", "image": f"{token_registry.host}/{repo}:3.2.0"}
    listed = token_registry.requests_since(mark, path_contains=f"/v2/{repo}/tags/list")
    assert [e.status for e in listed][-1] == 200  # read with the pod's credentials (anonymous is refused)
    assert token_credentials[1] not in out + err
