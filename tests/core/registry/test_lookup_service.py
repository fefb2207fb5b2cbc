"""The lookup service: declared platforms first, the cache, pull Secrets only when needed, the deadline kept.

Against the real registry (manifest GETs counted on its access log) and the
Kubernetes API stand-in over HTTPS (Secret GETs counted), through the webhook's
own Secret reader.
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.registry.lookup_service import LookupService
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.pull_secrets import KubePullSecrets
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, pull_secret, start_fake_kube_api
from tests.support.images import push_docker_single, push_oci_single
from tests.support.registry_server import RegistryServer


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """Accepts TCP connections and never answers a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture
def resolver(registry: Any, silent_registry: str) -> Iterator[Resolver]:
    settings = RegistrySettings(insecure_registries=(registry.host, silent_registry))
    with make_session(settings) as session, Resolver(session, settings=settings) as res:
        yield res


def test_declared_platforms_win_and_cost_no_request(
    registry: Any, pushed_images: dict[str, Any], resolver: Resolver
) -> None:
    image = pushed_images["docker-manifest-list"].reference
    static = StaticPlatforms.from_mapping({image: ["linux/s390x"]}, "platforms.json")
    mark = registry.mark()
    inspection = LookupService(static=static, resolver=resolver).lookup([image], deadline=Deadline.after(5))
    assert inspection.lookups == {image: ImagePlatforms.of("linux/s390x")}
    assert inspection.declared == (image,)
    assert registry.requests_since(mark) == []


def test_without_resolver_an_undeclared_image_cannot_be_inspected() -> None:
    static = StaticPlatforms.from_mapping({"a:1": ["linux/amd64"]}, "platforms.json")
    inspection = LookupService(static=static).lookup(["a:1", "b:1"], deadline=Deadline.after(1))
    assert inspection.lookups["a:1"] == ImagePlatforms.of("linux/amd64")
    failure = inspection.lookups["b:1"]
    assert isinstance(failure, LookupFailure) and "platforms.json" in failure.reason


def test_each_image_gets_its_own_answer_or_failure_in_the_order_asked(
    pushed_images: dict[str, Any], registry: Any, resolver: Resolver
) -> None:
    images = [
        pushed_images["oci-single-amd64"].reference,
        pushed_images["windows-index"].reference,
        registry.ref("missing/repo", "x"),
        "Not A Reference",
    ]
    lookups = LookupService(resolver=resolver).lookup(images, deadline=Deadline.after(20)).lookups
    assert list(lookups) == images
    assert isinstance(lookups[images[0]], ImagePlatforms)
    assert isinstance(lookups[images[1]], ImagePlatforms)
    missing, invalid = lookups[images[2]], lookups[images[3]]
    assert isinstance(missing, LookupFailure) and "check the image name" in missing.reason
    assert isinstance(invalid, LookupFailure) and "invalid image reference" in invalid.reason


def test_lookups_without_a_deadline(pushed_images: dict[str, Any], resolver: Resolver) -> None:
    # noe mutate without --timeout inspects with Deadline.never(): no infinite timeout reaches threading.
    images = [pushed_images["oci-single-amd64"].reference, pushed_images["docker-single-arm64"].reference]
    lookups = LookupService(resolver=resolver).lookup(images, deadline=Deadline.never()).lookups
    amd, arm = pushed_images["oci-single-amd64"], pushed_images["docker-single-arm64"]
    assert lookups == {
        images[0]: ImagePlatforms(
            ImagePlatforms.of("linux/amd64").platforms, amd.digest, amd.media_type, (amd.digest,)
        ),
        images[1]: ImagePlatforms(
            ImagePlatforms.of("linux/arm64/v8").platforms, arm.digest, arm.media_type, (arm.digest,)
        ),
    }


