"""``noe certs`` against a local HTTPS server speaking the Kubernetes API paths it uses."""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from noe_web.commands.certs import CertBundle, add_certs_parser, dns_names, issue, run_certs, still_valid
from tests.support.fake_kube_certs_api import FakeKubeApi, fake_kube_api

NS, SVC, SECRET, MWC = "noe", "noe", "noe-tls", "noe"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeKubeApi]:
    with fake_kube_api(tmp_path) as server:
        yield server


def _run(api: FakeKubeApi, tmp_path: Path, *extra: str) -> int:
    parser = argparse.ArgumentParser(prog="noe")
    add_certs_parser(parser.add_subparsers(dest="command"))
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    ns = parser.parse_args(
        [
            "certs",
            f"--namespace={NS}",
            f"--service={SVC}",
            f"--secret={SECRET}",
            f"--webhook-config={MWC}",
            f"--kubeconfig={kubeconfig}",
            *extra,
        ]
    )
    return run_certs(ns)


def _writes(api: FakeKubeApi) -> list[tuple[str, str, str]]:
    return [r for r in api.requests if r[0] != "GET"]


def _handshake(cert: bytes, key: bytes, ca_bundle: bytes, tmp_path: Path, hostname: str) -> str:
    """Serve *cert* on 127.0.0.1 and connect as the API server would: trust only *ca_bundle*, check *hostname*."""
    (tmp_path / "s.crt").write_bytes(cert)
    (tmp_path / "s.key").write_bytes(key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "s.crt", tmp_path / "s.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cadata=ca_bundle.decode())
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_ctx.wrap_socket(raw, server_hostname=hostname) as tls,
        ):
            version = tls.version() or ""
            tls.sendall(b"x")
    finally:
        thread.join(5)
        listener.close()
    return version


def test_first_run_creates_secret_and_patches_every_webhook(api: FakeKubeApi, tmp_path: Path) -> None:
    api.add_webhook_config(MWC, webhooks=2)
    assert _run(api, tmp_path) == 0
    data = api.secret_data(NS, SECRET)
    assert set(data) == {"tls.crt", "tls.key", "ca.crt"}
    assert api.secrets[(NS, SECRET)]["type"] == "kubernetes.io/tls"
    hooks = api.webhook_configs[MWC]["webhooks"]
    assert [base64.b64decode(h["clientConfig"]["caBundle"]) for h in hooks] == [data["ca.crt"]] * 2
    assert (
        "PATCH",
        f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC}",
        "application/json-patch+json",
    ) in api.requests
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {
        "noe",
        "noe.noe",
        "noe.noe.svc",
        "noe.noe.svc.cluster.local",
    }
    left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=364) < left <= dt.timedelta(days=365)
    # What the API server does: trust caBundle only, reach the Service by its DNS name.
    for host in ("noe.noe.svc", "noe.noe.svc.cluster.local"):
        assert _handshake(data["tls.crt"], data["tls.key"], data["ca.crt"], tmp_path, host).startswith("TLS")


def test_second_run_keeps_a_valid_certificate_and_writes_nothing(
    api: FakeKubeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add_webhook_config(MWC)
    assert _run(api, tmp_path) == 0
    before = api.secret_data(NS, SECRET)
    api.requests.clear()
    assert _run(api, tmp_path) == 0
    assert _writes(api) == []
    assert api.secret_data(NS, SECRET) == before
    assert "kept" in capsys.readouterr().err


def test_missing_webhook_configuration_is_patched_by_a_later_run(
    api: FakeKubeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Helm pre-install hook runs before the webhook configuration exists.
    assert _run(api, tmp_path) == 0
    assert "not found yet" in capsys.readouterr().err
    first = api.secret_data(NS, SECRET)
    api.add_webhook_config(MWC)
    api.requests.clear()
    assert _run(api, tmp_path) == 0
    assert [r[0] for r in _writes(api)] == ["PATCH"]
    assert api.secret_data(NS, SECRET) == first
    bundle = api.webhook_configs[MWC]["webhooks"][0]["clientConfig"]["caBundle"]
    assert base64.b64decode(bundle) == first["ca.crt"]


def _put_bundle(api: FakeKubeApi, bundle: CertBundle) -> None:
    api.secrets[(NS, SECRET)] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": SECRET,
            "namespace": NS,
            "resourceVersion": api.next_version(),
            "annotations": {"keep": "me"},
        },
        "data": bundle.secret_data(),
    }


