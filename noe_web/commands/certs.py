"""``noe certs``: the webhook's TLS without cert-manager.

Creates a CA and a serving certificate for the webhook Service's DNS names
(``svc``, ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.<cluster domain>``), stores
them in a ``kubernetes.io/tls`` Secret (``tls.crt``, ``tls.key``, ``ca.crt``)
and sets ``caBundle`` on every webhook of the MutatingWebhookConfiguration.

Idempotent: a Secret whose certificate is signed by its CA, names every DNS
name, matches its key and has more than ``--renew-before-days`` left (its CA
too) is kept, and only a stale ``caBundle`` is patched. Otherwise a new CA and
certificate are made; the CA key is never stored, so each renewal makes a new
CA, and the previous CA stays in ``ca.crt``/``caBundle`` until the next one so
that the API server keeps trusting the pods that still serve the old
certificate until the kubelet refreshes the mounted Secret.

Kubernetes API calls (through :mod:`noe_web.kube.client`'s client, kubeconfig or
in-cluster): GET/POST/PUT ``secrets`` in its own namespace, GET/PATCH
``mutatingwebhookconfigurations``. A webhook configuration that does not exist
yet (a Helm pre-install hook) is reported and skipped: the next run patches it.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization

from noe_core.cli.parser import add_flags, require
from noe_core.errors import InvalidSettings
from noe_web.commands.flags import CERTS_FLAGS
from noe_web.flags import KUBECONFIG
from noe_web.kube.client import KubeClient
from noe_web.kube.config import ApiConfig, discover
from noe_web.kube.errors import KubeError, NotFound, Unavailable
from noe_web.kube.namespace import own_namespace
from noe_web.server.tls import issue_serving_cert, make_ca

__all__ = [
    "CertBundle",
    "CertsApi",
    "Outcome",
    "add_certs_parser",
    "dns_names",
    "ensure_certificates",
    "issue",
    "run_certs",
    "still_valid",
]

log = logging.getLogger("noe.certs")

WEBHOOK_CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
_CONFLICT_RETRIES = 3


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """Every name the API server may use to reach the Service; the first is what it uses."""
    names = [f"{service}.{namespace}.svc", service, f"{service}.{namespace}"]
    if cluster_domain:
        names.append(f"{service}.{namespace}.svc.{cluster_domain.strip('.')}")
    return names


@dataclass(frozen=True)
class CertBundle:
    """PEM contents of the Secret: the serving certificate, its key and the trusted CA bundle."""

    tls_crt: bytes
    tls_key: bytes
    ca_crt: bytes

    def secret_data(self) -> dict[str, str]:
        return {
            "tls.crt": base64.b64encode(self.tls_crt).decode(),
            "tls.key": base64.b64encode(self.tls_key).decode(),
            "ca.crt": base64.b64encode(self.ca_crt).decode(),
        }

    @classmethod
    def from_secret(cls, secret: dict[str, Any]) -> CertBundle | None:
        data = secret.get("data") or {}
        try:
            return cls(
                tls_crt=base64.b64decode(data["tls.crt"], validate=True),
                tls_key=base64.b64decode(data["tls.key"], validate=True),
                ca_crt=base64.b64decode(data["ca.crt"], validate=True),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def issue(
    names: Sequence[str],
    *,
    validity_days: int = 365,
    ca_validity_days: int = 3650,
    previous_ca: bytes = b"",
    now: dt.datetime | None = None,
) -> CertBundle:
    """A new CA and a serving certificate for *names* signed by it.

    *previous_ca* (PEM) is appended to the new ``ca.crt`` for the certificates
    in it that are still valid, so trust overlaps while pods switch over.
    """
    if not names:
        raise InvalidSettings("noe certs: no DNS name to certify")
    ca_pem, ca_key_pem = make_ca(f"noe webhook CA for {names[0]}", ca_validity_days, now=now)
    cert_pem, key_pem = issue_serving_cert(ca_pem, ca_key_pem, names, validity_days, now=now)
    ca = x509.load_pem_x509_certificate(ca_pem)
    bundle = _pem(ca)
    moment = now or _now()
    for old in _load_pems(previous_ca)[:1]:  # only the CA just replaced, never a growing chain
        if old.not_valid_after_utc > moment and old.fingerprint(hashes.SHA256()) != ca.fingerprint(hashes.SHA256()):
            bundle += _pem(old)
    return CertBundle(tls_crt=cert_pem, tls_key=key_pem, ca_crt=bundle)


def _load_pems(data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data) if data.strip() else []
    except ValueError:
        return []


def still_valid(
    bundle: CertBundle, names: Sequence[str], *, renew_before: dt.timedelta, now: dt.datetime | None = None
) -> str | None:
    """``None`` when *bundle* can be kept, else why it must be replaced."""
    moment = now or _now()
    certs = _load_pems(bundle.tls_crt)
    cas = _load_pems(bundle.ca_crt)
    if not certs or not cas:
        return "the Secret does not hold PEM certificates"
    cert, ca = certs[0], cas[0]
    try:
        key = serialization.load_pem_private_key(bundle.tls_key, password=None)
    except (ValueError, TypeError):
        return "tls.key is not a readable unencrypted private key"
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        return "tls.key does not match tls.crt"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "tls.crt is not signed by the first certificate of ca.crt"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        present = set(san.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        present = set()
    missing = [n for n in names if n not in present]
    if missing:
        return f"the certificate does not name {', '.join(missing)}"
    if cert.not_valid_before_utc > moment:
        return "the certificate is not valid yet"
    for what, item in (("the certificate", cert), ("the CA", ca)):
        left = item.not_valid_after_utc - moment
        if left <= renew_before:
            days = max(0, left.days)
            return f"{what} expires in {days} day(s), within the renewal window"
    return None


class CertsApi(KubeClient):
    """The webhook's Kubernetes client plus the calls ``noe certs`` needs."""

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(name, safe='')}"
        try:
            found = self._request("GET", path)
        except NotFound:
            return None
        return found if isinstance(found, dict) else None

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self._request("POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets", json_body=body)

    def update_secret(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(name, safe='')}"
        self._request("PUT", path, json_body=body)

    def webhook_config(self, name: str) -> dict[str, Any] | None:
        try:
            found = self._request("GET", f"{WEBHOOK_CONFIGS}/{quote(name, safe='')}")
        except NotFound:
            return None
        return found if isinstance(found, dict) else None

    def patch_webhook_config(self, name: str, operations: list[dict[str, Any]]) -> None:
        self._request(
            "PATCH",
            f"{WEBHOOK_CONFIGS}/{quote(name, safe='')}",
            json_body=operations,
            content_type="application/json-patch+json",
        )


