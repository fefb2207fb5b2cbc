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
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "CertPair", "make_ca"]


@dataclass(frozen=True)
class CertPair:
    """PEM files of one serving certificate, its key, and the CA that signed it."""

    cert_file: Path
    key_file: Path
    ca_file: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


@dataclass(frozen=True)
class CA:
    """A self-signed CA whose files live under ``directory``."""

    directory: Path
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

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
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or (_now() - dt.timedelta(minutes=5))
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=True,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_file = self.directory / f"{stem}.crt"
        key_file = self.directory / f"{stem}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(_key_pem(key))
        key_file.chmod(0o600)
        return CertPair(cert_file=cert_file, key_file=key_file, ca_file=self.ca_file)


def make_ca(common_name: str, directory: Path, *, days: int = 2) -> CA:
    """Create a CA under *directory* (created if needed): ``ca.crt``, ``ca.key``, ``trust/ca.crt``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = _now() - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    ca = CA(directory=directory, cert=cert, key=key)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    ca.ca_file.write_bytes(pem)
    (directory / "ca.key").write_bytes(_key_pem(key))
    (directory / "ca.key").chmod(0o600)
    ca.trust_dir.mkdir(exist_ok=True)
    (ca.trust_dir / "ca.crt").write_bytes(pem)
    return ca
