"""The cache every replica shares: three real ``noe serve`` replicas, one real redis-server, real registries.

One manifest GET for a new image however many replicas admit it at once; nothing fetched again
by replicas restarted with empty local caches; a private answer cached by one replica never
given by another to a pod without credentials; no credential in any Redis key or value; and a
Redis that dies, freezes, refuses the password or is not there yet never costs an admission
nor its deadline.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from noe_core.testing import admission_review, pod
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, pull_secret, start_fake_kube_api
from tests.support.images import image_config, push_docker_manifest_list, push_image
from tests.support.noe_serve import NoeProcess, apply, archs_allowed, post_review, start_noe, uid
from tests.support.paths import ROOT
from tests.support.redis_server import RedisServer, silent_listener
from tests.support.registry_server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.registry]

KUBE_TOKEN = "redis-e2e-token"
DEADLINE = 5.0
REPLICAS = 3


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    ca: CA = make_ca("redis e2e kube CA", tmp_path_factory.mktemp("redis-kube-ca"))
    with start_fake_kube_api(ca, tokens=(KUBE_TOKEN,)) as api:
        yield api


@pytest.fixture(scope="module")
def shared_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fingerprint key every replica mounts from one Secret."""
    path = tmp_path_factory.mktemp("redis-key") / "fingerprint-key"
    path.write_text(secrets.token_urlsafe(48))
    return path


class Replicas:
    """``noe serve`` replicas sharing one Redis, each with its own (empty at start) local cache."""

    def __init__(self, work: Path, kube_api: FakeKubeAPI, key: Path, url: str, *extra: str) -> None:
        self.work, self.kube_api, self.key, self.url, self.extra = work, kube_api, key, url, extra
        self.started: list[NoeProcess] = []
        self.generation = 0

    def start(self, count: int = REPLICAS) -> list[NoeProcess]:
        """``count`` replicas started together (as a rollout does), each on a fresh state directory."""
        self.generation += 1
        kubeconfig = self.kube_api.write_kubeconfig(self.work / "kubeconfig", token=KUBE_TOKEN)

        def one(index: int) -> NoeProcess:
            home = self.work / f"gen{self.generation}-replica{index}"
            home.mkdir(parents=True)
            return start_noe(
                home,
                [
                    "--kubeconfig",
                    str(kubeconfig),
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
                    str(home / "state"),
                    "--cache-key-file",
                    str(self.key),
                    *self.extra,
                ],
                None,
                env={"NOE_CACHE_URL": self.url},  # as the chart gives it, from a Secret
            )

        with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
            replicas = list(pool.map(one, range(count)))
        self.started.extend(replicas)
        return replicas

    def stop(self, replicas: list[NoeProcess] | None = None) -> None:
        for replica in replicas if replicas is not None else self.started:
            replica.stop()

    def output(self) -> str:
        return "".join(replica.output() for replica in self.started)


@pytest.fixture
def replicas(tmp_path: Path, kube_api: FakeKubeAPI, shared_key: Path, redis_server: RedisServer) -> Iterator[Replicas]:
    group = Replicas(tmp_path, kube_api, shared_key, redis_server.url)
    try:
        yield group
    finally:
        group.stop()
    assert redis_server.password not in group.output()


