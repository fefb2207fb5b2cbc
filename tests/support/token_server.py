"""A real token service, like Docker Hub's ``auth.docker.io``, that the tests run themselves.

    with start_token_server(tmp_path, users={"bob": "pw"}) as ts:
        with start_registry(tmp_path / "reg", auth="token", token=ts) as reg:
            ...
        ts.requests_since(m)        # [TokenRequest(username="bob", scopes=("repository:x:pull",), ...)]

``GET /token?service=S&scope=repository:NAME:pull[,push]`` (several ``scope`` allowed),
with or without Basic credentials, answers ``{"token", "access_token", "expires_in",
"issued_at"}`` (:attr:`TokenServer.response_fields` picks ``token`` only or
``access_token`` only). The JWT is signed RS256 or ES256 with a self-signed
certificate carried base64-DER in the ``x5c`` header; the registry trusts that
certificate through ``auth.token.rootcertbundle``.

``POST /token`` is distribution's OAuth2 endpoint (``docs/spec/auth/oauth.md``): an
``application/x-www-form-urlencoded`` body with ``grant_type=refresh_token``,
``refresh_token``, ``service``, ``scope`` (space-separated) and ``client_id``
answers ``{"access_token", "scope", "expires_in", "issued_at"}`` for the user behind
the refresh token. Refresh tokens are minted by :meth:`TokenServer.add_refresh_token`
(what ``docker login`` stores as ``identitytoken``). An unknown refresh token is 400
``invalid_grant``, another ``grant_type`` 400 ``unsupported_grant_type``, a missing
``client_id`` or ``refresh_token`` (or a body of another content type) 400
``invalid_request`` (RFC 6749 §5.2);
inside :meth:`TokenServer.without_oauth` POST is answered 404, as token servers
without OAuth2 support (GCR) do.

Policy:
    - repositories under one of ``public_prefixes`` (default ``public/``): anyone may pull;
    - any other repository: pull for a valid user (``users``), nothing for anonymous
      (a token with empty ``access``, as Docker Hub does — the registry then answers 401);
    - the ``admin`` user gets pull, push and delete everywhere;
    - wrong credentials, or an ``Authorization`` that is not Basic: 401;
    - a ``service`` other than this server's: 400.

Every request is recorded (path, scopes, whether ``Authorization`` was sent, the
username, the OAuth2 ``grant_type`` and ``client_id`` — never the password nor the
refresh token) before it is answered, so counting needs no waiting; the tokens it
issues are kept (:meth:`TokenServer.issued`) for tests that check none leaks.
Listens on 127.0.0.1 only, HTTPS when given a :class:`CertPair`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import json
import secrets
import ssl
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from tests.support.certs import CertPair
from tests.support.registry_server import TEST_USER_AGENTS

__all__ = ["TokenRequest", "TokenServer", "b64url_decode", "start_token_server"]

Algorithm = Literal["RS256", "ES256"]
ResponseFields = Literal["both", "token", "access_token"]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class TokenRequest:
    """One request the token server received (never the password)."""

    method: str
    path: str
    service: str | None
    scopes: tuple[str, ...]
    authorization: bool
    """Whether an ``Authorization`` header was sent."""
    scheme: str | None
    """``basic``, ``bearer``, ... lower-case, or None."""
    username: str | None
    status: int
    granted: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(repository, actions) granted in the token."""
    user_agent: str = ""
    grant_type: str | None = None
    """The OAuth2 ``grant_type`` of a POST, or None for GET."""
    client_id: str | None = None
    """The OAuth2 ``client_id`` of a POST, or None."""
    content_type: str | None = None