def test_a_stuck_registry_is_abandoned_at_the_deadline_and_answers_that_arrived_are_kept(
    pushed_images: dict[str, Any], resolver: Resolver, silent_registry: str
) -> None:
    good = pushed_images["docker-single-arm64"].reference
    stuck = f"{silent_registry}/team/app:1"
    started = time.monotonic()
    inspection = LookupService(resolver=resolver).lookup([good, stuck], deadline=Deadline.after(1.5))
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"inspection overran its 1.5 s deadline: {elapsed:.2f}s"
    arrived = inspection.lookups[good]
    assert isinstance(arrived, ImagePlatforms)
    assert [p.architecture for p in arrived.platforms] == ["arm64"]
    abandoned = inspection.lookups[stuck]
    assert isinstance(abandoned, LookupFailure) and "timed out after 1.5s" in abandoned.reason


class _NoThreads(concurrent.futures.Executor):
    """An executor that refuses work: whatever reaches it was not answered on the caller's thread."""

    submitted: list[Any]

    def __init__(self) -> None:
        self.submitted = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.submitted.append(args)
        raise RuntimeError("a warm lookup was handed to a lookup thread")


def test_warm_images_are_answered_on_the_callers_thread_without_a_request(
    registry: Any, pushed_images: dict[str, Any], resolver: Resolver
) -> None:
    by_tag = pushed_images["docker-manifest-list"].reference
    single = pushed_images["docker-single-arm64"]
    by_digest = f"{single.reference.rsplit(':', 1)[0]}@{single.digest}"
    cold = LookupService(resolver=resolver).lookup([by_tag, by_digest], deadline=Deadline.after(10))
    assert all(isinstance(lookup, ImagePlatforms) for lookup in cold.lookups.values()), cold
    mark = registry.mark()
    no_threads = _NoThreads()
    warm = LookupService(resolver=resolver, executor=no_threads).lookup(
        [by_tag, by_digest], deadline=Deadline.after(10)
    )
    assert warm.lookups == cold.lookups
    assert no_threads.submitted == [] and registry.requests_since(mark) == []


def test_cached_answers_only_what_is_fresh_in_memory(
    registry: Any, pushed_images: dict[str, Any], resolver: Resolver
) -> None:
    image = pushed_images["oci-index-attestations"].reference
    assert resolver.cached(image) is None  # never looked up
    assert resolver.cached("Not A Reference!") is None
    assert resolver.cached(f"{image.rsplit(':', 1)[0]}@sha256:{'0' * 64}") is None  # unknown digest
    resolved = resolver.resolve(image, deadline=Deadline.after(10))
    mark = registry.mark()
    assert resolver.cached(image) == resolved
    assert registry.requests_since(mark) == []


# ------------------------------------------------------------------ the rule: when Secrets are read, when a registry


TOKEN = "lookup-service-token"
SETTINGS = RegistrySettings(insecure_registries=("127.0.0.1:*",), negative_cache_ttl=0)


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("lookup service kube CA", tmp_path_factory.mktemp("lookup-kube-ca"))


