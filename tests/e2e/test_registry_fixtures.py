"""The test infrastructure itself: real registry servers, pushes, counting."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
import requests
from cryptography import x509

from tests.support import images
from tests.support.certs import CA
from tests.support.images import PushedImage
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer, start_registry
from tests.support.token_server import TokenServer, b64url_decode, start_token_server

pytestmark = pytest.mark.registry


@pytest.fixture
def http() -> Iterator[requests.Session]:
    with requests.Session() as s:
        s.trust_env = False
        yield s


def skopeo_raw(reg: RegistryServer, reference: str, *, creds: tuple[str, str] | None = None) -> bytes:
    cmd = ["skopeo", "inspect", "--raw", "--tls-verify=false", "--retry-times=0"]
    if creds:
        cmd += ["--creds", f"{creds[0]}:{creds[1]}"]
    if reg.cert_dir:
        cmd += ["--cert-dir", str(reg.cert_dir)]
    out = subprocess.run([*cmd, f"docker://{reference}"], capture_output=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


def test_anonymous_registry_answers_v2(registry: RegistryServer, http: requests.Session) -> None:
    with http.get(f"{registry.url}/v2/", timeout=5) as resp:
        assert resp.status_code == 200
        assert resp.headers["Docker-Distribution-Api-Version"] == "registry/2.0"
    assert registry.url.startswith("http://127.0.0.1:")
    assert registry.ca_file is None


MODES = {
    # mode: (registry fixture, images fixture, credentials fixture or None)
    "anonymous": ("registry", "pushed_images", None),
    "basic": ("basic_registry", "basic_pushed_images", "basic_credentials"),
    "token-private": ("token_registry", "token_pushed_images", "token_credentials"),
    "token-public": ("token_registry", "token_public_images", None),
    "tls": ("tls_registry", "tls_pushed_images", None),
}


@pytest.mark.parametrize("shape", sorted(images.SHAPES))
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_shape_reads_back_with_skopeo(request: pytest.FixtureRequest, mode: str, shape: str) -> None:
    reg_name, images_name, creds_name = MODES[mode]
    reg: RegistryServer = request.getfixturevalue(reg_name)
    img: PushedImage = request.getfixturevalue(images_name)[shape]
    creds = request.getfixturevalue(creds_name) if creds_name else None
    raw = skopeo_raw(reg, img.reference, creds=creds)
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == img.digest
    assert raw == img.manifest
    # by digest too
    assert skopeo_raw(reg, img.by_digest, creds=creds) == img.manifest


def test_access_log_counts_exactly_the_requests_made(
    registry: RegistryServer, pushed_images: dict[str, PushedImage], http: requests.Session
) -> None:
    img = pushed_images["docker-manifest-list"]
    mark = registry.mark()
    with http.get(f"{registry.url}/v2/", timeout=5):
        pass
    for _ in range(3):
        with http.get(
            f"{registry.url}/v2/{img.repository}/manifests/{img.tag}",
            headers={"Accept": images.DOCKER_MANIFEST_LIST},
            timeout=5,
        ) as resp:
            assert resp.status_code == 200
    with http.head(f"{registry.url}/v2/{img.repository}/manifests/nope", timeout=5):
        pass
    entries = registry.requests_since(mark)
    assert [(e.method, e.path, e.status) for e in entries] == [
        ("GET", "/v2/", 200),
        *[("GET", f"/v2/{img.repository}/manifests/{img.tag}", 200)] * 3,
        ("HEAD", f"/v2/{img.repository}/manifests/nope", 404),
    ]
    assert registry.count(method="GET", path_contains="/manifests/", since=mark) == 3
    assert registry.count(since=mark) == 5
    # nothing new happened: a second look sees the same
    assert registry.count(since=mark) == 5


def test_pushes_are_test_traffic(registry: RegistryServer, unique_repo: str) -> None:
    mark = registry.mark()
    images.push_oci_single(registry, unique_repo, "x")
    assert registry.count(since=mark) == 0
    pushed = registry.requests_since(mark, include_test_traffic=True, method="PUT")
    assert any(e.path == f"/v2/{unique_repo}/manifests/x" and e.status == 201 for e in pushed)


def test_deleted_child_answers_404(
    registry: RegistryServer, pushed_images: dict[str, PushedImage], http: requests.Session
) -> None:
    img = pushed_images["index-deleted-child"]
    (gone,) = img.deleted
    accept = {"Accept": f"{images.OCI_MANIFEST}, {images.OCI_INDEX}"}
    with http.get(f"{registry.url}/v2/{img.repository}/manifests/{gone}", headers=accept, timeout=5) as resp:
        assert resp.status_code == 404
    with http.get(f"{registry.url}/v2/{img.repository}/manifests/{img.tag}", headers=accept, timeout=5) as resp:
        assert resp.status_code == 200
        assert gone in resp.text
    kept = img.children["linux/amd64"]
    with http.get(f"{registry.url}/v2/{img.repository}/manifests/{kept}", headers=accept, timeout=5) as resp:
        assert resp.status_code == 200


def test_shapes_have_the_promised_platforms(pushed_images: dict[str, PushedImage]) -> None:
    assert set(pushed_images["oci-index-attestations"].children) == {"linux/amd64", "linux/arm64/v8"}
    assert len(pushed_images["oci-index-attestations"].attestations) == 2
    assert set(pushed_images["docker-manifest-list"].children) == {
        "linux/amd64",
        "linux/arm64/v8",
        "linux/arm/v7",
        "linux/ppc64le",
        "linux/s390x",
    }
    assert pushed_images["docker-single-arm64"].platforms == ("linux/arm64/v8",)
    assert pushed_images["oci-single-amd64"].platforms == ("linux/amd64",)
    assert set(pushed_images["windows-index"].children) == {
        "windows/amd64:10.0.17763.5458",
        "windows/amd64:10.0.20348.2227",
        "linux/amd64",
    }
    nested = pushed_images["nested-index"]
    ((inner_digest, inner),) = nested.nested.items()
    assert nested.json["manifests"][0]["digest"] == inner_digest
    assert set(inner.children) == {"linux/amd64", "linux/arm64/v8"}


def test_content_is_deterministic_and_distinct(registry: RegistryServer) -> None:
    a = images.push_docker_single(registry, "det/a", "1")
    again = images.push_docker_single(registry, "det/a", "1")
    b = images.push_docker_single(registry, "det/b", "1")
    assert a.digest == again.digest
    assert a.digest != b.digest


def test_start_retries_when_the_port_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import registry_server

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ports = iter([busy.getsockname()[1]])
        real = registry_server._free_port
        monkeypatch.setattr(registry_server, "_free_port", lambda: next(ports, None) or real())
        with start_registry(tmp_path) as reg:
            assert reg.port != busy.getsockname()[1]
            assert reg.start_attempts == 2
            assert reg.count(since=reg.mark()) == 0


def test_registry_environment_overrides_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_HTTP_ADDR", "0.0.0.0:5000")
    monkeypatch.setenv("REGISTRY_AUTH", "htpasswd")
    with start_registry(tmp_path) as reg, requests.Session() as http:
        http.trust_env = False
        with http.get(f"{reg.url}/v2/", timeout=5) as resp:
            assert resp.status_code == 200


def test_missing_binary_is_an_error_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import registry_server

    monkeypatch.setattr("shutil.which", lambda *_a, **_k: None)
    with (
        pytest.raises(registry_server.RegistryNotInstalled, match=r"tests\.support\.system_deps"),
        registry_server.start_registry(tmp_path),
    ):
        pass


# -- auth modes --------------------------------------------------------------------------


def test_basic_registry_challenges_and_checks_passwords(
    basic_registry: RegistryServer, basic_credentials: tuple[str, str], http: requests.Session
) -> None:
    with http.get(f"{basic_registry.url}/v2/", timeout=5) as resp:
        assert resp.status_code == 401
        assert resp.headers["WWW-Authenticate"] == 'Basic realm="noe-test-registry"'
    with http.get(f"{basic_registry.url}/v2/", auth=basic_credentials, timeout=5) as resp:
        assert resp.status_code == 200
    with http.get(f"{basic_registry.url}/v2/", auth=("alice", "wrong"), timeout=5) as resp:
        assert resp.status_code == 401
    assert basic_registry.push_credentials == basic_credentials


def test_token_registry_challenges_with_bearer(
    token_registry: RegistryServer, token_server: TokenServer, http: requests.Session
) -> None:
    with http.get(f"{token_registry.url}/v2/", timeout=5) as resp:
        assert resp.status_code == 401
        assert resp.headers["WWW-Authenticate"] == (
            f'Bearer realm="{token_server.realm}",service="{token_server.service}"'
        )
    with http.get(f"{token_registry.url}/v2/private/x/manifests/v1", timeout=5) as resp:
        assert resp.status_code == 401
        assert 'scope="repository:private/x:pull"' in resp.headers["WWW-Authenticate"]
    assert token_server.realm.startswith("http://127.0.0.1:")


def _token(
    http: requests.Session, ts: TokenServer, scope: str, auth: tuple[str, str] | None = None
) -> requests.Response:
    return http.get(ts.realm, params={"service": ts.service, "scope": scope}, auth=auth, timeout=5)


def _claims(token: str) -> dict[str, object]:
    header, claims, _sig = token.split(".")
    assert json.loads(b64url_decode(header))["x5c"]
    return json.loads(b64url_decode(claims))  # type: ignore[no-any-return]


def test_token_server_grants_public_pull_anonymously(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_public_images: dict[str, PushedImage],
    http: requests.Session,
) -> None:
    img = token_public_images["docker-single-arm64"]
    mark = token_server.mark()
    with _token(http, token_server, f"repository:{img.repository}:pull,push") as resp:
        assert resp.status_code == 200
        body = resp.json()
    assert set(body) == {"token", "access_token", "expires_in", "issued_at"}
    claims = _claims(body["token"])
    assert claims["access"] == [{"type": "repository", "name": img.repository, "actions": ["pull"]}]
    assert claims["aud"] == token_server.service
    assert claims["iss"] == token_server.issuer
    headers = {"Authorization": f"Bearer {body['token']}", "Accept": images.DOCKER_MANIFEST}
    url = f"{token_registry.url}/v2/{img.repository}/manifests/{img.tag}"
    with http.get(url, headers=headers, timeout=5) as resp:
        assert resp.status_code == 200
        assert resp.content == img.manifest
    (req,) = token_server.requests_since(mark)
    assert (req.authorization, req.username, req.status) == (False, None, 200)
    assert req.scopes == (f"repository:{img.repository}:pull,push",)


def test_token_server_private_repositories_need_credentials(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_credentials: tuple[str, str],
    token_pushed_images: dict[str, PushedImage],
    http: requests.Session,
) -> None:
    img = token_pushed_images["oci-single-amd64"]
    url = f"{token_registry.url}/v2/{img.repository}/manifests/{img.tag}"
    scope = f"repository:{img.repository}:pull"
    mark = token_server.mark()
    with _token(http, token_server, scope) as resp:
        anonymous = resp.json()["token"]
    assert _claims(anonymous)["access"] == []
    with http.get(url, headers={"Authorization": f"Bearer {anonymous}"}, timeout=5) as resp:
        assert resp.status_code == 401
    with _token(http, token_server, scope, auth=("bob", "wrong")) as resp:
        assert resp.status_code == 401
        assert "token" not in resp.json()
    with _token(http, token_server, f"repository:{img.repository}:pull,push", auth=token_credentials) as resp:
        bob = resp.json()["token"]
    assert _claims(bob)["access"] == [{"type": "repository", "name": img.repository, "actions": ["pull"]}]
    assert _claims(bob)["sub"] == "bob"
    with http.get(url, headers={"Authorization": f"Bearer {bob}", "Accept": images.OCI_MANIFEST}, timeout=5) as r:
        assert r.status_code == 200
    seen = token_server.requests_since(mark)
    assert [(r.username, r.authorization, r.status) for r in seen] == [
        (None, False, 200),
        ("bob", True, 401),
        ("bob", True, 200),
    ]
    assert token_server.count(mark, username="bob") == 2
    assert token_credentials[1] not in repr(seen)


def test_token_server_rejects_other_schemes_and_services(token_server: TokenServer, http: requests.Session) -> None:
    mark = token_server.mark()
    with http.get(token_server.realm, headers={"Authorization": "Bearer abc"}, timeout=5) as resp:
        assert resp.status_code == 401
    with http.get(token_server.realm, params={"service": "elsewhere"}, timeout=5) as resp:
        assert resp.status_code == 400
    assert [r.scheme for r in token_server.requests_since(mark)] == ["bearer", None]


def test_token_server_oauth2_refresh_token_grant(
    token_registry: RegistryServer,
    token_server: TokenServer,
    token_pushed_images: dict[str, PushedImage],
    http: requests.Session,
) -> None:
    img = token_pushed_images["oci-single-amd64"]
    refresh = token_server.add_refresh_token("bob")
    scope = f"repository:{img.repository}:pull"
    form = {
        "grant_type": "refresh_token",
        "refresh_token": refresh,
        "service": token_server.service,
        "scope": scope,
        "client_id": "noe-test",
    }
    mark = token_server.mark()
    with http.post(token_server.realm, data=form, timeout=5) as resp:
        assert resp.status_code == 200
        body = resp.json()
    assert set(body) == {"access_token", "scope", "expires_in", "issued_at"}
    assert body["scope"] == scope
    assert _claims(body["access_token"])["sub"] == "bob"
    assert _claims(body["access_token"])["access"] == [
        {"type": "repository", "name": img.repository, "actions": ["pull"]}
    ]
    url = f"{token_registry.url}/v2/{img.repository}/manifests/{img.tag}"
    headers = {"Authorization": f"Bearer {body['access_token']}", "Accept": images.OCI_MANIFEST}
    with http.get(url, headers=headers, timeout=5) as resp:
        assert resp.status_code == 200
    refusals = [
        {**form, "refresh_token": "rt-unknown"},  # invalid_grant
        {**form, "grant_type": "password"},  # unsupported_grant_type
        {k: v for k, v in form.items() if k != "client_id"},  # invalid_request
    ]
    errors = []
    for bad in refusals:
        with http.post(token_server.realm, data=bad, timeout=5) as resp:
            assert resp.status_code == 400
            errors.append(resp.json()["error"])
    assert errors == ["invalid_grant", "unsupported_grant_type", "invalid_request"]
    with http.post(token_server.realm, json=form, timeout=5) as resp:  # not a form
        assert resp.status_code == 400
    token_server.revoke_refresh_token(refresh)
    with http.post(token_server.realm, data=form, timeout=5) as resp:
        assert resp.status_code == 400
    with token_server.without_oauth(), http.post(token_server.realm, data=form, timeout=5) as resp:
        assert resp.status_code == 404
    seen = token_server.requests_since(mark)
    assert [(r.method, r.grant_type, r.client_id, r.username, r.status) for r in seen] == [
        ("POST", "refresh_token", "noe-test", "bob", 200),
        ("POST", "refresh_token", "noe-test", None, 400),
        ("POST", "password", "noe-test", "bob", 400),
        ("POST", "refresh_token", None, "bob", 400),
        ("POST", None, None, None, 400),
        ("POST", "refresh_token", "noe-test", None, 400),
        ("POST", "refresh_token", "noe-test", None, 404),
    ]
    assert seen[0].scopes == (scope,) and seen[0].service == token_server.service
    assert refresh not in repr(seen)


@pytest.mark.parametrize("fields", ["token", "access_token"])
def test_token_response_fields_are_configurable(
    token_server: TokenServer, http: requests.Session, fields: Literal["token", "access_token"]
) -> None:
    with token_server.responding_with(fields, expires_in=False), _token(http, token_server, "") as resp:
        assert set(resp.json()) == {fields, "issued_at"}
    with _token(http, token_server, "") as resp:
        assert set(resp.json()) == {"token", "access_token", "expires_in", "issued_at"}


def test_es256_token_server_over_tls(tmp_path: Path, test_ca: CA, http: requests.Session) -> None:
    pair = test_ca.issue(["127.0.0.1"], name="token-tls")
    with (
        start_token_server(tmp_path / "ts", algorithm="ES256", tls=pair, users={"bob": "pw"}) as ts,
        start_registry(tmp_path / "reg", auth="token", token=ts) as reg,
    ):
        assert ts.realm.startswith("https://127.0.0.1:")
        img = images.push_docker_single(reg, "private/es", "v1")
        with http.get(
            ts.realm,
            params={"service": ts.service, "scope": "repository:private/es:pull"},
            auth=("bob", "pw"),
            verify=str(pair.ca_file),
            timeout=5,
        ) as resp:
            token = resp.json()["token"]
        assert json.loads(b64url_decode(token.split(".")[0]))["alg"] == "ES256"
        with http.get(
            f"{reg.url}/v2/private/es/manifests/v1",
            headers={"Authorization": f"Bearer {token}", "Accept": images.DOCKER_MANIFEST},
            timeout=5,
        ) as resp:
            assert resp.status_code == 200
            assert resp.content == img.manifest


def test_basic_auth_over_tls(tmp_path: Path, test_ca: CA, http: requests.Session) -> None:
    pair = test_ca.issue(["127.0.0.1"], name="basic-tls")
    with start_registry(tmp_path, auth="basic", tls=pair, htpasswd_users={"dave": "pw"}) as reg:
        img = images.push_docker_manifest_list(reg, "both/x", "v1")
        assert skopeo_raw(reg, img.reference, creds=("dave", "pw")) == img.manifest
        with http.get(f"{reg.url}/v2/", verify=str(pair.ca_file), timeout=5) as resp:
            assert resp.status_code == 401
            assert resp.headers["WWW-Authenticate"].startswith("Basic ")


# -- TLS -------------------------------------------------------------------------------


def test_tls_registry_is_trusted_only_through_its_ca(tls_registry: RegistryServer, http: requests.Session) -> None:
    assert tls_registry.url.startswith("https://127.0.0.1:")
    assert tls_registry.ca_file is not None
    with http.get(f"{tls_registry.url}/v2/", verify=str(tls_registry.ca_file), timeout=5) as resp:
        assert resp.status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        http.get(f"{tls_registry.url}/v2/", verify=True, timeout=5)


def test_issued_certificates_name_ip_and_dns(test_ca: CA) -> None:
    pair = test_ca.issue(["127.0.0.1", "localhost"], name="san-check")
    cert = x509.load_pem_x509_certificate(pair.cert_file.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert cert.issuer == test_ca.cert.subject
    assert pair.ca_file == test_ca.ca_file


# -- system dependencies ---------------------------------------------------------------


def test_system_deps_is_a_fast_no_op_when_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.system_deps"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "nothing to do" in out.stdout
