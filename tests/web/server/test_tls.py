"""noe_web.server.tls: the self-signed default and the reloading server context, over real handshakes."""

from __future__ import annotations

import os
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509

from noe_core.errors import InvalidSettings
from noe_web.server.tls import ReloadingContext, check_pair, ensure_self_signed
from tests.support.certs import make_ca


@contextmanager
def tls_server(context_source: ReloadingContext) -> Iterator[int]:
    """Accept handshakes with whatever context the source hands out at that moment."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    with context_source.get().wrap_socket(conn, server_side=True) as tls:
                        tls.recv(1)
                except (ssl.SSLError, OSError):
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def served_serial(port: int, ca_file: Path, host: str = "localhost") -> int:
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number


def test_self_signed_is_created_then_reused(tmp_path: Path) -> None:
    first = ensure_self_signed(tmp_path / "state")
    assert first.created and first.ca_file is not None
    assert oct(first.key_file.stat().st_mode & 0o777) == "0o600"
    second = ensure_self_signed(tmp_path / "state")
    assert not second.created
    assert second.cert_file.read_bytes() == first.cert_file.read_bytes()
    # a localhost client trusting the CA completes a verified handshake, by name and by address
    with tls_server(ReloadingContext(first.cert_file, first.key_file)) as port:
        for host in ("localhost", "127.0.0.1"):
            served_serial(port, first.ca_file, host)


def test_broken_serving_pair_is_reissued_under_the_same_ca(tmp_path: Path) -> None:
    first = ensure_self_signed(tmp_path)
    ca = first.ca_file.read_bytes() if first.ca_file else b""
    first.cert_file.write_text("garbage")
    again = ensure_self_signed(tmp_path)
    assert again.created
    assert again.ca_file is not None and again.ca_file.read_bytes() == ca


def test_unwritable_state_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InvalidSettings, match="--state-dir"):
        ensure_self_signed(blocker / "sub")


def test_check_pair_rejects_mismatched_files(tmp_path: Path) -> None:
    ca = make_ca("t", tmp_path)
    a = ca.issue(["localhost"], name="a")
    b = ca.issue(["localhost"], name="b")
    check_pair(a.cert_file, a.key_file)
    with pytest.raises(InvalidSettings, match="cannot be loaded together"):
        check_pair(a.cert_file, b.key_file)
    with pytest.raises(InvalidSettings, match="does not exist"):
        check_pair(tmp_path / "nope.crt", a.key_file)


def test_renewed_files_are_used_by_the_next_handshake(tmp_path: Path) -> None:
    ca = make_ca("renewing CA", tmp_path / "ca")
    live = tmp_path / "live"
    live.mkdir()
    old = ca.issue(["localhost", "127.0.0.1"], name="old")
    new = ca.issue(["localhost", "127.0.0.1"], name="new")
    (live / "tls.crt").write_bytes(old.cert_file.read_bytes())
    (live / "tls.key").write_bytes(old.key_file.read_bytes())
    source = ReloadingContext(live / "tls.crt", live / "tls.key")
    old_serial = x509.load_pem_x509_certificate(old.cert_file.read_bytes()).serial_number
    new_serial = x509.load_pem_x509_certificate(new.cert_file.read_bytes()).serial_number
    with tls_server(source) as port:
        assert served_serial(port, ca.ca_file) == old_serial
        assert source.get() is source.get()  # cached while nothing changes
        # cert-manager style: the key lands first (pair mismatched for a moment), then the cert
        (live / "tls.key").write_bytes(new.key_file.read_bytes())
        assert served_serial(port, ca.ca_file) == old_serial  # the previous context is kept
        tmp = live / ".tls.crt.tmp"
        tmp.write_bytes(new.cert_file.read_bytes())
        os.replace(tmp, live / "tls.crt")
        assert served_serial(port, ca.ca_file) == new_serial
    assert source.reloads == 1