class TokenServer:
    """A running token service; build it with :func:`start_token_server`."""

    def __init__(
        self,
        workdir: Path,
        *,
        users: Mapping[str, str],
        admin: tuple[str, str],
        public_prefixes: Sequence[str],
        service: str,
        issuer: str,
        algorithm: Algorithm,
        tls: CertPair | None,
        expires_in: int,
    ) -> None:
        self.workdir = workdir
        self.users = dict(users)
        self.admin = admin
        self.public_prefixes = tuple(public_prefixes)
        self.service = service
        self.issuer = issuer
        self.algorithm: Algorithm = algorithm
        self.tls = tls
        self.expires_in = expires_in
        self.response_fields: ResponseFields = "both"
        self.include_expires_in = True
        self.oauth_enabled = True
        self._refresh_tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self._requests: list[TokenRequest] = []
        self._issued: list[str] = []
        self._key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if algorithm == "RS256"
            else ec.generate_private_key(ec.SECP256R1())
        )
        self.cert = self._self_signed()
        self.root_cert_file = workdir / "token-signing.crt"
        self.root_cert_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what tests read -------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def realm(self) -> str:
        return f"{self.url}/token"

    @property
    def ca_file(self) -> Path | None:
        return self.tls.ca_file if self.tls else None

    @property
    def requests(self) -> list[TokenRequest]:
        with self._lock:
            return list(self._requests)

    def issued(self) -> list[str]:
        """Every token handed out so far, so a test can check none of them leaked anywhere."""
        with self._lock:
            return list(self._issued)

    def mark(self) -> int:
        with self._lock:
            return len(self._requests)

    def requests_since(
        self, mark: int = 0, *, username: str | None = None, include_test_traffic: bool = False
    ) -> list[TokenRequest]:
        """Token requests after *mark* (a value from :meth:`mark`), optionally only *username*'s.

        The pushes of ``tests.support.images`` are left out unless *include_test_traffic*.
        """
        with self._lock:
            found = self._requests[mark:]
        return [
            r
            for r in found
            if (include_test_traffic or not r.user_agent.startswith(TEST_USER_AGENTS))
            and (username is None or r.username == username)
        ]

    def count(self, since: int = 0, *, username: str | None = None, include_test_traffic: bool = False) -> int:
        return len(self.requests_since(since, username=username, include_test_traffic=include_test_traffic))

    @contextlib.contextmanager
    def responding_with(self, fields: ResponseFields, *, expires_in: bool = True) -> Iterator[None]:
        """Temporarily answer with only ``token`` / only ``access_token`` (and maybe no ``expires_in``)."""
        before = self.response_fields, self.include_expires_in
        self.response_fields, self.include_expires_in = fields, expires_in
        try:
            yield
        finally:
            self.response_fields, self.include_expires_in = before

    def add_refresh_token(self, username: str) -> str:
        """A new OAuth2 refresh token for ``username`` (a docker ``identitytoken``), known from now on."""
        token = "rt-" + secrets.token_urlsafe(24)
        with self._lock:
            self._refresh_tokens[token] = username
        return token

    def revoke_refresh_token(self, token: str) -> None:
        with self._lock:
            self._refresh_tokens.pop(token, None)

    @contextlib.contextmanager
    def without_oauth(self) -> Iterator[None]:
        """Temporarily answer ``POST /token`` with 404, like token servers that only serve GET."""
        self.oauth_enabled = False
        try:
            yield
        finally:
            self.oauth_enabled = True

    # -- policy and tokens -----------------------------------------------------------

    def allowed_actions(self, username: str | None, repository: str) -> tuple[str, ...]:
        if username == self.admin[0]:
            return ("pull", "push", "delete")
        if username is not None or repository.startswith(self.public_prefixes):
            return ("pull",)
        return ()

    def authenticate(self, header: str | None) -> tuple[str | None, str | None, bool]:
        """-> (scheme, username, ok). Anonymous (no header) is ok with username None."""
        if not header:
            return None, None, True
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return scheme.lower(), None, False
        try:
            user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return "basic", None, False
        known = dict(self.users)
        known[self.admin[0]] = self.admin[1]
        ok = bool(sep) and user in known and secrets.compare_digest(known[user], password)
        return "basic", user, ok

    def issue(self, username: str | None, access: list[dict[str, Any]], audience: str | None = None) -> str:
        now = int(time.time())
        header = {
            "typ": "JWT",
            "alg": self.algorithm,
            "x5c": [base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()],
        }
        claims = {
            "iss": self.issuer,
            "sub": username or "",
            "aud": audience or self.service,
            "exp": now + self.expires_in,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        token = signing_input + "." + _b64url(self._sign(signing_input.encode()))
        with self._lock:
            self._issued.append(token)
        return token

    def _sign(self, data: bytes) -> bytes:
        if isinstance(self._key, rsa.RSAPrivateKey):
            return self._key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        r, s = decode_dss_signature(self._key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    def _self_signed(self) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.issuer)])
        start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        return (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    def _record(self, entry: TokenRequest) -> None:
        with self._lock:
            self._requests.append(entry)

    # -- HTTP ------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "noe-test-token/1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._answer(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server._answer(self, form=self.rfile.read(length))

        return Handler

    def _answer(self, h: BaseHTTPRequestHandler, *, form: bytes | None = None) -> None:
        url = urlsplit(h.path)
        post = form is not None
        query = parse_qs(url.query)
        if post:
            # The OAuth2 parameters are in the body; a realm's own query string may add to them.
            query.update(parse_qs((form or b"").decode("utf-8", "replace")))
        service = query.get("service", [None])[0]
        scopes = tuple(s for raw in query.get("scope", []) for s in raw.split(" ") if s)
        header = h.headers.get("Authorization")
        scheme, username, ok = self.authenticate(header)
        grant_type = query.get("grant_type", [None])[0] if post else None
        client_id = query.get("client_id", [None])[0] if post else None
        refresh_token = query.get("refresh_token", [None])[0] if post else None
        if refresh_token is not None:
            with self._lock:
                username = self._refresh_tokens.get(refresh_token)

        def reply(status: int, body: dict[str, Any], granted: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> None:
            self._record(
                TokenRequest(
                    method=h.command,
                    path=url.path,
                    service=service,
                    scopes=scopes,
                    authorization=header is not None,
                    scheme=scheme,
                    username=username,
                    status=int(status),
                    granted=granted,
                    user_agent=h.headers.get("User-Agent", ""),
                    grant_type=grant_type,
                    client_id=client_id,
                    content_type=h.headers.get("Content-Type"),
                )
            )
            data = json.dumps(body).encode()
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            if status == HTTPStatus.UNAUTHORIZED:
                h.send_header("WWW-Authenticate", 'Basic realm="noe-test-token"')
            h.end_headers()
            h.wfile.write(data)

        if url.path != "/token" or (post and not self.oauth_enabled):
            reply(HTTPStatus.NOT_FOUND, {"details": "only /token is served"})
            return
        if post:
            form_type = (h.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            problem = (
                "invalid_request"
                if form_type != "application/x-www-form-urlencoded"
                else self._oauth_problem(grant_type, client_id, refresh_token, username)
            )
            if problem:
                reply(HTTPStatus.BAD_REQUEST, {"error": problem})
                return
        if not ok:
            reply(HTTPStatus.UNAUTHORIZED, {"details": "incorrect username or password"})
            return
        if service != self.service:
            reply(HTTPStatus.BAD_REQUEST, {"details": f"unknown service {service!r}"})
            return
        access: list[dict[str, Any]] = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository" or not name:
                continue
            allowed = self.allowed_actions(username, name)
            granted = [a for a in actions.split(",") if a in allowed or (a == "*" and "delete" in allowed)]
            if granted:
                access.append({"type": "repository", "name": name, "actions": granted})
        token = self.issue(username, access)
        body: dict[str, Any] = {}
        if post:
            # oauth.md: access_token (required), scope, expires_in, issued_at; no "token".
            body["access_token"] = token
            body["scope"] = " ".join(scopes)
        elif self.response_fields in ("both", "token"):
            body["token"] = token
        if not post and self.response_fields in ("both", "access_token"):
            body["access_token"] = token
        if self.include_expires_in:
            body["expires_in"] = self.expires_in
        body["issued_at"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        reply(HTTPStatus.OK, body, tuple((a["name"], tuple(a["actions"])) for a in access))

    @staticmethod
    def _oauth_problem(
        grant_type: str | None, client_id: str | None, refresh_token: str | None, username: str | None
    ) -> str:
        """The RFC 6749 error code for a POST this server refuses, or "" when it is fine."""
        if grant_type != "refresh_token":
            return "unsupported_grant_type"
        if not client_id or not refresh_token:
            return "invalid_request"
        if username is None:
            return "invalid_grant"
        return ""

    def start(self) -> None:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        httpd.daemon_threads = True
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls.cert_file, self.tls.key_file)
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="token-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __repr__(self) -> str:
        return f"<TokenServer {self.realm} {self.algorithm}>"


@contextlib.contextmanager
def start_token_server(
    workdir: Path,
    *,
    users: Mapping[str, str] | None = None,
    admin: tuple[str, str] | None = None,
    public_prefixes: Sequence[str] = ("public/",),
    service: str = "noe-test-registry",
    issuer: str = "noe-test-token-issuer",
    algorithm: Algorithm = "RS256",
    tls: CertPair | None = None,
    expires_in: int = 300,
) -> Iterator[TokenServer]:
    """Run a token server for the duration of the ``with`` block (127.0.0.1, a free port)."""
    workdir.mkdir(parents=True, exist_ok=True)
    server = TokenServer(
        workdir,
        users=users or {},
        admin=admin or ("admin", secrets.token_urlsafe(12)),
        public_prefixes=public_prefixes,
        service=service,
        issuer=issuer,
        algorithm=algorithm,
        tls=tls,
        expires_in=expires_in,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()
