"""TLS for the webhook: a self-signed default and a context that follows file renewals.

Two concerns:

* :func:`ensure_self_signed` makes (or reuses) a private CA and a serving
  certificate for ``localhost``/``127.0.0.1`` in a state directory, so that
  ``noe serve`` with no certificate flags answers over TLS at once and prints
  the CA to trust.
* :class:`ReloadingContext` hands out one cached :class:`ssl.SSLContext` and
  builds a new one when the certificate or key file changes on disk
  (cert-manager replacing the mounted Secret). Handshakes already done keep
  their context, so requests in flight are never dropped; a half-written pair
  during a renewal keeps the previous context until the pair loads again.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from noe_core.errors import InvalidSettings
from noe_core.util.watched_file import WatchedFiles

log = logging.getLogger("noe.tls")

DEFAULT_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1")
CA_FILE = "ca.crt"
CA_KEY_FILE = "ca.key"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
# A certificate closer than this to its end is replaced rather than reused.
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class ServingFiles:
    """Paths of a serving certificate, its key and (when we made it) the CA that signed it."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    created: bool = False


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def make_ca(
    common_name: str = "noe webhook local CA", days: int = 3650, *, now: dt.datetime | None = None
) -> tuple[bytes, bytes]:
    """A new CA: (certificate PEM, private key PEM). ``noe serve``'s default and ``noe certs`` both use it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = (now or _now()) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving_cert(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    hosts: Sequence[str],
    days: int = 365,
    *,
    now: dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """A serving certificate for ``hosts`` (DNS names or IP addresses) signed by the CA: (cert PEM, key PEM).

    It never outlives its CA.
    """
    if not hosts:
        raise InvalidSettings("a serving certificate needs at least one host name or address")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise InvalidSettings("the CA key is not an EC key made by noe")
    key = ec.generate_private_key(ec.SECP256R1())
    start = (now or _now()) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(min(start + dt.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600 (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _reusable(state: Path, hosts: Sequence[str]) -> bool:
    """True when the state directory holds a CA and a serving pair we can keep using."""
    try:
        ca = x509.load_pem_x509_certificate((state / CA_FILE).read_bytes())
        cert = x509.load_pem_x509_certificate((state / CERT_FILE).read_bytes())
        key = serialization.load_pem_private_key((state / KEY_FILE).read_bytes(), password=None)
    except (OSError, ValueError):
        return False
    if cert.not_valid_after_utc - RENEW_BEFORE < _now() or cert.not_valid_before_utc > _now():
        return False
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(_san(hosts)) <= set(san)


def ensure_self_signed(state_dir: Path, hosts: Sequence[str] = DEFAULT_HOSTS) -> ServingFiles:
    """The CA and serving pair in ``state_dir``: reused when still valid, made otherwise.

    The CA key stays in the state directory (mode 0600) so that a renewed
    serving certificate keeps the CA that users already trust.
    """
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise InvalidSettings(f"--state-dir {state_dir}: cannot create it ({exc.strerror})") from exc
    files = ServingFiles(state_dir / CERT_FILE, state_dir / KEY_FILE, state_dir / CA_FILE)
    if _reusable(state_dir, hosts):
        return files
    try:
        ca_cert, ca_key = (state_dir / CA_FILE).read_bytes(), (state_dir / CA_KEY_FILE).read_bytes()
        x509.load_pem_x509_certificate(ca_cert)
        if x509.load_pem_x509_certificate(ca_cert).not_valid_after_utc - RENEW_BEFORE < _now():
            raise ValueError("CA expiring")
        cert, key = issue_serving_cert(ca_cert, ca_key, hosts)
    except (OSError, ValueError, InvalidSettings):
        ca_cert, ca_key = make_ca()
        cert, key = issue_serving_cert(ca_cert, ca_key, hosts)
        try:
            write_private(state_dir / CA_KEY_FILE, ca_key)
            write_private(state_dir / CA_FILE, ca_cert)
        except OSError as exc:
            raise InvalidSettings(f"--state-dir {state_dir}: cannot write the CA ({exc.strerror})") from exc
    try:
        write_private(state_dir / KEY_FILE, key)
        write_private(state_dir / CERT_FILE, cert)
    except OSError as exc:
        raise InvalidSettings(f"--state-dir {state_dir}: cannot write the certificate ({exc.strerror})") from exc
    return ServingFiles(files.cert_file, files.key_file, files.ca_file, created=True)


def server_context(cert_file: Path | str, key_file: Path | str) -> ssl.SSLContext:
    """A server-side context (TLS 1.2+) with the pair loaded; raises ``ssl.SSLError``/``OSError``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile=str(cert_file), keyfile=str(key_file))
    context.set_alpn_protocols(["http/1.1"])
    return context


def check_pair(cert_file: Path, key_file: Path) -> None:
    """Raise :class:`InvalidSettings` with one clear line when the pair cannot serve TLS."""
    for flag, path in (("certificate", cert_file), ("key", key_file)):
        if not path.is_file():
            raise InvalidSettings(f"TLS {flag} file {path} does not exist")
    try:
        server_context(cert_file, key_file)
    except (ssl.SSLError, OSError) as exc:
        raise InvalidSettings(
            f"TLS certificate {cert_file} and key {key_file} cannot be loaded together: {exc}"
        ) from exc


class ReloadingContext:
    """A cached server context rebuilt when the certificate or key file changes.

    ``get()`` costs two ``stat`` calls when nothing changed. It is safe to call
    from many threads. If the new files cannot be loaded (a renewal caught
    half-way), the previous context is kept until the files change again
    (see :mod:`noe_core.util.watched_file`).
    """

    def __init__(self, cert_file: Path | str, key_file: Path | str) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self._files = WatchedFiles(
            [self.cert_file, self.key_file],
            lambda: server_context(self.cert_file, self.key_file),
            what=f"TLS certificate {self.cert_file} and key {self.key_file}",
            keep_on=(ssl.SSLError,),
        )
        self.get()

    @property
    def reloads(self) -> int:
        """How many renewed certificates were loaded after the first."""
        return self._files.reloads

    def get(self) -> ssl.SSLContext:
        return self._files.get()