@dataclass(frozen=True)
class Outcome:
    """What one run did."""

    issued: bool
    reason: str
    secret_written: bool
    webhooks_patched: int
    webhook_config_found: bool
    not_after: dt.datetime


def _secret_body(name: str, namespace: str, bundle: CertBundle, previous: dict[str, Any] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "noe-certs"},
    }
    if previous is not None:
        old_meta = previous.get("metadata") or {}
        metadata["labels"] = {**(old_meta.get("labels") or {}), **metadata["labels"]}
        if old_meta.get("annotations"):
            metadata["annotations"] = old_meta["annotations"]
        if old_meta.get("resourceVersion"):
            metadata["resourceVersion"] = old_meta["resourceVersion"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "kubernetes.io/tls",
        "data": bundle.secret_data(),
    }


def _store(
    api: CertsApi,
    namespace: str,
    secret_name: str,
    names: Sequence[str],
    *,
    validity_days: int,
    ca_validity_days: int,
    renew_before: dt.timedelta,
    force: bool,
) -> tuple[CertBundle, bool, str]:
    """Keep or replace the Secret; returns the bundle in force, whether it is new, and why."""
    for _ in range(_CONFLICT_RETRIES):
        current = api.secret(namespace, secret_name)
        existing = CertBundle.from_secret(current) if current else None
        if existing is not None:
            reason = "--force" if force else still_valid(existing, names, renew_before=renew_before)
        else:
            reason = "no Secret yet" if current is None else "the Secret lacks tls.crt, tls.key or ca.crt"
        if existing is not None and reason is None:
            return existing, False, "kept: valid beyond the renewal window"
        bundle = issue(
            names,
            validity_days=validity_days,
            ca_validity_days=ca_validity_days,
            previous_ca=existing.ca_crt if existing else b"",
        )
        body = _secret_body(secret_name, namespace, bundle, current)
        try:
            if current is None:
                api.create_secret(namespace, body)
            else:
                api.update_secret(namespace, secret_name, body)
        except KubeError as exc:
            if exc.status == 409:  # someone else wrote it meanwhile (a parallel run): read again
                continue
            raise
        return bundle, True, f"issued: {reason}"
    raise Unavailable(f"Secret {namespace}/{secret_name}: conflicting writes, try again", status=409)