def admit_at_once(
    replicas: list[NoeProcess], images: list[str], count: int, namespace: str = "e2e-redis"
) -> list[dict[str, Any]]:
    """``count`` admissions released together, dealt round-robin over the replicas, one connection each."""
    barrier = threading.Barrier(count)

    def one(i: int) -> dict[str, Any]:
        noe = replicas[i % len(replicas)]
        review = admission_review(pod(images, name=f"p-{i}", namespace=namespace), uid=uid())
        with noe.session() as s:
            barrier.wait(30)
            return post_review(s, noe, review, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def redis_hits(noe: NoeProcess) -> float:
    with requests.get(f"http://127.0.0.1:{noe.metrics_port}/metrics", timeout=10) as resp:
        for line in resp.text.splitlines():
            if line.startswith('noe_registry_cache_hits_total{lookup="redis"}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_60_admissions_of_a_new_image_over_3_replicas_cost_one_manifest_get_and_a_rollout_none(
    replicas: Replicas, registry: RegistryServer, make_repo: Any
) -> None:
    new = push_image(registry, make_repo(), "v1", image_config("linux", "arm64")).reference
    multi = push_docker_manifest_list(registry, make_repo(), "v1")
    first = replicas.start()
    mark = registry.mark()
    answers = admit_at_once(first, [new], 60)
    assert all(archs_allowed(apply({"request": {"object": pod([new])}}, a)) == {"arm64"} for a in answers)
    assert registry.count("GET", "/manifests/", since=mark) == 1
    assert registry.count("GET", "/blobs/", since=mark) == 1
    admit_at_once(first, [new, multi.reference], 6)
    replicas.stop(first)

    # A rollout: every replica new, every local cache empty; Redis remembers for all of them.
    second = replicas.start()
    mark = registry.mark()
    answers = admit_at_once(second, [new, multi.reference], 30)
    expected = {p.split("/")[1] for p in multi.platforms if p.startswith("linux/")} & {"arm64"}
    both = {"request": {"object": pod([new, multi.reference])}}
    assert all(archs_allowed(apply(both, a)) == expected for a in answers)
    assert registry.count(since=mark) == 0, registry.requests_since(mark)
    assert all(redis_hits(noe) > 0 for noe in second)


def test_noe_report_reads_what_the_webhook_replicas_already_know(
    replicas: Replicas, registry: RegistryServer, make_repo: Any, tmp_path: Path
) -> None:
    image = push_image(registry, make_repo(), "v1", image_config("linux", "arm64")).reference
    (noe,) = replicas.start(1)
    admit_at_once([noe], [image], 2)
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"kind": "List", "items": [pod([image], name="web", namespace="shop")]}))
    mark = registry.mark()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOE_")}
    env["NOE_CACHE_URL"] = replicas.url
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "noe_web",
            "report",
            "-f",
            str(pods),
            "-o",
            "json",
            "--cache-key-file",
            str(replicas.key),
            "--insecure-registries",
            "127.0.0.1:*",
            "--no-upgrade-hints",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert image in done.stdout and "arm64" in done.stdout
    assert registry.count(since=mark) == 0, registry.requests_since(mark)


def _private_pod(image: str, namespace: str, secret: bool) -> dict[str, Any]:
    p = pod([image], namespace=namespace, name=f"private-{uid()[:8]}")
    if secret:
        p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    return p