def test_certificate_within_the_renewal_window_is_renewed_with_overlapping_trust(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    api.add_webhook_config(MWC)
    old = issue(dns_names(SVC, NS), validity_days=20)
    _put_bundle(api, old)
    assert _run(api, tmp_path) == 0
    new = api.secret_data(NS, SECRET)
    assert new["tls.crt"] != old.tls_crt
    cas = x509.load_pem_x509_certificates(new["ca.crt"])
    old_ca = x509.load_pem_x509_certificate(old.ca_crt)
    # New CA first, the replaced CA still trusted until pods pick up the new files.
    assert len(cas) == 2 and cas[1] == old_ca
    assert _handshake(old.tls_crt, old.tls_key, new["ca.crt"], tmp_path, "noe.noe.svc")
    assert _handshake(new["tls.crt"], new["tls.key"], new["ca.crt"], tmp_path, "noe.noe.svc")
    assert api.secrets[(NS, SECRET)]["metadata"]["annotations"] == {"keep": "me"}
    assert base64.b64decode(api.webhook_configs[MWC]["webhooks"][0]["clientConfig"]["caBundle"]) == new["ca.crt"]


def test_a_second_renewal_drops_the_oldest_ca(api: FakeKubeApi, tmp_path: Path) -> None:
    first = issue(dns_names(SVC, NS), validity_days=20)
    second = issue(dns_names(SVC, NS), validity_days=20, previous_ca=first.ca_crt)
    assert len(x509.load_pem_x509_certificates(second.ca_crt)) == 2
    _put_bundle(api, second)
    assert _run(api, tmp_path) == 0
    cas = x509.load_pem_x509_certificates(api.secret_data(NS, SECRET)["ca.crt"])
    assert len(cas) == 2
    assert cas[1] == x509.load_pem_x509_certificates(second.ca_crt)[0]


def test_certificate_for_other_names_is_replaced(api: FakeKubeApi, tmp_path: Path) -> None:
    _put_bundle(api, issue(dns_names("other", NS)))
    assert _run(api, tmp_path) == 0
    cert = x509.load_pem_x509_certificate(api.secret_data(NS, SECRET)["tls.crt"])
    assert "noe.noe.svc" in cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName)


def test_force_issues_even_when_valid(api: FakeKubeApi, tmp_path: Path) -> None:
    assert _run(api, tmp_path) == 0
    before = api.secret_data(NS, SECRET)
    assert _run(api, tmp_path, "--force") == 0
    assert api.secret_data(NS, SECRET)["tls.crt"] != before["tls.crt"]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: CertBundle(b.tls_crt, issue(["x.y.svc"]).tls_key, b.ca_crt), "does not match"),
        (lambda b: CertBundle(b.tls_crt, b.tls_key, issue(["x.y.svc"]).ca_crt), "not signed"),
        (lambda b: CertBundle(b"", b.tls_key, b.ca_crt), "PEM"),
        (lambda b: CertBundle(b.tls_crt, b"garbage", b.ca_crt), "private key"),
    ],
)
def test_still_valid_rejects_broken_bundles(mutate: object, reason: str) -> None:
    good = issue(dns_names(SVC, NS))
    assert still_valid(good, dns_names(SVC, NS), renew_before=dt.timedelta(days=30)) is None
    broken = mutate(good)  # type: ignore[operator]
    assert reason in (still_valid(broken, dns_names(SVC, NS), renew_before=dt.timedelta(days=30)) or "")


def test_ca_expiring_soon_is_renewed() -> None:
    bundle = issue(dns_names(SVC, NS), validity_days=365, ca_validity_days=10)
    why = still_valid(bundle, dns_names(SVC, NS), renew_before=dt.timedelta(days=30))
    assert why is not None and "expires" in why


def test_forbidden_is_an_api_failure(api: FakeKubeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api.forbid.add(("POST", f"/api/v1/namespaces/{NS}/secrets"))
    assert _run(api, tmp_path) == 1
    assert "403" in capsys.readouterr().err


def test_bad_settings_exit_2(api: FakeKubeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(api, tmp_path, "--validity-days=20") == 2
    assert "--renew-before-days" in capsys.readouterr().err
    assert api.requests == []
