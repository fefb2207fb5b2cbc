"""A tiny HTTP server whose answers a test scripts, recording everything it receives.

Used where a real registry cannot misbehave on demand: wrong bodies for a
digest, huge error pages, Retry-After, redirects, hostile token realms.
``routes`` maps a path (without query) to ``handler -> (status, headers, body)``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from noe_core.image.manifest import sha256_digest

Route = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]
NOT_FOUND = (404, {}, b'{"errors":[{"code":"NOT_FOUND"}]}')

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
ARM64_CONFIG = b'{"os":"linux","architecture":"arm64"}'
"""The config blob of the single-architecture image the scripted registries serve."""


def single_arch_manifest(config: bytes = ARM64_CONFIG) -> bytes:
    """An OCI image manifest naming ``config`` and no layers: what a scripted registry answers for an image."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(config),
                "size": len(config),
            },
            "layers": [],
        }
    ).encode()


@dataclass(frozen=True)
class Seen:
    """One request as received: method, path with query, lower-cased headers, body."""

    method: str
    path: str
    headers: dict[str, str]
    body: str = ""


@dataclass
class ScriptedServer:
    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    host: str = ""
    drip: dict[str, float] = field(default_factory=dict)
    """Paths whose whole answer (status line, headers, body) is sent at this many bytes per second."""
    dripping: int = 0
    """Answers being dripped right now (a client that hangs up ends its drip)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # dozens of lookups connect at once; the default backlog of 5 drops SYNs


@contextlib.contextmanager
def start_scripted_server() -> Iterator[ScriptedServer]:
    """Serve on a free 127.0.0.1 port until the block ends."""
    state = ScriptedServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("latin-1") if length else ""
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.seen.append(Seen(self.command, self.path, headers, body))
            route = state.routes.get(self.path.split("?")[0])
            status, reply_headers, payload = route(self) if route else NOT_FOUND
            rate = state.drip.get(self.path.split("?")[0])
            if rate:
                self._drip(status, reply_headers, payload, rate)
                return
            self.send_response(status)
            for key, value in reply_headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                # The client may stop reading (size cap): expected.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

        def _drip(self, status: int, headers: dict[str, str], payload: bytes, rate: float) -> None:
            lines = [
                f"HTTP/1.1 {status} Dripping",
                *(f"{k}: {v}" for k, v in headers.items()),
                f"Content-Length: {len(payload)}",
            ]
            raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + (payload if self.command != "HEAD" else b"")
            step = max(1, int(rate))
            self.close_connection = True
            with state.lock:
                state.dripping += 1
            try:
                with contextlib.suppress(OSError):
                    for i in range(0, len(raw), step):
                        self.wfile.write(raw[i : i + step])
                        self.wfile.flush()
                        time.sleep(step / rate)
            finally:
                with state.lock:
                    state.dripping -= 1

        do_GET = do_POST = do_HEAD = _serve

    with serving(Handler) as host:
        state.host = host
        yield state


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served by threads on a free 127.0.0.1 port until the block ends; yields ``host:port``."""
    server = _Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