def test_a_private_answer_cached_by_one_replica_is_never_given_by_another_to_a_pod_without_credentials(  # noqa: PLR0917
    replicas: Replicas,
    redis_server: RedisServer,
    kube_api: FakeKubeAPI,
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    make_repo: Any,
) -> None:
    image = push_docker_manifest_list(basic_registry, make_repo("private/"), "v1")
    alice, alice_password = basic_credentials
    carol_password = basic_registry.users["carol"]
    kube_api.add_secret(
        "r-team-a", "regcred", pull_secret(basic_registry.host, alice, alice_password, namespace="r-team-a")
    )
    kube_api.add_secret(
        "r-team-b", "regcred", pull_secret(basic_registry.host, "carol", carol_password, namespace="r-team-b")
    )
    kube_api.add_secret(
        "r-team-wrong",
        "regcred",
        pull_secret(basic_registry.host, alice, alice_password + "x", namespace="r-team-wrong"),
    )
    kube_api.add_secret(
        "strict", "regcred", pull_secret(basic_registry.host, "carol", "not-carols", namespace="strict")
    )
    expected = {p.split("/")[1] for p in image.platforms if p.startswith("linux/")} & {
        "amd64",
        "arm64",
        "ppc64le",
        "s390x",
    }
    a, b, c = replicas.start()

    with a.session() as http:
        first = admission_review(_private_pod(image.reference, "r-team-a", secret=True), uid=uid())
        answer = post_review(http, a, first)
        assert "warnings" not in answer and archs_allowed(apply(first, answer)) == expected

    for noe in (b, c):  # the answer is in Redis; these replicas never saw the image nor alice
        with noe.session() as http:
            for namespace, secret in (("r-team-none", False), ("r-team-wrong", True)):
                review = admission_review(_private_pod(image.reference, namespace, secret), uid=uid())
                refused = post_review(http, noe, review)
                assert refused["allowed"] is True and "patch" not in refused, (namespace, refused)
                assert any("cannot inspect" in w for w in refused["warnings"]), refused["warnings"]
            for secret in (False, True):
                review = admission_review(_private_pod(image.reference, "strict", secret), uid=uid())
                denied = post_review(http, noe, review)
                assert denied["allowed"] is False and denied["status"]["code"] == 403

    # alice's grant is shared: the same credential on another replica costs nothing at all.
    mark = basic_registry.mark()
    with b.session() as http:
        review = admission_review(_private_pod(image.reference, "r-team-a", secret=True), uid=uid())
        served = post_review(http, b, review)
    assert "warnings" not in served and archs_allowed(apply(review, served)) == expected
    assert basic_registry.count(since=mark) == 0, basic_registry.requests_since(mark)

    # carol was never seen: one HEAD with her credentials, then the cached answer, no GET.
    mark = basic_registry.mark()
    with c.session() as http:
        review = admission_review(_private_pod(image.reference, "r-team-b", secret=True), uid=uid())
        served = post_review(http, c, review)
    assert "warnings" not in served and archs_allowed(apply(review, served)) == expected
    assert basic_registry.count("GET", since=mark) == 0
    heads = basic_registry.requests_since(mark, method="HEAD", path_contains="/manifests/")
    assert [e.status for e in heads if e.status == 200] == [200]

    # Nothing secret in any key or value, in any encoding; no unkeyed hash of a credential.
    forbidden: list[bytes] = []
    for user, password in ((alice, alice_password), ("carol", carol_password), (alice, alice_password + "x")):
        pair = f"{user}:{password}".encode()
        forbidden += [
            password.encode(),
            pair,
            base64.b64encode(pair),
            base64.b64encode(password.encode()),
            hashlib.sha256(password.encode()).hexdigest().encode(),
            hashlib.sha256(pair).hexdigest().encode(),
            hashlib.sha256("\0".join((user, password, "")).encode()).hexdigest().encode(),
        ]
    forbidden += [b"Basic ", b"Bearer ", b"Authorization", KUBE_TOKEN.encode(), redis_server.password.encode()]
    dumped = redis_server.dump()
    assert dumped, "nothing was shared"
    for key, value in dumped:
        for secret in forbidden:
            assert secret.lower() not in key.lower() and secret.lower() not in value.lower(), (key, value, secret)
    ttls = {key: redis_server.client().pttl(key) for key, _ in dumped}
    assert all(ttl > 0 for ttl in ttls.values()), {k: t for k, t in ttls.items() if t <= 0}


def load(
    replicas: list[NoeProcess], images: list[str], total: int, during: Callable[[], None], at: int
) -> list[tuple[float, dict[str, Any]]]:
    """``total`` admissions, 24 at a time over the replicas; ``during`` runs once ``at`` have been answered."""
    done = 0
    lock = threading.Lock()

    def one(i: int) -> tuple[float, dict[str, Any]]:
        nonlocal done
        noe = replicas[i % len(replicas)]
        review = admission_review(pod([images[i % len(images)]], name=f"l-{i}", namespace="e2e-load"), uid=uid())
        with noe.session() as s:
            start = time.monotonic()
            answer = post_review(s, noe, review, timeout=30)
            elapsed = time.monotonic() - start
        with lock:
            done += 1
            if done == at:
                during()
        return elapsed, answer

    with concurrent.futures.ThreadPoolExecutor(max_workers=24) as pool:
        return list(pool.map(one, range(total)))


