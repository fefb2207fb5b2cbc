"""The shared registry cache through ``noe serve`` (real gunicorn, 2 workers, real registries).

One fetch per new image across workers; nothing fetched again after a restart; cached answers
only for pods whose own credentials can read the image; a damaged cache file never stops the
webhook.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from noe_core.testing import admission_review, pod
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.images import PushedImage, image_config, push_docker_manifest_list, push_image
from tests.support.noe_serve import NoeProcess, apply, archs_allowed, post_review, start_noe, uid
from tests.support.registry_server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.registry]

KUBE_TOKEN = "cache-e2e-token"
DEADLINE = "5"


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    ca: CA = make_ca("cache e2e kube CA", tmp_path_factory.mktemp("cache-kube-ca"))
    with start_fake_kube_api(ca, tokens=(KUBE_TOKEN,)) as api:
        yield api


def serve(work: Path, kube_api: FakeKubeAPI, *extra: str) -> NoeProcess:
    kubeconfig = kube_api.write_kubeconfig(work / "kubeconfig", token=KUBE_TOKEN)
    return start_noe(
        work,
        [
            "--kubeconfig",
            str(kubeconfig),
            "--insecure-registries",
            "127.0.0.1:*",
            "--strict-namespaces",
            "strict",
            "--admission-deadline",
            DEADLINE,
            "--workers",
            "2",
            "--threads",
            "8",
            "--state-dir",
            str(work / "state"),
            *extra,
        ],
        None,
    )


@pytest.fixture(scope="module")
def noe(tmp_path_factory: pytest.TempPathFactory, kube_api: FakeKubeAPI) -> Iterator[NoeProcess]:
    proc = serve(tmp_path_factory.mktemp("cache-e2e"), kube_api)
    try:
        yield proc
    finally:
        proc.stop()


def admit_many(noe: NoeProcess, images: list[str], count: int, namespace: str) -> list[dict[str, Any]]:
    """``count`` admissions at once (one connection each, spread over the workers)."""
    barrier = threading.Barrier(count)

    def one(i: int) -> dict[str, Any]:
        review = admission_review(pod(images, name=f"p-{i}", namespace=namespace), uid=uid())
        with noe.session() as s:
            barrier.wait(30)
            return post_review(s, noe, review, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def manifest_gets(registry: RegistryServer, mark: int) -> int:
    return registry.count("GET", "/manifests/", since=mark)


def test_50_concurrent_admissions_of_a_new_image_over_2_workers_cost_one_manifest_get(
    noe: NoeProcess,
    registry: RegistryServer,
    make_repo: Any,
) -> None:
    image = push_image(registry, make_repo(), "v1", image_config("linux", "arm64"))
    mark = registry.mark()
    responses = admit_many(noe, [image.reference], 50, "e2e-burst")
    assert all(archs_allowed(apply({"request": {"object": pod([image.reference])}}, r)) == {"arm64"} for r in responses)
    assert manifest_gets(registry, mark) == 1
    assert registry.count("GET", "/blobs/", since=mark) == 1

    # A failure is shared the same way: one 404, then every worker answers from the failure cache.
    missing = f"{registry.host}/{make_repo()}:v1"
    mark = registry.mark()
    refused = admit_many(noe, [missing], 30, "e2e-burst")
    assert all(any("cannot inspect" in w for w in r["warnings"]) for r in refused)
    assert [e.status for e in registry.requests_since(mark)] == [404]


def _pull_secret(registry: RegistryServer, namespace: str, user: str, password: str) -> dict[str, Any]:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = {"auths": {registry.host: {"username": user, "password": password, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": namespace},
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


def _private_pod(image: str, namespace: str, secret: bool) -> dict[str, Any]:
    p = pod([image], namespace=namespace, name=f"private-{uid()[:8]}")
    if secret:
        p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    return p


def test_a_cached_private_image_is_served_only_to_pods_whose_credentials_read_it(
    noe: NoeProcess,
    kube_api: FakeKubeAPI,
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    make_repo: Any,
) -> None:
    image = push_docker_manifest_list(basic_registry, make_repo("private/"), "v1")
    alice_user, alice_password = basic_credentials
    kube_api.add_secret("team-a", "regcred", _pull_secret(basic_registry, "team-a", alice_user, alice_password))
    kube_api.add_secret(
        "team-wrong", "regcred", _pull_secret(basic_registry, "team-wrong", alice_user, alice_password + "x")
    )
    kube_api.add_secret("strict", "regcred", _pull_secret(basic_registry, "strict", "carol", "not-carols"))
    kube_api.add_secret(
        "team-b", "regcred", _pull_secret(basic_registry, "team-b", "carol", basic_registry.users["carol"])
    )
    expected = {p.split("/")[1] for p in image.platforms if p.startswith("linux/")} & {
        "amd64",
        "arm64",
        "ppc64le",
        "s390x",
    }

    with noe.session() as http:
        first = admission_review(_private_pod(image.reference, "team-a", secret=True), uid=uid())
        answer = post_review(http, noe, first)
        assert "warnings" not in answer and archs_allowed(apply(first, answer)) == expected

        for namespace, secret in (("team-none", False), ("team-wrong", True)):
            for _ in range(2):  # the second is answered from the failure cache: still no placement
                review = admission_review(_private_pod(image.reference, namespace, secret), uid=uid())
                refused = post_review(http, noe, review)
                assert refused["allowed"] is True and "patch" not in refused, namespace
                assert any("cannot inspect" in w for w in refused["warnings"]), refused["warnings"]

        for secret in (False, True):
            denied = post_review(
                http, noe, admission_review(_private_pod(image.reference, "strict", secret), uid=uid())
            )
            assert denied["allowed"] is False and denied["status"]["code"] == 403

        mark = basic_registry.mark()
        review = admission_review(_private_pod(image.reference, "team-b", secret=True), uid=uid())
        served = post_review(http, noe, review)
        assert "warnings" not in served and archs_allowed(apply(review, served)) == expected
        heads = basic_registry.requests_since(mark, method="HEAD", path_contains="/manifests/")
        assert [e.status for e in heads if e.status == 200] == [200]
        assert manifest_gets(basic_registry, mark) == 0 and basic_registry.count("GET", "/blobs/", since=mark) == 0


def test_a_restart_fetches_nothing_again_and_stale_tags_cost_one_head_each(
    tmp_path: Path,
    kube_api: FakeKubeAPI,
    registry: RegistryServer,
    make_repo: Any,
) -> None:
    images = [
        push_image(registry, make_repo(), "v1", image_config("linux", arch)).reference for arch in ("amd64", "arm64")
    ]
    images.append(push_docker_manifest_list(registry, make_repo(), "v1").reference)

    def admit_all(noe: NoeProcess) -> None:
        with noe.session() as http:
            for image in images:
                review = admission_review(pod([image], namespace="e2e-restart"), uid=uid())
                response = post_review(http, noe, review)
                assert "patch" in response and "warnings" not in response

    first = serve(tmp_path, kube_api)
    try:
        admit_all(first)
    finally:
        first.stop()
    mark = registry.mark()
    second = serve(tmp_path, kube_api)
    try:
        admit_all(second)
    finally:
        second.stop()
    assert registry.count(since=mark) == 0, registry.requests_since(mark)
    mark = registry.mark()
    third = serve(tmp_path, kube_api, "--cache-ttl", "1s")  # every stored tag is older than that
    try:
        admit_all(third)
    finally:
        third.stop()
    heads = registry.requests_since(mark, method="HEAD")
    assert len(heads) == len(images) and all(e.path.endswith("/manifests/v1") for e in heads)
    assert registry.count("GET", since=mark) == 0


@pytest.mark.parametrize("damage", ["truncated", "random-bytes", "wrong-schema", "unwritable"])
def test_a_damaged_cache_never_stops_the_webhook(
    tmp_path: Path,
    kube_api: FakeKubeAPI,
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
    damage: str,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    cache = state / "registry-cache.sqlite3"
    extra: list[str] = []
    if damage == "truncated":
        cache.write_bytes(b"SQLite format 3\x00" + os.urandom(30))
    elif damage == "random-bytes":
        cache.write_bytes(os.urandom(16384))
    elif damage == "wrong-schema":
        with sqlite3.connect(cache) as db:
            db.execute("PRAGMA user_version = 42")
            db.execute("CREATE TABLE content (x)")
    else:
        blocker = tmp_path / "read-only"
        blocker.write_text("")
        extra = ["--cache-dir", str(blocker / "cache")]  # cannot be created, even by root
    noe = serve(tmp_path, kube_api, *extra)
    try:
        image = pushed_images["docker-single-arm64"]
        with noe.session() as http:
            review = admission_review(pod([image.reference], namespace="e2e-damaged"), uid=uid())
            response = post_review(http, noe, review)
        assert archs_allowed(apply(review, response)) == {"arm64"}
    finally:
        noe.stop()
    output = noe.output()
    assert ("moved aside" in output) if damage != "unwritable" else ("memory only" in output), output[-3000:]


def test_noe_cache_lists_stats_and_purges_what_serve_stored(
    noe: NoeProcess,
    registry: RegistryServer,
    make_repo: Any,
    tmp_path: Path,
) -> None:
    image = push_image(registry, make_repo(), "v1", image_config("linux", "s390x"))
    with noe.session() as http:
        post_review(http, noe, admission_review(pod([image.reference], namespace="e2e-cli"), uid=uid()))
    state = str(noe.out_path.parent / "state")

    def cache(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "noe_web", "cache", *args, "--state-dir", state],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    listed = json.loads(cache("list", "-o", "json").stdout)
    mine = [e for e in listed if e["image"] == f"{registry.host}/{image.repository}"]
    assert mine == [
        {
            "image": f"{registry.host}/{image.repository}",
            "digest": image.digest,
            "tags": ["v1"],
            "mediaType": image.media_type,
            "platforms": ["linux/s390x"],
            "ageSeconds": mine[0]["ageSeconds"],
        }
    ]
    stats = cache("stats").stdout
    assert "images " in stats and "oldest tag " in stats
    assert cache("purge", image.reference).returncode == 0
    assert all(e["image"] != mine[0]["image"] for e in json.loads(cache("list", "-o", "json").stdout))
    bad = cache("purge", "UPPER/Case::bad")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    with requests.get(f"http://127.0.0.1:{noe.metrics_port}/metrics", timeout=10) as resp:
        metrics = resp.text
    assert 'noe_registry_cache_hits_total{lookup="memory"}' in metrics
    assert 'noe_registry_cache_misses_total{lookup="disk"}' in metrics
