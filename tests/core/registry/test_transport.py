"""The transport against hand-made hostile servers and the real registry: digests, deadlines,
redirects, retries, token answers, and that no secret ever reaches a log line or an error."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from noe_core.credentials.keychain import Credential, StaticKeychain
from noe_core.errors import AuthError, DeadlineExceeded, DigestMismatch, ManifestError, NoeError, RegistryError
from noe_core.image.manifest import sha256_digest
from noe_core.name.reference import parse_reference
from noe_core.registry.observer import CountingObserver
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import Transport, make_session
from noe_core.util.deadline import Deadline
from tests.support.images import PushedImage
from tests.support.registry_server import RegistryServer
from tests.support.scripted_server import Route, ScriptedServer, Seen, start_scripted_server
from tests.support.token_server import TokenServer

INSECURE = RegistrySettings(insecure_registries=("127.0.0.1:*",))
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


Hostile = ScriptedServer


@pytest.fixture
def hostile() -> Iterator[ScriptedServer]:
    with start_scripted_server() as server:
        yield server


@pytest.fixture
def session() -> Iterator[requests.Session]:
    s = make_session(INSECURE)
    yield s
    s.close()


def manifest_for(config: bytes) -> bytes:
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(config),
                "size": len(config),
            },
            "layers": [],
        }
    ).encode()


def test_wrong_body_for_the_requested_digest_is_a_digest_mismatch(hostile: Hostile, session: requests.Session) -> None:
    config = b'{"os":"linux","architecture":"arm64"}'
    good = manifest_for(config)
    evil = manifest_for(b'{"os":"linux","architecture":"amd64"}')
    digest = sha256_digest(good)
    hostile.routes[f"/v2/app/manifests/{digest}"] = lambda h: (200, {"Content-Type": OCI_MANIFEST}, evil)
    with Resolver(session, settings=INSECURE) as resolver:
        ref = f"{hostile.host}/app@{digest}"
        with pytest.raises(DigestMismatch) as caught:
            resolver.resolve(ref, deadline=Deadline.after(5))
        assert digest in str(caught.value)
        # never cached: the next lookup asks again
        with pytest.raises(DigestMismatch):
            resolver.resolve(ref, deadline=Deadline.after(5))
    assert len([s for s in hostile.seen if digest in s.path]) == 2


def test_wrong_config_blob_is_a_digest_mismatch(hostile: Hostile, session: requests.Session) -> None:
    config = b'{"os":"linux","architecture":"arm64"}'
    body = manifest_for(config)
    hostile.routes["/v2/app/manifests/v1"] = lambda h: (200, {"Content-Type": OCI_MANIFEST}, body)
    hostile.routes[f"/v2/app/blobs/{sha256_digest(config)}"] = lambda h: (200, {}, b'{"os":"linux"}')
    with Resolver(session, settings=INSECURE) as resolver, pytest.raises(DigestMismatch):
        resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))


def test_docker_content_digest_that_does_not_match_the_body(hostile: Hostile, session: requests.Session) -> None:
    body = manifest_for(b"{}")
    lie = "sha256:" + "0" * 64
    hostile.routes["/v2/app/manifests/v1"] = lambda h: (
        200,
        {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": lie},
        body,
    )
    with Resolver(session, settings=INSECURE) as resolver, pytest.raises(DigestMismatch):
        resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))


def test_server_that_never_answers_hits_the_deadline(session: requests.Session) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        with Resolver(session, settings=INSECURE) as resolver:
            start = time.monotonic()
            with pytest.raises(DeadlineExceeded) as caught:
                resolver.resolve(f"127.0.0.1:{port}/app:v1", deadline=Deadline.after(0.8))
            elapsed = time.monotonic() - start
        assert elapsed < 0.8 + 0.3, elapsed
        assert caught.value.temporary
        assert f"127.0.0.1:{port}" in str(caught.value)


def test_temporary_errors_are_retried_and_retry_after_beyond_the_deadline_is_not_waited(
    hostile: Hostile, session: requests.Session
) -> None:
    config = b'{"os":"linux","architecture":"riscv64"}'
    body = manifest_for(config)
    calls = {"n": 0}

    def flaky(h: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        calls["n"] += 1
        return (503, {}, b"") if calls["n"] == 1 else (200, {"Content-Type": OCI_MANIFEST}, body)

    hostile.routes["/v2/app/manifests/v1"] = flaky
    hostile.routes[f"/v2/app/blobs/{sha256_digest(config)}"] = lambda h: (200, {}, config)
    hostile.routes["/v2/slow/manifests/v1"] = lambda h: (429, {"Retry-After": "3600"}, b"")
    with Resolver(session, settings=INSECURE) as resolver:
        info = resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))
        assert info.platforms[0].architecture == "riscv64"
        start = time.monotonic()
        with pytest.raises(RegistryError) as limited:
            resolver.resolve(f"{hostile.host}/slow:v1", deadline=Deadline.after(5))
        assert time.monotonic() - start < 1
        assert limited.value.status == 429 and limited.value.temporary
        assert "--registry-proxies" in str(limited.value)


def test_retry_after_of_an_hour_is_not_waited_even_without_a_deadline(
    hostile: Hostile, session: requests.Session
) -> None:
    """noe inspect and noe mutate run without a deadline: a registry must not park them for an hour."""
    hostile.routes["/v2/slow/manifests/v1"] = lambda h: (503, {"Retry-After": "3600"}, b"")
    with Resolver(session, settings=INSECURE) as resolver:
        start = time.monotonic()
        with pytest.raises(RegistryError) as caught:
            resolver.resolve(f"{hostile.host}/slow:v1", deadline=Deadline.never())
        assert time.monotonic() - start < 5
    assert caught.value.status == 503
    assert sum(1 for s in hostile.seen if s.path.startswith("/v2/slow/")) == 1


def test_redirect_to_another_host_drops_authorization(hostile: Hostile, session: requests.Session) -> None:
    config = b'{"os":"linux","architecture":"arm64","variant":"v8"}'
    body = manifest_for(config)
    cred = Credential("user", "s3cret-password", "test")
    storage: list[Seen] = []

    class Storage(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            storage.append(Seen("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
            self.send_response(200)
            self.send_header("Content-Length", str(len(config)))
            self.end_headers()
            self.wfile.write(config)

    blob_server = ThreadingHTTPServer(("localhost", 0), Storage)
    thread = threading.Thread(target=blob_server.serve_forever, daemon=True)
    thread.start()
    try:

        def need_auth(route: Route) -> Route:
            def answer(h: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
                if h.headers.get("Authorization") != cred.basic_header():
                    return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b""
                return route(h)

            return answer

        location = f"http://localhost:{blob_server.server_address[1]}/bucket/blob?sig=1"
        hostile.routes["/v2/app/manifests/v1"] = need_auth(lambda h: (200, {"Content-Type": OCI_MANIFEST}, body))
        hostile.routes[f"/v2/app/blobs/{sha256_digest(config)}"] = need_auth(
            lambda h: (307, {"Location": location}, b"")
        )
        settings = RegistrySettings(insecure_registries=("127.0.0.1:*", "localhost:*"))
        with Resolver(session, settings=settings, keychain=StaticKeychain([(hostile.host, cred)])) as resolver:
            info = resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))
        assert str(info.platforms[0]) == "linux/arm64/v8"
        assert len(storage) == 1
        assert "authorization" not in storage[0].headers
        assert any(s.headers.get("authorization") for s in hostile.seen if "/blobs/" in s.path)
    finally:
        blob_server.shutdown()
        blob_server.server_close()
        thread.join()


def test_oversized_manifest_is_refused(hostile: Hostile, session: requests.Session) -> None:
    big = b'{"schemaVersion":2,' + b" " * (5 * 1024 * 1024) + b"}"
    hostile.routes["/v2/app/manifests/v1"] = lambda h: (200, {"Content-Type": OCI_MANIFEST}, big)
    with Resolver(session, settings=INSECURE) as resolver, pytest.raises(ManifestError) as caught:
        resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))
    assert "limit" in str(caught.value)


def test_a_large_error_page_is_still_the_registry_status(hostile: Hostile, session: requests.Session) -> None:
    # A proxy's HTML error page can be bigger than the error-body cap: the status is what matters.
    page = b"<html>" + b"x" * (200 * 1024) + b"</html>"
    hostile.routes["/v2/gone/manifests/v1"] = lambda h: (404, {"Content-Type": "text/html"}, page)
    hostile.routes["/v2/down/manifests/v1"] = lambda h: (502, {"Content-Type": "text/html"}, page)
    with Resolver(session, settings=INSECURE) as resolver:
        with pytest.raises(RegistryError) as gone:
            resolver.resolve(f"{hostile.host}/gone:v1", deadline=Deadline.after(5))
        assert gone.value.status == 404 and "check the image name" in str(gone.value)
        with pytest.raises(RegistryError) as down:
            resolver.resolve(f"{hostile.host}/down:v1", deadline=Deadline.after(5))
        assert down.value.status == 502 and down.value.temporary
    assert len([s for s in hostile.seen if s.path == "/v2/down/manifests/v1"]) == 1 + INSECURE.max_retries


def test_rate_limit_headers_reach_the_observer(hostile: Hostile, session: requests.Session) -> None:
    config = b'{"os":"linux","architecture":"amd64"}'
    body = manifest_for(config)
    hostile.routes["/v2/app/manifests/v1"] = lambda h: (
        200,
        {"Content-Type": OCI_MANIFEST, "RateLimit-Limit": "100;w=21600", "RateLimit-Remaining": "76;w=21600"},
        body,
    )
    hostile.routes[f"/v2/app/blobs/{sha256_digest(config)}"] = lambda h: (200, {}, config)
    observer = CountingObserver()
    with Resolver(session, settings=INSECURE, observer=observer) as resolver:
        resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))
    assert observer.rate_limits[hostile.host] == (76, 100)
    assert observer.requests[(hostile.host, "GET", 200)] == 2


def test_malformed_challenge_is_a_clean_auth_error(hostile: Hostile, session: requests.Session) -> None:
    hostile.routes["/v2/app/manifests/v1"] = lambda h: (401, {"WWW-Authenticate": 'Bearer realm="x'}, b"")
    with Resolver(session, settings=INSECURE) as resolver, pytest.raises(AuthError) as caught:
        resolver.resolve(f"{hostile.host}/app:v1", deadline=Deadline.after(5))
    assert hostile.host in str(caught.value)


@pytest.mark.registry
@pytest.mark.parametrize(("fields", "expires"), [("token", True), ("access_token", True), ("both", False)])
def test_token_server_answer_variants(  # noqa: PLR0917 - pytest fixtures
    fields: str,
    expires: bool,
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_public_images: dict[str, PushedImage],
    session: requests.Session,
) -> None:
    img = token_public_images["oci-single-amd64"]
    with token_server.responding_with(fields, expires_in=expires), Resolver(session, settings=INSECURE) as resolver:  # type: ignore[arg-type]
        assert resolver.resolve(img.reference, deadline=Deadline.after(10)).digest == img.digest


@pytest.mark.registry
def test_token_is_only_sent_to_the_host_it_was_issued_for(  # noqa: PLR0917 - pytest fixtures
    token_registry: RegistryServer,
    token_public_images: dict[str, PushedImage],
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
    session: requests.Session,
    hostile: Hostile,
) -> None:
    observer = CountingObserver()
    transport = Transport(session, settings=INSECURE, observer=observer)
    token_img = token_public_images["oci-single-amd64"]
    ref = parse_reference(token_img.reference)
    result = transport.fetch("GET", ref, f"manifests/{token_img.tag}", deadline=Deadline.after(10), accept=OCI_MANIFEST)
    assert result.status == 200
    mark = registry.mark()
    other = parse_reference(f"{registry.host}/{token_img.repository}:v1")
    transport.fetch("GET", other, "manifests/v1", deadline=Deadline.after(10), accept=OCI_MANIFEST)
    assert registry.count(since=mark) == 1  # one anonymous GET: nothing to learn, nothing sent
    # The same repository on a host that records headers: the token stays with its issuer.
    hostile.routes[f"/v2/{token_img.repository}/manifests/{token_img.tag}"] = lambda h: (404, {}, b"")
    transport.fetch(
        "GET",
        parse_reference(f"{hostile.host}/{token_img.repository}:{token_img.tag}"),
        f"manifests/{token_img.tag}",
        deadline=Deadline.after(10),
        accept=OCI_MANIFEST,
    )
    assert [s.headers.get("authorization") for s in hostile.seen] == [None]
    # A token for (host, repository) is keyed by host: none exists for the other registry.
    assert all(key[0] == token_registry.host for key in transport.auth._tokens._data)


@pytest.mark.registry
def test_no_secret_in_logs_errors_or_exceptions(  # noqa: PLR0917 - pytest fixtures
    caplog: pytest.LogCaptureFixture,
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
    session: requests.Session,
) -> None:
    caplog.set_level(logging.DEBUG)
    user, password = token_credentials
    basic_user, basic_password = basic_credentials
    wrong = "wrong-" + password
    keychain = StaticKeychain(
        [
            (token_registry.host, Credential(user, wrong, "bad secret")),
            (token_registry.host, Credential(user, password, "good secret")),
            (basic_registry.host, Credential(basic_user, "nope-" + basic_password, "bad basic")),
        ]
    )
    errors: list[NoeError] = []
    with Resolver(session, settings=INSECURE, keychain=keychain) as resolver:
        img = token_pushed_images["docker-manifest-list"]
        resolver.resolve(img.reference, deadline=Deadline.after(10))
        tokens = [entry.value for entry in resolver.transport.auth._tokens._data.values()]
        assert tokens
        for ref in (
            basic_pushed_images["oci-single-amd64"].reference,
            f"{token_registry.host}/private/nothing-here:v1",
        ):
            try:
                resolver.resolve(
                    ref,
                    deadline=Deadline.after(10),
                    keychain=StaticKeychain([(token_registry.host, Credential("mallory", wrong, "pod"))]),
                )
            except NoeError as exc:
                errors.append(exc)
    assert errors
    secrets = [password, wrong, basic_password, "nope-" + basic_password, *tokens]
    texts = [r.getMessage() for r in caplog.records] + [str(e) for e in errors] + [repr(e) for e in errors]
    texts += [repr(c) for c in keychain.entries]
    for text in texts:
        for secret in secrets:
            assert secret not in text