@pytest.fixture
def kube_api(kube_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(kube_ca, tokens=(TOKEN,)) as api:
        yield api


@dataclass
class Cluster:
    """The rule's whole world: the API stand-in (Secret GETs counted), the reader, one resolver (the cache)."""

    api: FakeKubeAPI
    kubeconfig: Path
    resolver: Resolver
    pool: concurrent.futures.ThreadPoolExecutor
    unusable: list[tuple[str, int]]

    def service(self, static: StaticPlatforms | None = None, *, secrets: bool = True) -> LookupService:
        kube = KubeClient(load_kubeconfig(self.kubeconfig), timeout=5.0, secret_cache_ttl=0)
        reader = KubePullSecrets(kube, self.pool, on_unusable=lambda ns, n: self.unusable.append((ns, n)))
        return LookupService(static, self.resolver, reader if secrets else None, executor=self.pool, share=4)

    def secret_reads(self) -> list[str]:
        return [r.path for r in self.api.requests_snapshot() if "/secrets/" in r.path]


@pytest.fixture
def cluster(kube_api: FakeKubeAPI, tmp_path: Path) -> Iterator[Cluster]:
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig", token=TOKEN)
    with (
        make_session(SETTINGS) as session,
        Resolver(session, settings=SETTINGS) as resolver,
        concurrent.futures.ThreadPoolExecutor(16) as pool,
    ):
        yield Cluster(kube_api, kubeconfig, resolver, pool, [])


def manifests(registry: RegistryServer, mark: int) -> int:
    return registry.count("GET", "/manifests/", since=mark)


def test_a_pod_whose_images_are_all_cached_reads_no_secret_and_asks_no_registry(
    cluster: Cluster, registry: RegistryServer, make_repo: Any
) -> None:
    public = [
        push_docker_single(registry, make_repo(), "v1").reference,
        push_oci_single(registry, make_repo()).reference,
    ]
    service = cluster.service()
    mark = registry.mark()
    cold = service.lookup(public, deadline=Deadline.after(10), pull_secrets={"shop": ["regcred", "other"]})
    # cold: the images need the registry, so the pod's Secrets are read first (missing here: warnings)
    assert all(isinstance(lookup, ImagePlatforms) for lookup in cold.lookups.values()), cold
    assert sorted(cluster.secret_reads()) == [
        "/api/v1/namespaces/shop/secrets/other",
        "/api/v1/namespaces/shop/secrets/regcred",
    ]
    assert manifests(registry, mark) == 2
    assert cold.warnings == (
        "imagePullSecret shop/regcred not found; its images are read without it (anonymously or as the node)",
        "imagePullSecret shop/other not found; its images are read without it (anonymously or as the node)",
    )
    assert cluster.unusable == [("shop", 2)]
    # warm: read anonymously, so the cache gives them to any pod: no Secret GET, no registry request at all
    before = len(cluster.api.requests_snapshot())
    mark = registry.mark()
    warm = service.lookup(public, deadline=Deadline.after(10), pull_secrets={"shop": ["regcred", "other"]})
    assert warm.lookups == cold.lookups and warm.warnings == ()
    assert cluster.api.requests_snapshot()[before:] == []
    assert registry.requests_since(mark) == []


def test_declared_platforms_answer_first_and_need_no_secret(cluster: Cluster, registry: RegistryServer) -> None:
    static = StaticPlatforms.from_mapping({"corp.example/app:*": ["linux/arm64"]}, "platforms.json")
    mark = registry.mark()
    inspection = cluster.service(static).lookup(
        ["corp.example/app:1"], deadline=Deadline.after(5), pull_secrets={"shop": ["regcred"]}
    )
    assert inspection.lookups == {"corp.example/app:1": ImagePlatforms.of("linux/arm64")}
    assert inspection.declared == ("corp.example/app:1",) and inspection.warnings == ()
    assert cluster.secret_reads() == [] and registry.requests_since(mark) == []


def test_secrets_are_read_when_one_image_needs_the_registry_and_only_it_is_fetched(
    cluster: Cluster, registry: RegistryServer, make_repo: Any
) -> None:
    warm = push_docker_single(registry, make_repo(), "v1").reference
    cold = push_oci_single(registry, make_repo()).reference
    service = cluster.service()
    service.lookup([warm], deadline=Deadline.after(10))  # another pod, without Secrets, warmed it
    assert cluster.secret_reads() == []
    mark = registry.mark()
    inspection = service.lookup([warm, cold], deadline=Deadline.after(10), pull_secrets={"shop": ["regcred"]})
    assert all(isinstance(lookup, ImagePlatforms) for lookup in inspection.lookups.values())
    assert cluster.secret_reads() == ["/api/v1/namespaces/shop/secrets/regcred"]
    assert {e.path.split("/manifests/")[0] for e in registry.requests_since(mark, path_contains="/manifests/")} == {
        "/v2/" + cold.split("/", 1)[1].rsplit(":", 1)[0]
    }


def test_a_private_image_cached_for_one_pods_secret_is_not_given_to_a_pod_without_it(
    cluster: Cluster,
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    make_repo: Any,
) -> None:
    private = push_docker_single(basic_registry, make_repo("private/"), "v1").reference
    for name in ("regcred", "same-robot"):  # two Secrets, the same robot account
        cluster.api.add_secret("shop", name, pull_secret(basic_registry.host, *basic_credentials, name=name))
    service = cluster.service()
    first = service.lookup([private], deadline=Deadline.after(10), pull_secrets={"shop": ["regcred"]})
    assert isinstance(first.lookups[private], ImagePlatforms) and first.warnings == ()
    # a pod with no Secret: the cache may not give it the answer, and the registry refuses it
    mark = basic_registry.mark()
    stranger = service.lookup([private], deadline=Deadline.after(10))
    refused = stranger.lookups[private]
    assert isinstance(refused, LookupFailure) and "refused access" in refused.reason
    # the registry said so itself: one anonymous HEAD, refused
    assert [(e.method, e.status) for e in basic_registry.requests_since(mark)] == [("HEAD", 401)]
    # a pod whose Secret holds the credentials seen reading it: its Secret is read, the cache answers
    reads = len(cluster.secret_reads())
    mark = basic_registry.mark()
    friend = service.lookup([private], deadline=Deadline.after(10), pull_secrets={"shop": ["same-robot"]})
    assert friend.lookups[private] == first.lookups[private]
    assert cluster.secret_reads()[reads:] == ["/api/v1/namespaces/shop/secrets/same-robot"]
    assert basic_registry.requests_since(mark) == []
    assert basic_credentials[1] not in repr(first) + repr(stranger) + repr(friend)


def test_a_slow_api_gets_its_budget_then_the_lookups_go_ahead_within_the_deadline(
    cluster: Cluster, registry: RegistryServer, make_repo: Any
) -> None:
    image = push_docker_single(registry, make_repo(), "v1").reference
    cluster.api.state.delay = 3.0
    started = time.monotonic()
    inspection = cluster.service().lookup(
        [image], deadline=Deadline.after(2.5), pull_secrets={"shop": ["late"]}, secret_budget=0.5
    )
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, elapsed
    assert isinstance(inspection.lookups[image], ImagePlatforms)
    assert inspection.warnings == (
        "imagePullSecret shop/late: API did not answer in time; its images are read without it (anonymously or "
        "as the node)",
    )
    # without a budget (the controller, noe report) the wait still ends with the deadline
    started = time.monotonic()
    fresh = push_oci_single(registry, make_repo()).reference
    late = cluster.service().lookup([fresh], deadline=Deadline.after(1.0), pull_secrets={"shop": ["late"]})
    assert time.monotonic() - started < 2.0
    assert isinstance(late.lookups[fresh], LookupFailure) and late.lookups[fresh].temporary
    assert late.lookups[fresh].reason == "timed out after 1s"


def test_without_a_reader_nothing_is_read_and_nothing_is_said(cluster: Cluster, registry: RegistryServer) -> None:
    """``noe mutate``: the pod's Secrets cannot be read, and that is not a warning about the pod."""
    missing = registry.ref("nothing/here", "v1")
    inspection = cluster.service(secrets=False).lookup(
        [missing], deadline=Deadline.after(5), pull_secrets={"shop": ["regcred"]}
    )
    assert isinstance(inspection.lookups[missing], LookupFailure) and inspection.warnings == ()
    assert cluster.secret_reads() == []


def test_secrets_of_several_namespaces_make_one_keychain(
    cluster: Cluster,
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    make_repo: Any,
) -> None:
    """``noe report``: an image used by pods of several namespaces is read with all their Secrets."""
    private = push_docker_single(basic_registry, make_repo("private/"), "v1").reference
    robot = pull_secret(basic_registry.host, *basic_credentials, name="robot", namespace="b")
    cluster.api.add_secret("b", "robot", robot)
    inspection = cluster.service().lookup(
        [private], deadline=Deadline.after(10), pull_secrets={"a": ["gone"], "b": ["robot"]}
    )
    assert isinstance(inspection.lookups[private], ImagePlatforms), inspection
    assert [w.split(";")[0] for w in inspection.warnings] == ["imagePullSecret a/gone not found"]
    assert sorted(cluster.secret_reads()) == ["/api/v1/namespaces/a/secrets/gone", "/api/v1/namespaces/b/secrets/robot"]