@pytest.mark.parametrize("fault", ["killed", "frozen"])
def test_redis_dying_or_freezing_under_load_loses_no_admission_and_breaks_no_deadline(
    replicas: Replicas, redis_server: RedisServer, registry: RegistryServer, make_repo: Any, fault: str
) -> None:
    archs = ("amd64", "arm64", "s390x", "ppc64le")
    images = [
        push_image(registry, make_repo(), "v1", image_config("linux", archs[i % len(archs)])).reference
        for i in range(24)
    ]
    group = replicas.start()
    admit_at_once(group, images[:4], 6)  # some warm, most new when Redis goes
    fail = redis_server.kill if fault == "killed" else redis_server.freeze
    try:
        results = load(group, images, 240, fail, at=40)
    finally:
        if fault == "frozen":
            redis_server.thaw()
    assert len(results) == 240
    for (elapsed, answer), i in zip(results, range(240), strict=True):
        assert elapsed < DEADLINE, (i, elapsed)
        arch = archs[(i % len(images)) % len(archs)]
        obj = pod([images[i % len(images)]])
        assert "warnings" not in answer and archs_allowed(apply({"request": {"object": obj}}, answer)) == {arch}
    output = replicas.output()
    assert "shared registry cache" in output and "reconnecting in the background" in output
    assert redis_server.password not in output


def test_a_redis_not_there_at_start_is_one_warning_and_sharing_begins_when_it_comes(  # noqa: PLR0917
    tmp_path: Path,
    kube_api: FakeKubeAPI,
    shared_key: Path,
    redis_server: RedisServer,
    registry: RegistryServer,
    make_repo: Any,
) -> None:
    port = redis_server.port
    redis_server.kill()
    group = Replicas(tmp_path, kube_api, shared_key, redis_server.url)
    try:
        a, b = group.start(2)
        early = push_image(registry, make_repo(), "v1", image_config("linux", "arm64")).reference
        answers = admit_at_once([a, b], [early], 4)
        assert all("patch" in answer for answer in answers)  # local cache and registry meanwhile
        warnings = [line for line in group.output().splitlines() if "shared registry cache" in line]
        assert len(warnings) == 2, warnings  # one per replica (its master), none per worker
        assert all("reconnecting in the background" in line for line in warnings)

        redis_server.start()  # the same port: the replicas' URL
        assert redis_server.port == port
        time.sleep(2.5)  # the background reconnection tries every 0.5 s at first
        late = push_image(registry, make_repo(), "v1", image_config("linux", "s390x")).reference
        admit_at_once([a], [late], 2)
        mark = registry.mark()
        admit_at_once([b], [late], 4)
        assert registry.count(since=mark) == 0, registry.requests_since(mark)
    finally:
        group.stop()
    assert redis_server.password not in group.output()


@pytest.mark.parametrize("problem", ["wrong-password", "frozen-at-start"])
def test_a_redis_refusing_the_password_or_never_answering_costs_nothing_but_a_warning(  # noqa: PLR0917
    tmp_path: Path,
    kube_api: FakeKubeAPI,
    shared_key: Path,
    redis_server: RedisServer,
    registry: RegistryServer,
    make_repo: Any,
    problem: str,
) -> None:
    wrong = "not-" + redis_server.password
    with silent_listener() as silent:
        url = (
            f"redis://:{wrong}@127.0.0.1:{redis_server.port}/0"
            if problem == "wrong-password"
            else f"redis://:{wrong}@127.0.0.1:{silent}/0"
        )
        group = Replicas(tmp_path, kube_api, shared_key, url)
        try:
            (noe,) = group.start(1)
            image = push_image(registry, make_repo(), "v1", image_config("linux", "ppc64le")).reference
            start = time.monotonic()
            answers = admit_at_once([noe], [image], 8)
            assert time.monotonic() - start < DEADLINE
            assert all(archs_allowed(apply({"request": {"object": pod([image])}}, a)) == {"ppc64le"} for a in answers)
        finally:
            group.stop()
    output = group.output()
    warnings = [line for line in output.splitlines() if "shared registry cache" in line]
    assert len(warnings) == 1, warnings
    assert wrong not in output and redis_server.password not in output
    assert "redis://:***@127.0.0.1:" in warnings[0]
