"""The resolver against a real registry: platforms, digests and the exact number of requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests

from noe_core.credentials.keychain import Credential, StaticKeychain
from noe_core.errors import AuthError, NoeError, RegistryError
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.registry.observer import CountingObserver
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from tests.support.images import (
    OCI_MANIFEST,
    PushedImage,
    image_config,
    push_docker_manifest_list,
    push_image,
    push_oci_index_with_attestations,
)
from tests.support.registry_server import RegistryServer
from tests.support.token_server import TokenServer

pytestmark = pytest.mark.registry

INSECURE = ("127.0.0.1:*",)


class FakeClock:
    """A monotonic clock the test moves by hand (the resolver's caches read it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keys(info: ImagePlatforms) -> list[str]:
    out = []
    for p in info.platforms:
        key = f"{p.os}/{p.architecture}"
        if p.variant:
            key += f"/{p.variant}"
        if p.os_version:
            key += f":{p.os_version}"
        out.append(key)
    return out


def expected(img: PushedImage) -> dict[str, str]:
    """platform key -> manifest digest the resolver must report."""
    if not img.is_index:
        return {key: img.digest for key in img.config_digests}
    found = {k: d for k, d in img.children.items() if d not in img.deleted}
    for nested in img.nested.values():
        found.update({k: d for k, d in nested.children.items() if d not in nested.deleted})
    return found


# Requests a cold lookup of each shape costs (GET manifest + config blob, or GET index + one HEAD per child).
COLD_REQUESTS = {
    "oci-index-attestations": 3,  # GET index, HEAD amd64, HEAD arm64 (attestations skipped)
    "docker-manifest-list": 6,  # GET list, 5 HEADs
    "docker-single-arm64": 2,  # GET manifest, GET config blob
    "oci-single-amd64": 2,
    "windows-index": 4,  # GET list, 3 HEADs
    "index-deleted-child": 3,  # GET index, 2 HEADs (one answers 404)
    "nested-index": 5,  # GET index, GET nested index, 2 HEADs inside, 1 HEAD for the outer entry
}


@pytest.fixture
def session() -> Iterator[requests.Session]:
    s = make_session(RegistrySettings())
    yield s
    s.close()


def make_resolver(session: requests.Session, **kw: object) -> tuple[Resolver, CountingObserver]:
    observer = CountingObserver()
    clock = kw.pop("clock", None)
    keychain = kw.pop("keychain", None)
    settings = RegistrySettings(insecure_registries=INSECURE, **kw)  # type: ignore[arg-type]
    extra = {"clock": clock} if clock is not None else {}
    resolver = Resolver(session, settings=settings, observer=observer, keychain=keychain, **extra)  # type: ignore[arg-type]
    return resolver, observer


@pytest.mark.parametrize("shape", sorted(COLD_REQUESTS))
def test_cold_then_warm_lookup_of_each_shape(
    shape: str, registry: RegistryServer, pushed_images: dict[str, PushedImage], session: requests.Session
) -> None:
    img = pushed_images[shape]
    resolver, _ = make_resolver(session)
    with resolver:
        mark = registry.mark()
        info = resolver.resolve(img.reference, deadline=Deadline.after(20))
        assert registry.count(since=mark) == COLD_REQUESTS[shape], registry.requests_since(mark)
        assert info.digest == img.digest
        assert info.media_type == img.media_type
        assert dict(zip(keys(info), info.manifests, strict=True)) == expected(img)
        mark = registry.mark()
        again = resolver.resolve(img.reference, deadline=Deadline.after(20))
        assert registry.count(since=mark) == 0
        assert again == info
        assert again is info  # the cached value itself: rule 4's reading of it is computed once


def test_tag_expiry_costs_exactly_one_head(
    registry: RegistryServer, pushed_images: dict[str, PushedImage], session: requests.Session
) -> None:
    clock = FakeClock()
    resolver, observer = make_resolver(session, clock=clock, cache_ttl=60.0)
    img = pushed_images["docker-manifest-list"]
    with resolver:
        first = resolver.resolve(img.reference, deadline=Deadline.after(20))
        clock.now += 61
        mark = registry.mark()
        second = resolver.resolve(img.reference, deadline=Deadline.after(20))
        entries = registry.requests_since(mark)
        assert [(e.method, e.status) for e in entries] == [("HEAD", 200)]
        assert f"/manifests/{img.tag}" in entries[0].path
        assert second == first
        # Re-validated: fresh again for another TTL.
        mark = registry.mark()
        resolver.resolve(img.reference, deadline=Deadline.after(20))
        assert registry.count(since=mark) == 0
        assert observer.hits["revalidated"] == 1


def test_moved_tag_is_read_again_after_expiry(
    registry: RegistryServer, session: requests.Session, unique_repo: str
) -> None:
    clock = FakeClock()
    resolver, _ = make_resolver(session, clock=clock, cache_ttl=60.0)
    push_image(registry, unique_repo, "v1", image_config("linux", "amd64"), OCI_MANIFEST)
    with resolver:
        before = resolver.resolve(registry.ref(unique_repo, "v1"), deadline=Deadline.after(20))
        assert keys(before) == ["linux/amd64"]
        push_image(registry, unique_repo, "v1", image_config("linux", "arm64", "v8"), OCI_MANIFEST)
        assert resolver.resolve(registry.ref(unique_repo, "v1"), deadline=Deadline.after(20)) == before
        clock.now += 61
        mark = registry.mark()
        after = resolver.resolve(registry.ref(unique_repo, "v1"), deadline=Deadline.after(20))
        assert keys(after) == ["linux/arm64/v8"]
        methods = [e.method for e in registry.requests_since(mark)]
        assert methods == ["HEAD", "GET", "GET"]  # re-validate, manifest, config blob


def test_fifty_concurrent_lookups_of_a_new_image_share_one_get(
    registry: RegistryServer, session: requests.Session, unique_repo: str
) -> None:
    img = push_docker_manifest_list(registry, unique_repo, "v1")
    resolver, observer = make_resolver(session, max_parallel=8)
    results: list[ImagePlatforms | NoeError] = []
    lock = threading.Lock()
    start = threading.Barrier(50)

    def look() -> None:
        start.wait()
        try:
            info: ImagePlatforms | NoeError = resolver.resolve(img.reference, deadline=Deadline.after(20))
        except NoeError as exc:
            info = exc
        with lock:
            results.append(info)

    with resolver:
        mark = registry.mark()
        threads = [threading.Thread(target=look) for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(isinstance(r, ImagePlatforms) and r.digest == img.digest for r in results)
        assert registry.count("GET", since=mark) == 1
        assert registry.count("HEAD", since=mark) == 5
        assert sum(observer.coalesced_waits.values()) + sum(observer.hits.values()) == 49


def test_digest_pinned_reference_resolves_the_digest_not_the_tag(
    registry: RegistryServer, session: requests.Session, unique_repo: str
) -> None:
    arm = push_image(registry, unique_repo, "v1", image_config("linux", "arm64", "v8"), OCI_MANIFEST)
    push_image(registry, unique_repo, "v1", image_config("linux", "amd64"), OCI_MANIFEST)  # the tag moves
    resolver, _ = make_resolver(session)
    with resolver:
        mark = registry.mark()
        info = resolver.resolve(f"{registry.host}/{unique_repo}:v1@{arm.digest}", deadline=Deadline.after(20))
        assert info.digest == arm.digest
        assert keys(info) == ["linux/arm64/v8"]
        assert all(f"manifests/{arm.digest}" in e.path or "/blobs/" in e.path for e in registry.requests_since(mark))
        latest = resolver.resolve(registry.ref(unique_repo, "v1"), deadline=Deadline.after(20))
        assert keys(latest) == ["linux/amd64"]


def test_failures_are_cached_briefly(registry: RegistryServer, session: requests.Session) -> None:
    clock = FakeClock()
    resolver, observer = make_resolver(session, clock=clock, negative_cache_ttl=30.0)
    ref = registry.ref("no/such-repo", "v1")
    with resolver:
        mark = registry.mark()
        with pytest.raises(RegistryError) as first:
            resolver.resolve(ref, deadline=Deadline.after(20))
        assert first.value.status == 404
        assert "check the image name" in str(first.value)
        with pytest.raises(RegistryError):
            resolver.resolve(ref, deadline=Deadline.after(20))
        assert registry.count(since=mark) == 1
        assert observer.hits["negative"] == 1
        clock.now += 31
        with pytest.raises(RegistryError):
            resolver.resolve(ref, deadline=Deadline.after(20))
        assert registry.count(since=mark) == 2


def test_negative_cache_hits_do_not_pile_up_on_the_cached_error(
    registry: RegistryServer, session: requests.Session
) -> None:
    # Re-raising the cached exception object used to extend its traceback on every hit, holding
    # every caller's frames until the entry expired.
    resolver, _ = make_resolver(session, negative_cache_ttl=30.0)
    ref = registry.ref("no/such-repo-either", "v1")
    caught: list[RegistryError] = []
    with resolver:
        for _ in range(50):
            with pytest.raises(RegistryError) as error:
                resolver.resolve(ref, deadline=Deadline.after(20))
            caught.append(error.value)
    assert all(e is caught[0] for e in caught)
    depth, tb = 0, caught[-1].__traceback__
    while tb is not None:
        depth, tb = depth + 1, tb.tb_next
    assert depth < 10, depth


def test_registry_proxies_send_requests_to_the_mirror(
    registry: RegistryServer, session: requests.Session, unique_repo: str
) -> None:
    from noe_core.registry.settings import parse_registry_proxies

    img = push_image(registry, unique_repo, "v1", image_config("linux", "s390x"), OCI_MANIFEST)
    resolver, _ = make_resolver(session, registry_proxies=parse_registry_proxies(f"docker.io={registry.host}"))
    asked = f"docker.io/{img.repository}:{img.tag}"
    with resolver:
        mark = registry.mark()
        info = resolver.resolve(asked, deadline=Deadline.after(20))
        assert registry.count(since=mark) > 0  # the mirror answered
        assert resolver.cached(asked) is info  # the answer belongs to the reference asked
    assert info.digest == img.digest


# -- auth modes ------------------------------------------------------------------------------------


def test_basic_auth_registry(
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, password = basic_credentials
    keychain = StaticKeychain([(basic_registry.host, Credential(user, password, "test"))])
    resolver, _ = make_resolver(session, keychain=keychain)
    img = basic_pushed_images["docker-manifest-list"]
    with resolver:
        mark = basic_registry.mark()
        info = resolver.resolve(img.reference, deadline=Deadline.after(20))
        assert info.digest == img.digest
        # anonymous 401, the same GET with Basic, then 5 HEADs sent with Basic straight away
        assert [e.status for e in basic_registry.requests_since(mark)] == [401, 200, 200, 200, 200, 200, 200]
        with pytest.raises(AuthError) as denied:
            make_resolver(session)[0].resolve(img.reference, deadline=Deadline.after(20))
        assert denied.value.status == 401
        assert basic_registry.host in str(denied.value)


def test_token_auth_public_and_private(  # noqa: PLR0917 - pytest fixtures
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_public_images: dict[str, PushedImage],
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, password = token_credentials
    keychain = StaticKeychain([(token_registry.host, Credential(user, password, "test"))])
    resolver, observer = make_resolver(session, keychain=keychain)
    with resolver:
        public = token_public_images["oci-single-amd64"]
        tmark = token_server.mark()
        info = resolver.resolve(public.reference, deadline=Deadline.after(20))
        assert info.digest == public.digest
        asked = token_server.requests_since(tmark)
        assert [r.username for r in asked] == [None]  # anonymous first, and it was enough
        private = token_pushed_images["docker-manifest-list"]
        tmark = token_server.mark()
        info = resolver.resolve(private.reference, deadline=Deadline.after(20))
        assert info.digest == private.digest
        assert [r.username for r in token_server.requests_since(tmark)] == [None, user]
    assert observer.token_fetches[(token_registry.host, "ok")] >= 2


def test_one_token_is_reused_across_tags_of_a_repository(
    token_registry: RegistryServer,
    token_server: TokenServer,
    session: requests.Session,
    make_repo: object,
) -> None:
    repo = make_repo("public/")  # type: ignore[operator]
    a = push_image(token_registry, repo, "a", image_config("linux", "amd64"), OCI_MANIFEST)
    b = push_image(token_registry, repo, "b", image_config("linux", "arm64", "v8"), OCI_MANIFEST)
    c = push_oci_index_with_attestations(token_registry, repo, "c")
    resolver, _ = make_resolver(session)
    with resolver:
        tmark = token_server.mark()
        rmark = token_registry.mark()
        for img in (a, b, c):
            assert resolver.resolve(img.reference, deadline=Deadline.after(20)).digest == img.digest
        assert token_server.count(tmark) == 1
        # one 401 to learn the challenge, then every request carries the token
        assert [e.status for e in token_registry.requests_since(rmark)].count(401) == 1


def test_pull_secret_credentials_go_only_to_matching_hosts(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, password = token_credentials
    elsewhere = StaticKeychain([("127.0.0.1:1", Credential(user, password, "pod secret"))])
    resolver, _ = make_resolver(session)
    img = token_pushed_images["oci-single-amd64"]
    with resolver:
        tmark = token_server.mark()
        with pytest.raises(AuthError) as denied:
            resolver.resolve(img.reference, deadline=Deadline.after(20), keychain=elsewhere)
        assert all(r.username is None for r in token_server.requests_since(tmark))
        assert "refused access" in str(denied.value)
        here = StaticKeychain([(token_registry.host, Credential(user, password, "pod secret"))])
        tmark = token_server.mark()
        info = resolver.resolve(img.reference, deadline=Deadline.after(20), keychain=here)
        assert info.digest == img.digest
        assert user in [r.username for r in token_server.requests_since(tmark)]


def test_private_registry_patterns_skip_anonymous(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_public_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, password = token_credentials
    keychain = StaticKeychain([(token_registry.host, Credential(user, password, "node"))])
    resolver, _ = make_resolver(session, keychain=keychain, private_registries=(token_registry.host,))
    img = token_public_images["docker-single-arm64"]
    with resolver:
        tmark = token_server.mark()
        assert resolver.resolve(img.reference, deadline=Deadline.after(20)).digest == img.digest
        assert [r.username for r in token_server.requests_since(tmark)] == [user]


def test_second_candidate_is_tried_when_the_first_is_refused(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, password = token_credentials
    keychain = StaticKeychain(
        [
            (f"{token_registry.host}/private", Credential("mallory", "wrong", "specific")),
            (token_registry.host, Credential(user, password, "general")),
        ]
    )
    resolver, _ = make_resolver(session, keychain=keychain, private_registries=(token_registry.host,))
    img = token_pushed_images["oci-single-amd64"]
    with resolver:
        assert resolver.resolve(img.reference, deadline=Deadline.after(20)).digest == img.digest


def test_tls_registry_with_a_private_ca(
    tls_registry: RegistryServer,
    tls_pushed_images: dict[str, PushedImage],
) -> None:
    img = tls_pushed_images["oci-index-attestations"]
    settings = RegistrySettings(registry_ca_file=str(tls_registry.ca_file))
    with make_session(settings) as session, Resolver(session, settings=settings) as resolver:
        assert resolver.resolve(img.reference, deadline=Deadline.after(20)).digest == img.digest
    plain = RegistrySettings()
    with make_session(plain) as session, Resolver(session, settings=plain) as resolver:
        with pytest.raises(RegistryError) as untrusted:
            resolver.resolve(img.reference, deadline=Deadline.after(20))
        assert "--registry-ca-file" in str(untrusted.value)
        assert not untrusted.value.temporary


def test_a_refused_credential_is_sent_to_the_token_server_once(  # noqa: PLR0917 - pytest fixtures
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_public_images: dict[str, PushedImage],
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, _ = token_credentials
    wrong = StaticKeychain([(token_registry.host, Credential(user, "not-the-password", "pod secret"))])
    resolver, _ = make_resolver(session)
    img = token_pushed_images["oci-single-amd64"]
    with resolver:
        # The host is now known to use Bearer: later tokens are fetched before the first request.
        resolver.resolve(token_public_images["oci-single-amd64"].reference, deadline=Deadline.after(20))
        tmark, rmark = token_server.mark(), token_registry.mark()
        with pytest.raises(AuthError):
            resolver.resolve(img.reference, deadline=Deadline.after(20), keychain=wrong)
        # anonymous: a token without access, refused by the registry; the credential: refused by the
        # token server, so nothing more is sent in its name (no second login, no registry request).
        assert [(r.username, r.status) for r in token_server.requests_since(tmark)] == [(None, 200), (user, 401)]
        assert [e.status for e in token_registry.requests_since(rmark)] == [401]


def test_one_secret_from_two_keychains_is_tried_once(
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    user, _ = basic_credentials
    node = StaticKeychain([(basic_registry.host, Credential(user, "stale-password", "node docker config"))])
    pod = StaticKeychain([(basic_registry.host, Credential(user, "stale-password", "imagePullSecret a/b"))])
    resolver, _ = make_resolver(session, keychain=node)
    img = basic_pushed_images["oci-single-amd64"]
    with resolver:
        mark = basic_registry.mark()
        with pytest.raises(AuthError) as denied:
            resolver.resolve(img.reference, deadline=Deadline.after(20), keychain=pod)
        assert [e.status for e in basic_registry.requests_since(mark)] == [401, 401]  # anonymous, the secret
        assert "imagePullSecret a/b" in str(denied.value)
