"""Docker ``identitytoken`` (OAuth2 refresh token) credentials against the real token registry:
the POST grant of distribution's oauth.md, its cache, its errors, and where the refresh token may go."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
import requests

from noe_core.credentials.docker_config import keychain_from_docker_config
from noe_core.credentials.keychain import Credential, Keychain, StaticKeychain
from noe_core.errors import AuthError, RegistryError
from noe_core.name.reference import parse_reference
from noe_core.registry.observer import CountingObserver
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import OAUTH_CLIENT_ID, Transport, make_session
from noe_core.util.deadline import Deadline
from tests.support.images import PushedImage
from tests.support.registry_server import RegistryServer
from tests.support.scripted_server import ScriptedServer, start_scripted_server
from tests.support.token_server import TokenServer

pytestmark = pytest.mark.registry

INSECURE = RegistrySettings(insecure_registries=("127.0.0.1:*",))
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
ACR_USER = "00000000-0000-0000-0000-000000000000"


def docker_config(host: str, refresh_token: str) -> Keychain:
    """What ``az acr login`` / ``docker login`` against an OAuth2 token server write."""
    entry = {"auth": base64.b64encode(f"{ACR_USER}:".encode()).decode(), "identitytoken": refresh_token}
    return keychain_from_docker_config(json.dumps({"auths": {host: entry}}).encode(), "docker config test")


@pytest.fixture
def session() -> Iterator[requests.Session]:
    s = make_session(INSECURE)
    yield s
    s.close()


@pytest.fixture
def refresh_token(token_server: TokenServer) -> Iterator[str]:
    token = token_server.add_refresh_token("bob")
    yield token
    token_server.revoke_refresh_token(token)


def test_identity_token_resolves_a_private_image(  # noqa: PLR0917 - pytest fixtures
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    refresh_token: str,
    session: requests.Session,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    img = token_pushed_images["oci-single-amd64"]
    keychain = docker_config(token_registry.host, refresh_token)
    observer = CountingObserver()
    mark = token_server.mark()
    with Resolver(session, settings=INSECURE, keychain=keychain, observer=observer) as resolver:
        info = resolver.resolve(img.reference, deadline=Deadline.after(10))
    assert info.digest == img.digest
    assert [str(p) for p in info.platforms] == ["linux/amd64"]
    seen = token_server.requests_since(mark)
    # Anonymous first (the image is not declared private): its token has no access; then one POST.
    assert [(r.method, r.grant_type, r.scheme, r.username, r.status) for r in seen] == [
        ("GET", None, None, None, 200),
        ("POST", "refresh_token", None, "bob", 200),
    ]
    (post,) = [r for r in seen if r.method == "POST"]
    assert post.client_id == OAUTH_CLIENT_ID
    assert post.service == token_server.service
    assert post.scopes == (f"repository:{img.repository}:pull",)
    assert post.content_type == "application/x-www-form-urlencoded"
    assert not any(r.scheme == "basic" for r in seen)
    assert observer.token_fetches[(token_registry.host, "ok")] == 2
    texts = [r.getMessage() for r in caplog.records] + [repr(seen), repr(info)]
    assert not any(refresh_token in text for text in texts)


def test_declared_private_registry_needs_only_the_post(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    refresh_token: str,
    session: requests.Session,
) -> None:
    img = token_pushed_images["docker-single-arm64"]
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), private_registries=(token_registry.host,))
    mark, rmark = token_server.mark(), token_registry.mark()
    with Resolver(session, settings=settings, keychain=docker_config(token_registry.host, refresh_token)) as r:
        assert r.resolve(img.reference, deadline=Deadline.after(10)).digest == img.digest
    assert [(t.method, t.grant_type, t.status) for t in token_server.requests_since(mark)] == [
        ("POST", "refresh_token", 200)
    ]
    # One 401 to learn the realm, then the manifest and its config blob with the access token.
    assert [e.status for e in token_registry.requests_since(rmark)] == [401, 200, 200]


def test_warm_lookup_reuses_the_access_token(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    refresh_token: str,
    session: requests.Session,
) -> None:
    img = token_pushed_images["oci-single-amd64"]
    ref = parse_reference(img.reference)
    transport = Transport(session, settings=INSECURE)
    credentials = docker_config(token_registry.host, refresh_token).resolve(ref)
    assert [c.is_refresh_token for c in credentials] == [True]

    def fetch() -> int:
        return transport.fetch(
            "GET",
            ref,
            f"manifests/{img.tag}",
            deadline=Deadline.after(10),
            credentials=credentials,
            accept=OCI_MANIFEST,
        ).status

    mark = token_server.mark()
    assert fetch() == 200
    assert token_server.count(mark) == 2  # anonymous GET, then the refresh-token POST
    mark, rmark = token_server.mark(), token_registry.mark()
    assert fetch() == 200
    assert token_server.count(mark) == 0
    assert [e.status for e in token_registry.requests_since(rmark)] == [200]
    # Cached per (host, repository, credential identity); the refresh token itself is no key.
    keys = list(transport.auth._tokens._data)
    assert (token_registry.host, img.repository, credentials[0].identity) in keys
    assert not any(refresh_token in part for key in keys for part in key)
    # A rotated identity token is another identity: one new POST, no reuse of the old access token.
    rotated = token_server.add_refresh_token("bob")
    try:
        mark = token_server.mark()
        credentials = docker_config(token_registry.host, rotated).resolve(ref)
        assert fetch() == 200
        # (Anonymous is tried first again, as for any credential the registry has not seen work.)
        assert [(r.method, r.status) for r in token_server.requests_since(mark)] == [("GET", 200), ("POST", 200)]
    finally:
        token_server.revoke_refresh_token(rotated)


def test_wrong_refresh_token_is_an_auth_error_without_the_token(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    session: requests.Session,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "rt-never-issued-" + "x" * 20
    img = token_pushed_images["oci-single-amd64"]
    observer = CountingObserver()
    mark = token_server.mark()
    with (
        Resolver(
            session, settings=INSECURE, keychain=docker_config(token_registry.host, wrong), observer=observer
        ) as resolver,
        pytest.raises(AuthError) as caught,
    ):
        resolver.resolve(img.reference, deadline=Deadline.after(10))
    message = str(caught.value)
    assert wrong not in message and wrong not in repr(caught.value)
    assert "identity token" in message and "invalid_grant" in message
    assert "log in again" in message and "docker config test" in message
    assert caught.value.status == 401  # the registry's refusal of the anonymous token
    seen = token_server.requests_since(mark)
    assert [(r.method, r.grant_type, r.username, r.status) for r in seen] == [
        ("GET", None, None, 200),
        ("POST", "refresh_token", None, 400),
    ]
    assert observer.token_fetches[(token_registry.host, "denied")] == 1
    assert not any(wrong in r.getMessage() for r in caplog.records)
    assert wrong not in repr(seen)


def test_a_refused_identity_token_falls_through_to_the_next_credential(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    img = token_pushed_images["oci-single-amd64"]
    keychain = StaticKeychain(
        [
            (token_registry.host, Credential(ACR_USER, "", "stale login", identity_token="rt-revoked")),
            (token_registry.host, Credential(*token_credentials, "robot")),
        ]
    )
    mark = token_server.mark()
    with Resolver(session, settings=INSECURE, keychain=keychain) as resolver:
        assert resolver.resolve(img.reference, deadline=Deadline.after(10)).digest == img.digest
    assert [(r.method, r.scheme, r.status) for r in token_server.requests_since(mark)] == [
        ("GET", None, 200),
        ("POST", None, 400),
        ("GET", "basic", 200),
    ]


def test_token_server_without_oauth_support(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    refresh_token: str,
    session: requests.Session,
) -> None:
    img = token_pushed_images["docker-manifest-list"]
    transport = Transport(session, settings=INSECURE)
    ref = parse_reference(img.reference)
    credentials = docker_config(token_registry.host, refresh_token).resolve(ref)
    mark = token_server.mark()
    with token_server.without_oauth(), pytest.raises(AuthError) as caught:
        transport.fetch("GET", ref, f"manifests/{img.tag}", deadline=Deadline.after(10), credentials=credentials)
    assert "does not accept OAuth2 refresh tokens" in str(caught.value)
    assert "username and password" in str(caught.value)
    assert refresh_token not in str(caught.value)
    # Refused once, never retried as Basic auth or in a URL.
    assert [(r.method, r.scheme, r.status) for r in token_server.requests_since(mark)] == [
        ("GET", None, 200),
        ("POST", None, 404),
    ]


# -- where the refresh token may go: a registry that records every header --------------------------

Recorder = ScriptedServer


@pytest.fixture
def recorder() -> Iterator[ScriptedServer]:
    with start_scripted_server() as server:
        yield server


def _everything_sent(recorder: Recorder) -> str:
    return repr(recorder.seen)


def test_refresh_token_goes_to_the_realm_only(
    recorder: Recorder,
    token_server: TokenServer,
    refresh_token: str,
    session: requests.Session,
) -> None:
    """A registry whose realm is the real token server: it gets the access token, never the refresh token."""
    challenge = f'Bearer realm="{token_server.realm}",service="{token_server.service}"'

    def manifest(h: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        if not (h.headers.get("Authorization") or "").startswith("Bearer "):
            return 401, {"WWW-Authenticate": challenge}, b""
        return 200, {"Content-Type": OCI_MANIFEST}, b"{}"

    recorder.routes["/v2/app/manifests/v1"] = manifest
    ref = parse_reference(f"{recorder.host}/app:v1")
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), private_registries=(recorder.host,))
    transport = Transport(session, settings=settings)
    credentials = docker_config(recorder.host, refresh_token).resolve(ref)
    mark = token_server.mark()
    result = transport.fetch("GET", ref, "manifests/v1", deadline=Deadline.after(10), credentials=credentials)
    assert result.status == 200
    assert [seen.headers.get("authorization", "").split(" ")[0] for seen in recorder.seen] == ["", "Bearer"]
    assert refresh_token not in _everything_sent(recorder)
    assert [(r.method, r.username) for r in token_server.requests_since(mark)] == [("POST", "bob")]


def test_basic_challenge_skips_a_refresh_token_credential(recorder: Recorder, session: requests.Session) -> None:
    secret = "rt-must-not-travel"
    recorder.routes["/v2/app/manifests/v1"] = lambda h: (401, {"WWW-Authenticate": 'Basic realm="r"'}, b"")
    ref = parse_reference(f"{recorder.host}/app:v1")
    transport = Transport(session, settings=INSECURE)
    credentials = (Credential(ACR_USER, "", "acr login", identity_token=secret),)
    for _ in range(2):  # cold (learns Basic from the anonymous try), then warm (known Basic host)
        with pytest.raises(AuthError) as caught:
            transport.fetch("GET", ref, "manifests/v1", deadline=Deadline.after(5), credentials=credentials)
        assert secret not in str(caught.value)
    # Only anonymous requests: the refresh-token candidate had nothing to send as Basic.
    assert [seen.headers.get("authorization") for seen in recorder.seen] == [None, None]
    assert secret not in _everything_sent(recorder)


def test_token_realm_redirect_is_not_followed_with_the_refresh_token(
    recorder: Recorder,
    session: requests.Session,
) -> None:
    secret = "rt-must-not-be-redirected"
    realm = f"http://{recorder.host}/token"
    recorder.routes["/v2/app/manifests/v1"] = lambda h: (
        401,
        {"WWW-Authenticate": f'Bearer realm="{realm}",service="s"'},
        b"",
    )
    recorder.routes["/token"] = lambda h: (307, {"Location": f"http://{recorder.host}/elsewhere"}, b"")
    ref = parse_reference(f"{recorder.host}/app:v1")
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), private_registries=(recorder.host,))
    transport = Transport(session, settings=settings)
    credentials = (Credential(ACR_USER, "", "acr login", identity_token=secret),)
    with pytest.raises(RegistryError) as caught:  # the realm answered 307: not a token
        transport.fetch("GET", ref, "manifests/v1", deadline=Deadline.after(5), credentials=credentials)
    assert secret not in str(caught.value)
    assert caught.value.status == 307
    # The only request carrying it is the POST to the realm, in its body; the redirect is not followed.
    assert [(seen.method, seen.path.split("?")[0], secret in seen.body) for seen in recorder.seen] == [
        ("GET", "/v2/app/manifests/v1", False),
        ("POST", "/token", True),
    ]
    assert not any(secret in seen.path or secret in repr(seen.headers) for seen in recorder.seen)
