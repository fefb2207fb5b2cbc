"""A small HTTPS server speaking the Kubernetes API paths ``noe certs`` uses.

Secrets (GET, POST, PUT with resourceVersion conflicts) and
MutatingWebhookConfigurations (GET, PATCH with ``application/json-patch+json``,
including ``test`` operations), kept in memory. Every request is recorded as
``(method, path, content_type)``; a bearer token is required. Listens on
127.0.0.1 only, with a certificate from :mod:`tests.support.certs`.

``FakeKubeApi.kubeconfig(path)`` writes a kubeconfig pointing at it.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from tests.support.certs import make_ca

__all__ = ["FakeKubeApi", "fake_kube_api"]

_SECRET = re.compile(r"^/api/v1/namespaces/([^/]+)/secrets(?:/([^/]+))?$")
_MWC = re.compile(r"^/apis/admissionregistration\.k8s\.io/v1/mutatingwebhookconfigurations/([^/]+)$")


class FakeKubeApi:
    """In-memory objects plus the request log; see the module docstring."""

    def __init__(self, token: str = "test-token") -> None:
        self.token = token
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.webhook_configs: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.forbid: set[tuple[str, str]] = set()  # (method, path) answered 403
        self._version = 100
        self.lock = threading.Lock()
        self.url = ""
        self.ca_pem = b""

    def next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def add_webhook_config(self, name: str, webhooks: int = 1) -> None:
        self.webhook_configs[name] = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name, "resourceVersion": self.next_version()},
            "webhooks": [
                {
                    "name": f"hook{i}.noe.example.com",
                    "clientConfig": {"service": {"name": "noe", "namespace": "noe", "path": "/mutate"}},
                }
                for i in range(webhooks)
            ],
        }

    def secret_data(self, namespace: str, name: str) -> dict[str, bytes]:
        secret = self.secrets[(namespace, name)]
        return {k: base64.b64decode(v) for k, v in secret["data"].items()}

    def calls(self, method: str | None = None) -> list[tuple[str, str, str]]:
        return [r for r in self.requests if method is None or r[0] == method]

    def kubeconfig(self, path: Path) -> Path:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "fake",
            "clusters": [
                {
                    "name": "fake",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": "certs", "user": {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "certs"}}],
        }
        path.write_text(yaml.safe_dump(doc))
        return path


def _handler(api: FakeKubeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, reason: str) -> None:
            self._send(
                code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}
            )

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"null")

        def _handle(self, method: str) -> None:
            body = self._body() if method in ("POST", "PUT", "PATCH") else None
            with api.lock:
                api.requests.append((method, self.path, self.headers.get("Content-Type", "")))
                if self.headers.get("Authorization") != f"Bearer {api.token}":
                    self._status(401, "Unauthorized")
                    return
                if (method, self.path) in api.forbid:
                    self._status(403, "Forbidden")
                    return
                if m := _SECRET.match(self.path):
                    self._secret(method, m.group(1), m.group(2), body)
                elif m := _MWC.match(self.path):
                    self._mwc(method, m.group(1), body)
                else:
                    self._status(404, "NotFound")

        def _secret(self, method: str, namespace: str, name: str | None, body: Any) -> None:
            if method == "POST" and name is None:
                key = (namespace, body["metadata"]["name"])
                if key in api.secrets:
                    self._status(409, "AlreadyExists")
                    return
                body["metadata"]["resourceVersion"] = api.next_version()
                api.secrets[key] = body
                self._send(201, body)
                return
            if name is None:
                self._status(405, "MethodNotAllowed")
                return
            key = (namespace, name)
            current = api.secrets.get(key)
            if current is None:
                self._status(404, "NotFound")
            elif method == "GET":
                self._send(200, copy.deepcopy(current))
            elif method == "PUT":
                if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                    self._status(409, "Conflict")
                    return
                body["metadata"]["resourceVersion"] = api.next_version()
                api.secrets[key] = body
                self._send(200, body)
            else:
                self._status(405, "MethodNotAllowed")

        def _mwc(self, method: str, name: str, body: Any) -> None:
            current = api.webhook_configs.get(name)
            if current is None:
                self._status(404, "NotFound")
            elif method == "GET":
                self._send(200, copy.deepcopy(current))
            elif method == "PATCH":
                if self.headers.get("Content-Type") != "application/json-patch+json":
                    self._status(415, "UnsupportedMediaType")
                    return
                try:
                    patched = jsonpatch.apply_patch(current, body)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
                    self._status(422, "Invalid")
                    return
                patched["metadata"]["resourceVersion"] = api.next_version()
                api.webhook_configs[name] = patched
                self._send(200, patched)
            else:
                self._status(405, "MethodNotAllowed")

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PUT(self) -> None:
            self._handle("PUT")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    return Handler


@contextmanager
def fake_kube_api(directory: Path) -> Iterator[FakeKubeApi]:
    """Run a :class:`FakeKubeApi` over TLS on 127.0.0.1 for the duration of the block."""
    api = FakeKubeApi()
    ca = make_ca("fake kube-apiserver CA", directory / "kube-ca")
    pair = ca.issue(["127.0.0.1", "localhost"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert_file, pair.key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    api.url = f"https://127.0.0.1:{server.server_address[1]}"
    api.ca_pem = ca.ca_file.read_bytes()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
