"""Credential-aware cached answers (KEP-2535 semantics) against real registries, Basic and token auth.

A cached answer of an image that needed credentials goes only to a request whose own
credentials were seen reading the repository (one HEAD verifies new ones); images read
anonymously are shared. The same holds through the shared on-disk store, across resolvers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from noe_core.credentials.keychain import Credential, StaticKeychain
from noe_core.errors import AuthError
from noe_core.registry.cache.sqlite import DB_FILE, open_store
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from tests.support.images import PushedImage, image_config, push_image
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.registry

SETTINGS = RegistrySettings(insecure_registries=("127.0.0.1:*",), negative_cache_ttl=0)


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with make_session(SETTINGS) as s:
        yield s


def _keychain(registry: RegistryServer, user: str, password: str, source: str) -> StaticKeychain:
    return StaticKeychain([(registry.host, Credential(user, password, source))])


def _manifest_requests(registry: RegistryServer, mark: int, method: str, status: int | None = None) -> int:
    return sum(
        1
        for e in registry.requests_since(mark, method=method, path_contains="/manifests/")
        if status is None or e.status == status
    )


def _blob_gets(registry: RegistryServer, mark: int) -> int:
    return registry.count("GET", "/blobs/", since=mark)


@pytest.fixture(params=["basic", "token"])
def private(request: pytest.FixtureRequest) -> tuple[RegistryServer, PushedImage, tuple[str, str]]:
    """A registry that needs credentials, an image on it, and credentials that read it."""
    if request.param == "basic":
        registry: RegistryServer = request.getfixturevalue("basic_registry")
        images: dict[str, PushedImage] = request.getfixturevalue("basic_pushed_images")
        credentials: tuple[str, str] = request.getfixturevalue("basic_credentials")
    else:
        registry = request.getfixturevalue("token_registry")
        images = request.getfixturevalue("token_pushed_images")
        credentials = request.getfixturevalue("token_credentials")
    return registry, images["docker-single-arm64"], credentials


def test_a_cached_private_image_is_not_given_to_a_request_that_cannot_read_it(
    private: tuple[RegistryServer, PushedImage, tuple[str, str]], session: requests.Session
) -> None:
    registry, image, (user, password) = private
    team = _keychain(registry, user, password, "team-a/regcred")
    wrong = _keychain(registry, user, password + "-wrong", "team-b/regcred")
    with Resolver(session, settings=SETTINGS) as resolver:
        info = resolver.resolve(image.reference, deadline=Deadline.after(20), keychain=team)
        assert info.digest == image.digest
        assert resolver.cached(image.reference, keychain=team) is not None

        # No credentials, or wrong ones: never from memory, and the registry's refusal from resolve.
        for keychain in (None, wrong):
            assert resolver.cached(image.reference, keychain=keychain) is None
            assert resolver.cached(image.by_digest, keychain=keychain) is None
            for reference in (image.reference, image.by_digest):
                with pytest.raises(AuthError, match="refused access"):
                    resolver.resolve(reference, deadline=Deadline.after(20), keychain=keychain)


def test_the_same_secret_in_another_namespace_is_served_from_memory(
    private: tuple[RegistryServer, PushedImage, tuple[str, str]], session: requests.Session
) -> None:
    registry, image, (user, password) = private
    first = _keychain(registry, user, password, "team-a/regcred")
    other_namespace = _keychain(registry, user, password, "team-b/regcred")
    with Resolver(session, settings=SETTINGS) as resolver:
        resolver.resolve(image.reference, deadline=Deadline.after(20), keychain=first)
        mark = registry.mark()
        # The fingerprint is of the secret, not of where it was found: already verified.
        assert resolver.cached(image.reference, keychain=other_namespace) is not None
        assert resolver.resolve(image.by_digest, deadline=Deadline.after(20), keychain=other_namespace)
        assert registry.count(since=mark) == 0


def test_another_right_credential_is_served_after_one_head_and_no_get(
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    image = basic_pushed_images["docker-manifest-list"]
    alice = _keychain(basic_registry, *basic_credentials, "team-a/regcred")
    carol = _keychain(basic_registry, "carol", basic_registry.users["carol"], "team-b/regcred")
    with Resolver(session, settings=SETTINGS) as resolver:
        resolver.resolve(image.reference, deadline=Deadline.after(20), keychain=alice)
        assert resolver.cached(image.reference, keychain=carol) is None
        for reference in (image.reference, image.by_digest):
            mark = basic_registry.mark()
            info = resolver.resolve(reference, deadline=Deadline.after(20), keychain=carol)
            assert info.digest == image.digest
            verified = 1 if reference == image.reference else 0  # the tag's HEAD verified carol already
            assert _manifest_requests(basic_registry, mark, "HEAD", 200) == verified
            assert _manifest_requests(basic_registry, mark, "GET") == 0 and _blob_gets(basic_registry, mark) == 0
        mark = basic_registry.mark()
        assert resolver.cached(image.reference, keychain=carol) is not None
        assert basic_registry.count(since=mark) == 0


def test_public_images_are_shared_freely(
    token_registry: RegistryServer,
    token_public_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    image = token_public_images["docker-manifest-list"]
    with Resolver(session, settings=SETTINGS) as resolver:
        resolver.resolve(image.reference, deadline=Deadline.after(20))
        mark = token_registry.mark()
        someone = _keychain(token_registry, *token_credentials, "x/y")
        assert resolver.cached(image.reference, keychain=someone) is not None
        assert resolver.cached(image.by_digest) is not None
        assert token_registry.count(since=mark) == 0


def test_grants_and_answers_are_shared_through_the_store_without_credentials_on_disk(
    private: tuple[RegistryServer, PushedImage, tuple[str, str]],
    session: requests.Session,
    tmp_path: Path,
) -> None:
    registry, image, (user, password) = private
    team = _keychain(registry, user, password, "team-a/regcred")
    first = open_store(tmp_path, max_images=100, max_tags=100)
    with Resolver(session, settings=SETTINGS, store=first) as worker_1:
        worker_1.resolve(image.reference, deadline=Deadline.after(20), keychain=team)
    mark = registry.mark()
    second = open_store(tmp_path, max_images=100, max_tags=100)
    with Resolver(session, settings=SETTINGS, store=second) as worker_2:
        # The fast path stays off the disk; the slow one finds the facts and the grant there.
        assert worker_2.cached(image.reference, keychain=team) is None
        assert worker_2.resolve(image.reference, deadline=Deadline.after(20), keychain=team).digest == image.digest
        assert registry.count(since=mark) == 0
        assert worker_2.cached(image.reference, keychain=team) is not None
        with pytest.raises(AuthError):
            worker_2.resolve(image.reference, deadline=Deadline.after(20))
    assert registry.count(since=mark, method="GET") == 0
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith(DB_FILE))
    assert password.encode() not in stored and user.encode() + b":" not in stored


def test_a_new_private_image_is_recorded_only_for_who_read_it(
    basic_registry: RegistryServer,
    basic_credentials: tuple[str, str],
    session: requests.Session,
    make_repo: object,
) -> None:
    repo = make_repo("private/")  # type: ignore[operator]
    image = push_image(basic_registry, repo, "v1", image_config("linux", "arm64"))
    team = _keychain(basic_registry, *basic_credentials, "team-a/regcred")
    with Resolver(session, settings=SETTINGS) as resolver:
        resolver.resolve(image.reference, deadline=Deadline.after(20), keychain=team)
        assert resolver.cached(image.reference) is None
        assert resolver.cached(image.reference, keychain=team) is not None
