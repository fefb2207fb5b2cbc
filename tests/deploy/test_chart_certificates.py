"""Where the webhook's serving certificate comes from: the chart's own CA, your cert-manager issuer, or your Secret.

Every combination of ``certManager.enabled``, ``certManager.issuerRef`` and
``tls.existingSecret`` renders (real helm), lints strictly and validates against the
Kubernetes schemas; the objects each mode needs are there and no other. With your own
Secret, the ``caBundle`` the chart writes is what an API server trusts: a real ``noe serve``
on that Secret's files answers a client that trusts nothing else.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import requests

from noe_core.testing import admission_review, pod
from tests.support.certs import make_ca
from tests.support.chart import (
    CHART,
    KUBE_VERSIONS,
    NAMESPACE,
    find,
    flag_values,
    one,
    refused,
    render_chart,
    validate,
)
from tests.support.helm import run_helm
from tests.support.noe_serve import post_review, start_noe, uid

pytestmark = pytest.mark.deploy

PEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n"
BUNDLE = base64.b64encode(PEM.encode()).decode()
CLUSTER_ISSUER = {"name": "vault-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"}
EXTERNAL_ISSUER = {"name": "corp-ca", "kind": "AWSPCAIssuer", "group": "awspca.cert-manager.io"}
OWN_SECRET = {"existingSecret": "corp-noe-tls", "caBundle": BUNDLE}


def values_of(cert_manager: bool, issuer: dict[str, str] | None, secret: bool) -> dict[str, Any]:
    values: dict[str, Any] = {"certManager": {"enabled": cert_manager}}
    if issuer:
        values["certManager"]["issuerRef"] = issuer
    if secret:
        values["tls"] = OWN_SECRET
    return values


COMBINATIONS = {
    f"certManager={cm},issuerRef={issuer['kind'] if issuer else '-'},existingSecret={secret}": values_of(
        cm, issuer, secret
    )
    for cm, issuer, secret in itertools.product((True, False), (None, CLUSTER_ISSUER, EXTERNAL_ISSUER), (False, True))
}


def mode_objects(docs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The certificate machinery rendered, by kind."""
    kinds = ("Issuer", "Certificate", "Job", "CronJob")
    found = {kind: sorted(d["metadata"]["name"] for d in find(docs, kind)) for kind in kinds}
    found["certs RBAC"] = sorted(
        f"{d['kind']}/{d['metadata']['name']}"
        for d in docs
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "certificates" and d["kind"] not in kinds
    )
    return {kind: names for kind, names in found.items() if names}


def tls_volume_secret(docs: list[dict[str, Any]]) -> str:
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    return str(next(v["secret"]["secretName"] for v in spec["volumes"] if v["name"] == "tls"))


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_every_combination_renders_valid_manifests(name: str, tmp_path: Path) -> None:
    values = COMBINATIONS[name]
    docs = render_chart(values)
    for version in (KUBE_VERSIONS[0], KUBE_VERSIONS[-1]):
        for doc in docs:
            validate(doc, version)
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values))
    assert "0 chart(s) failed" in run_helm(["lint", "--strict", str(CHART), "-n", NAMESPACE, "-f", str(path)]).stdout
    objects = mode_objects(docs)
    mwc = one(docs, "MutatingWebhookConfiguration")
    injected = (mwc["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
    bundles = {hook["clientConfig"].get("caBundle") for hook in mwc["webhooks"]}
    if values.get("tls"):  # your Secret wins over everything
        assert objects == {}
        assert bundles == {BUNDLE} and injected is None
        assert tls_volume_secret(docs) == "corp-noe-tls"
    elif values["certManager"]["enabled"]:
        serving = one(docs, "Certificate", "noe-serving")
        assert injected == f"{NAMESPACE}/noe-serving" and bundles == {None}
        assert serving["spec"]["secretName"] == tls_volume_secret(docs) == "noe-tls"
        issuer = values["certManager"].get("issuerRef")
        if issuer:
            assert objects == {"Certificate": ["noe-serving"]}
            assert serving["spec"]["issuerRef"] == issuer
        else:
            assert objects == {"Issuer": ["noe-ca", "noe-selfsigned"], "Certificate": ["noe-ca", "noe-serving"]}
    else:
        assert set(objects) == {"Job", "CronJob", "certs RBAC"} and bundles == {None} and injected is None


def test_an_issuer_of_the_release_namespace_is_the_default_kind() -> None:
    docs = render_chart({"certManager": {"issuerRef": {"name": "team-ca"}}})
    ref = one(docs, "Certificate")["spec"]["issuerRef"]
    assert ref == {"name": "team-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert not find(docs, "Issuer")


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        ({"existingSecret": "mine"}, "tls.caBundle: set it to the base64 PEM of the CA"),
        ({"caBundle": BUNDLE}, "tls.existingSecret: name the kubernetes.io/tls Secret"),
        (
            {"existingSecret": "mine", "caBundle": base64.b64encode(b"not a pem").decode()},
            "tls.caBundle: not the base64 of a PEM certificate",
        ),
        ({"existingSecret": "mine", "caBundle": "%%%"}, "caBundle"),
    ],
)
def test_half_an_own_certificate_is_refused(tls: dict[str, str], message: str) -> None:
    assert message in refused({"tls": tls})


def test_the_written_ca_bundle_is_what_a_client_trusts_to_reach_noe(tmp_path: Path) -> None:
    """Your CA and Secret (as cert-manager, Vault or a script would make them): the chart writes the
    bundle, the pod mounts the Secret at --cert-dir, and a client trusting only the bundle is answered."""
    ca = make_ca("corp CA", tmp_path / "corp-ca")
    service = f"noe.{NAMESPACE}.svc"
    pair = ca.issue([service, "127.0.0.1"])
    bundle = base64.b64encode(ca.ca_file.read_bytes()).decode()
    docs = render_chart({"tls": {"existingSecret": "corp-noe-tls", "caBundle": bundle}})
    [hook] = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == bundle  # verbatim
    trusted = tmp_path / "trusted.pem"
    trusted.write_bytes(base64.b64decode(hook["clientConfig"]["caBundle"]))
    # The Secret's keys, where the Deployment mounts it and --cert-dir points.
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")["mountPath"]
    assert flag_values(container["args"], "--cert-dir") == [mount]
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    shutil.copy(pair.cert_file, secret_dir / "tls.crt")
    shutil.copy(pair.key_file, secret_dir / "tls.key")
    noe = start_noe(tmp_path, [f"--cert-dir={secret_dir}", f"--state-dir={tmp_path / 'state'}", "--workers=1"], trusted)
    try:
        with noe.session() as http:
            assert http.verify == str(trusted)
            response = post_review(http, noe, admission_review(pod(["static.example/app:1"]), uid=uid()))
            assert response["allowed"] is True
        stranger = make_ca("another CA", tmp_path / "other-ca")
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(noe.url + "/livez", verify=str(stranger.ca_file), timeout=5)
    finally:
        noe.stop()
