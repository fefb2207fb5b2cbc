"""A throw-away certificate authority for tests, made with ``cryptography``.

``make_ca("noe test CA", directory)`` writes ``ca.crt``/``ca.key`` under *directory*;
``ca.issue(["127.0.0.1", "localhost"])`` writes a serving certificate whose
subjectAltName carries every host (IP addresses as IP entries, names as DNS
entries) and returns a :class:`CertPair` naming the three PEM files.

``CA.trust_dir`` holds only ``ca.crt``: the layout ``skopeo --cert-dir`` and
Docker's ``certs.d`` expect (a ``.key`` file there would be read as a client key).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from noe_web.server import tls

__all__ = ["CA", "CertPair", "make_ca"]


@dataclass(frozen=True)
class CertPair:
    """PEM files of one serving certificate, its key, and the CA that signed it."""

    cert_file: Path
    key_file: Path
    ca_file: Path


@dataclass(frozen=True)
class CA:
    """A self-signed CA whose files live under ``directory`` (made by the webhook's own ``noe_web.server.tls``)."""

    directory: Path
    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def trust_dir(self) -> Path:
        """A directory holding only ``ca.crt`` (for ``skopeo --cert-dir``)."""
        return self.directory / "trust"

    def issue(
        self,
        hosts: list[str] | tuple[str, ...] = ("127.0.0.1", "localhost"),
        *,
        name: str | None = None,
        days: int = 2,
        not_before: dt.datetime | None = None,
    ) -> CertPair:
        """Sign a serving certificate for *hosts*; files are ``<name>.crt`` and ``<name>.key``."""
        if not hosts:
            raise ValueError("a serving certificate needs at least one host")
        stem = name or re.sub(r"[^A-Za-z0-9.-]+", "_", hosts[0])
        # noe_web.server.tls starts validity five minutes before "now"
        now = not_before + dt.timedelta(minutes=5) if not_before is not None else None
        cert_pem, key_pem = tls.issue_serving_cert(self.cert_pem, self.key_pem, list(hosts), days, now=now)
        cert_file = self.directory / f"{stem}.crt"
        key_file = self.directory / f"{stem}.key"
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)
        key_file.chmod(0o600)
        return CertPair(cert_file=cert_file, key_file=key_file, ca_file=self.ca_file)


def make_ca(common_name: str, directory: Path, *, days: int = 2) -> CA:
    """Create a CA under *directory* (created if needed): ``ca.crt``, ``ca.key``, ``trust/ca.crt``."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_pem, key_pem = tls.make_ca(common_name, days)
    ca = CA(directory=directory, cert_pem=cert_pem, key_pem=key_pem)
    ca.ca_file.write_bytes(cert_pem)
    (directory / "ca.key").write_bytes(key_pem)
    (directory / "ca.key").chmod(0o600)
    ca.trust_dir.mkdir(exist_ok=True)
    (ca.trust_dir / "ca.crt").write_bytes(cert_pem)
    return ca
