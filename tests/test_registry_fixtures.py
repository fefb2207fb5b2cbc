"""The test infrastructure itself: real registry servers, pushes, counting."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support import images
from tests.support.images import PushedImage
from tests.support.registry_server import RegistryServer

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


@pytest.mark.parametrize("shape", sorted(images.SHAPES))
def test_every_shape_reads_back_with_skopeo(
    registry: RegistryServer, pushed_images: dict[str, PushedImage], shape: str
) -> None:
    img = pushed_images[shape]
    raw = skopeo_raw(registry, img.reference)
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == img.digest
    assert raw == img.manifest


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


def test_missing_binary_is_an_error_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import registry_server

    monkeypatch.setattr(registry_server.shutil, "which", lambda *_a, **_k: None)
    with (
        pytest.raises(registry_server.RegistryNotInstalled, match=r"tests\.support\.system_deps"),
        registry_server.start_registry(tmp_path),
    ):
        pass
