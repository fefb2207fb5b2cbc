"""noe_web.kube.client against a real HTTPS peer: kubeconfig variants, in-cluster files, token rotation, cache."""

from __future__ import annotations

import base64
import datetime as dt
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from noe_core.errors import InvalidSettings
from noe_web.commands import serve
from noe_web.kube.client import KubeClient
from noe_web.kube.config import discover, in_cluster_config, load_kubeconfig
from noe_web.kube.errors import Forbidden, NotFound, Unavailable
from tests.support.certs import CA, CertPair, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api

TOKEN = "kube-token-0123456789"


def client_pair(ca: CA, directory: Path, cn: str = "system:serviceaccount:noe:noe") -> CertPair:
    """A client certificate (EKU clientAuth) signed by ``ca``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    cert_file, key_file = directory / "client.crt", directory / "client.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return CertPair(cert_file, key_file, ca.ca_file)


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("fake kube CA", tmp_path_factory.mktemp("kube-ca"))


@pytest.fixture
def api(kube_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(kube_ca, tokens=(TOKEN,), client_ca=kube_ca.ca_file) as server:
        server.add_secret(
            "team",
            "pull",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "pull"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64.b64encode(b"{}").decode()},
            },
        )
        yield server


def _client(config_path: Path, **kw: float) -> KubeClient:
    return KubeClient(load_kubeconfig(config_path), timeout=5.0, **kw)


def test_kubeconfig_token_with_embedded_ca(api: FakeKubeAPI, tmp_path: Path) -> None:
    client = _client(api.write_kubeconfig(tmp_path / "kc", token=TOKEN))
    try:
        assert client.get_secret("team", "pull")["metadata"]["name"] == "pull"
    finally:
        client.close()
    assert api.requests_snapshot()[-1].auth == f"token:{TOKEN}"


def test_kubeconfig_token_file_and_ca_file(api: FakeKubeAPI, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    client = _client(api.write_kubeconfig(tmp_path / "kc", token_file=token_file, embed=False))
    try:
        assert client.get_secret("team", "pull")["type"] == "kubernetes.io/dockerconfigjson"
    finally:
        client.close()


@pytest.mark.parametrize("embed", [True, False], ids=["data", "files"])
def test_kubeconfig_client_certificate(api: FakeKubeAPI, kube_ca: CA, tmp_path: Path, embed: bool) -> None:
    pair = client_pair(kube_ca, tmp_path)
    client = _client(api.write_kubeconfig(tmp_path / "kc", client=pair, embed=embed))
    try:
        client.get_secret("team", "pull")
    finally:
        client.close()
    assert api.requests_snapshot()[-1].auth == "cert:system:serviceaccount:noe:noe"


def test_kubeconfig_insecure_skip_tls_verify(api: FakeKubeAPI, tmp_path: Path) -> None:
    client = _client(api.write_kubeconfig(tmp_path / "kc", token=TOKEN, insecure=True))
    try:
        client.get_secret("team", "pull")
    finally:
        client.close()


def test_untrusted_server_is_unavailable_not_trusted(api: FakeKubeAPI, tmp_path: Path) -> None:
    other = make_ca("some other CA", tmp_path / "other")
    path = api.write_kubeconfig(tmp_path / "kc", token=TOKEN)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(other.ca_file.read_bytes()).decode()
    path.write_text(yaml.safe_dump(doc))
    client = _client(path)
    try:
        with pytest.raises(Unavailable):
            client.get_secret("team", "pull")
    finally:
        client.close()
    assert not api.requests_snapshot()


def test_current_context_is_used(api: FakeKubeAPI, tmp_path: Path) -> None:
    path = api.write_kubeconfig(tmp_path / "kc", token=TOKEN)
    assert "context noe" in load_kubeconfig(path).source
    assert load_kubeconfig(path, context="other").token == "wrong"


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.pop("current-context"), "no current-context"),
        (lambda d: d["contexts"][1]["context"].update(cluster="nope"), "no cluster named 'nope'"),
        (lambda d: d["clusters"][0]["cluster"].update(server="ftp://x"), r"no server URL \(https://HOST"),
        (lambda d: d["clusters"][0]["cluster"].update({"certificate-authority-data": "%%%"}), "not valid base64"),
        (lambda d: d["users"][0].update(user={"exec": {"command": "aws"}}), "exec apiVersion None"),
        (lambda d: d["users"][0].update(user={"auth-provider": {"name": "gcp"}}), "auth-provider plugin"),
        (lambda d: d["clusters"][0]["cluster"].update({"insecure-skip-tls-verify": "false"}), "true or false"),
        (lambda d: d["clusters"][0]["cluster"].update({"certificate-authority-data": 5}), "must be a string"),
        (lambda d: d["users"][0]["user"].update(token=["x"]), "token must be a string"),
        (lambda d: d.update(contexts={"noe": {}}), "contexts must be a list"),
    ],
)
def test_bad_kubeconfig_is_one_clear_line(api: FakeKubeAPI, tmp_path: Path, mutate, needle: str) -> None:
    path = api.write_kubeconfig(tmp_path / "kc", token=TOKEN)
    doc = yaml.safe_load(path.read_text())
    mutate(doc)
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidSettings, match=needle) as info:
        load_kubeconfig(path)
    assert "\n" not in str(info.value)


def test_plain_http_server_is_accepted_with_a_warning(
    api: FakeKubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = api.write_kubeconfig(tmp_path / "kc", token=TOKEN)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:8001"
    path.write_text(yaml.safe_dump(doc))
    config = load_kubeconfig(path)
    assert config.server == "http://127.0.0.1:8001"
    assert any("plain HTTP" in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text


def test_certificate_authority_that_is_not_pem_stops_start_up(api: FakeKubeAPI, tmp_path: Path) -> None:
    path = api.write_kubeconfig(tmp_path / "kc", token=TOKEN)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(b"\xffnot a certificate").decode()
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidSettings, match="certificate authority is not a PEM certificate"):
        _client(path)
    with pytest.raises(InvalidSettings, match="certificate authority"):
        serve._api(SimpleNamespace(kubeconfig=path, context=""))  # type: ignore[arg-type]


def test_missing_and_forbidden_secrets(api: FakeKubeAPI, tmp_path: Path) -> None:
    api.state.forbidden.add(("team", "locked"))
    client = _client(api.write_kubeconfig(tmp_path / "kc", token=TOKEN))
    try:
        with pytest.raises(NotFound):
            client.get_secret("team", "absent")
        with pytest.raises(Forbidden):
            client.get_secret("team", "locked")
        # negative answers are cached briefly too
        before = len(api.requests_snapshot())
        with pytest.raises(NotFound):
            client.get_secret("team", "absent")
        assert len(api.requests_snapshot()) == before
    finally:
        client.close()


def test_secret_cache_is_short_and_bounded(api: FakeKubeAPI, tmp_path: Path) -> None:
    client = _client(api.write_kubeconfig(tmp_path / "kc", token=TOKEN), secret_cache_ttl=0.3)
    try:
        client.get_secret("team", "pull")
        client.get_secret("team", "pull")
        assert len(api.requests_snapshot()) == 1
        time.sleep(0.4)
        client.get_secret("team", "pull")
        assert len(api.requests_snapshot()) == 2
    finally:
        client.close()


def test_in_cluster_config_and_token_rotation(api: FakeKubeAPI, kube_ca: CA, tmp_path: Path) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("old-token")
    (sa / "ca.crt").write_bytes(kube_ca.ca_file.read_bytes())
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)}
    config = in_cluster_config(env, sa_dir=sa)
    assert config is not None and config.server == api.url
    api.state.tokens = {"old-token"}
    client = KubeClient(config, secret_cache_ttl=0)
    try:
        client.get_secret("team", "pull")
        # the kubelet rotates the projected token: the API only accepts the new one from now on
        api.state.tokens = {"new-token"}
        new = sa / "token.new"
        new.write_text("new-token")
        os.replace(new, sa / "token")
        client.get_secret("team", "pull")
        assert [r.auth for r in api.requests_snapshot()] == ["token:old-token", "token:new-token"]
    finally:
        client.close()


def test_token_reread_after_401_even_when_stat_looks_unchanged(api: FakeKubeAPI, kube_ca: CA, tmp_path: Path) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    token = sa / "token"
    token.write_text("aaaa-token")
    (sa / "ca.crt").write_bytes(kube_ca.ca_file.read_bytes())
    stamp = token.stat()
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)}
    config = in_cluster_config(env, sa_dir=sa)
    assert config is not None
    api.state.tokens = {"aaaa-token", "bbbb-token"}
    client = KubeClient(config, secret_cache_ttl=0)
    try:
        client.get_secret("team", "pull")
        api.state.tokens = {"bbbb-token"}
        token.write_text("bbbb-token")  # same size, same inode; restore the mtime
        os.utime(token, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        client.get_secret("team", "pull")
        assert [r.auth for r in api.requests_snapshot()][-2:] == ["token:aaaa-token", "token:bbbb-token"]
    finally:
        client.close()


def test_not_in_cluster_means_no_api(tmp_path: Path) -> None:
    assert in_cluster_config({}, sa_dir=tmp_path) is None
    assert discover(None, {}) is None or Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()


def test_create_event_and_timeout(api: FakeKubeAPI, tmp_path: Path) -> None:
    client = _client(api.write_kubeconfig(tmp_path / "kc", token=TOKEN))
    try:
        client.create_event("team", {"metadata": {"name": "x.1", "namespace": "team"}, "reason": "R"})
        assert api.events_snapshot()[0]["reason"] == "R"
        api.state.delay = 1.0
        started = time.monotonic()
        with pytest.raises(Unavailable):
            client.get_secret("team", "pull", timeout=0.2)
        assert time.monotonic() - started < 0.9
    finally:
        api.state.delay = 0
        client.close()


def test_concurrent_reads_of_one_secret_share_one_get(api: FakeKubeAPI, tmp_path: Path) -> None:
    client = _client(api.write_kubeconfig(tmp_path / "kc", token=TOKEN), secret_cache_ttl=30)
    api.state.delay = 0.3
    results: list[object] = []
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()
        results.append(client.get_secret("team", "pull", timeout=5)["metadata"]["name"])

    try:
        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == ["pull"] * 8
        assert len(api.requests_snapshot()) == 1
    finally:
        client.close()