def _patch_ca_bundle(api: CertsApi, name: str, ca_bundle: bytes) -> tuple[bool, int]:
    """Set caBundle on every webhook of *name*; returns (found, webhooks changed)."""
    wanted = base64.b64encode(ca_bundle).decode()
    for _ in range(_CONFLICT_RETRIES):
        config = api.webhook_config(name)
        if config is None:
            return False, 0
        ops: list[dict[str, Any]] = []
        version = (config.get("metadata") or {}).get("resourceVersion")
        if version:
            ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": version})
        changed = 0
        for index, hook in enumerate(config.get("webhooks") or []):
            client = hook.get("clientConfig")
            if not isinstance(client, dict):
                ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig", "value": {"caBundle": wanted}})
                changed += 1
            elif client.get("caBundle") != wanted:
                op = "replace" if "caBundle" in client else "add"
                ops.append({"op": op, "path": f"/webhooks/{index}/clientConfig/caBundle", "value": wanted})
                changed += 1
        if not changed:
            return True, 0
        try:
            api.patch_webhook_config(name, ops)
        except KubeError as exc:
            if exc.status in (409, 422):  # changed between GET and PATCH: the test op failed
                continue
            raise
        return True, changed
    raise Unavailable(f"MutatingWebhookConfiguration {name}: conflicting writes, try again", status=409)


def ensure_certificates(
    api: CertsApi,
    *,
    namespace: str,
    service: str,
    secret: str,
    webhook_config: str = "",
    cluster_domain: str = "cluster.local",
    validity_days: int = 365,
    ca_validity_days: int = 3650,
    renew_before_days: int = 30,
    force: bool = False,
) -> Outcome:
    """Make the Secret hold a valid certificate and the webhook configuration trust its CA."""
    if validity_days <= renew_before_days:
        raise InvalidSettings(
            f"--validity-days {validity_days} must exceed --renew-before-days {renew_before_days}, "
            "or every run would renew"
        )
    names = dns_names(service, namespace, cluster_domain)
    bundle, issued, reason = _store(
        api,
        namespace,
        secret,
        names,
        validity_days=validity_days,
        ca_validity_days=ca_validity_days,
        renew_before=dt.timedelta(days=renew_before_days),
        force=force,
    )
    found, patched = (False, 0)
    if webhook_config:
        found, patched = _patch_ca_bundle(api, webhook_config, bundle.ca_crt)
    not_after = _load_pems(bundle.tls_crt)[0].not_valid_after_utc
    return Outcome(
        issued=issued,
        reason=reason,
        secret_written=issued,
        webhooks_patched=patched,
        webhook_config_found=found,
        not_after=not_after,
    )


def add_certs_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``noe certs``."""
    parser = subparsers.add_parser(
        "certs",
        help="create or renew the webhook's TLS Secret and patch the webhook configuration's caBundle",
        description=(
            "Create a CA and a serving certificate for the webhook Service, store them in a "
            "kubernetes.io/tls Secret and set caBundle on the MutatingWebhookConfiguration. "
            "Keeps a certificate that is still valid beyond --renew-before-days."
        ),
    )
    add_flags(parser, CERTS_FLAGS)
    parser.set_defaults(run=run_certs)


def run_certs(
    ns: argparse.Namespace,
    *,
    client_factory: Callable[[ApiConfig], CertsApi] = CertsApi,
) -> int:
    """Entry point of ``noe certs``: 0 done, 1 API failure, 2 bad settings."""
    say: Callable[[str], None] = lambda text: print(f"noe certs: {text}", file=sys.stderr)  # noqa: E731
    namespace = ns.namespace or own_namespace(default="")
    if not namespace:
        say("no namespace: give --namespace (or run in a pod)")
        return 2
    try:
        config = discover(require(ns, KUBECONFIG), context=ns.context or None)
        if config is None:
            say("no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or run in a pod with a service account")
            return 2
        api = client_factory(config)
        try:
            outcome = ensure_certificates(
                api,
                namespace=namespace,
                service=ns.service,
                secret=ns.secret,
                webhook_config=ns.webhook_config,
                cluster_domain=ns.cluster_domain,
                validity_days=ns.validity_days,
                ca_validity_days=ns.ca_validity_days,
                renew_before_days=ns.renew_before_days,
                force=ns.force,
            )
        finally:
            api.close()
    except InvalidSettings as exc:
        say(str(exc))
        return 2
    except KubeError as exc:
        say(f"Kubernetes API: {exc}")
        return 1
    say(f"Secret {namespace}/{ns.secret}: {outcome.reason}; valid until {outcome.not_after:%Y-%m-%d}")
    if ns.webhook_config:
        if not outcome.webhook_config_found:
            say(f"MutatingWebhookConfiguration {ns.webhook_config} not found yet; a later run sets its caBundle")
        else:
            say(
                f"MutatingWebhookConfiguration {ns.webhook_config}: caBundle set on "
                f"{outcome.webhooks_patched} webhook(s)"
                if outcome.webhooks_patched
                else f"MutatingWebhookConfiguration {ns.webhook_config}: caBundle already current"
            )
    return 0
