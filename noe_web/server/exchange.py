"""One request/response exchange: a request read whole by the worker → the WSGI application → one write.

Why not gunicorn's parser and response writer: the worker's event loop has
already parsed the head to frame the request (:mod:`noe_web.server.framing`),
and parsing it again with gunicorn's ``Request``, building its environ and
writing through its ``Response`` measured about 100 µs per request — a third
of what a bare Flask app costs in all under gthread. Here the environ is
built from the parsed head, and a response whose length is known (every
Flask response that is not streamed) leaves in a single ``send``: status
line, headers and body together.

What HTTP requires of the response is kept: ``Date``; ``Content-Length``, or
chunked coding for an HTTP/1.1 client (an HTTP/1.0 one then reads until the
connection closes); no body for HEAD, 1xx, 204 and 304; ``Connection: close``
when the connection ends after it, ``Connection: keep-alive`` to an HTTP/1.0
client that asked to keep it. A response that ends short of its announced
length, or whose header would split the response, closes the connection.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote_to_bytes

from noe_web.server.framing import MalformedBody, RequestHead

Send = Callable[[bytes], None]
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_NO_BODY_STATUS = ("1", "204", "304")
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"})


class ResponseError(Exception):
    """The application's response cannot be sent as it is (a header with CR/LF, headers given twice)."""


class UnreadableBody(io.BytesIO):
    """What could be decoded of a malformed chunked body; reading past it raises :class:`MalformedBody`."""

    def __init__(self, decoded: bytes, why: str) -> None:
        super().__init__(decoded)
        self.why = why

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if not data or size is None or size < 0:
            raise MalformedBody(self.why)
        return data


class _Clock:
    """The ``Date`` header's value, formatted once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def date(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._value = formatdate(now, usegmt=True).encode("ascii")
            self._second = now
        return self._value


_CLOCK = _Clock()


def build_environ(
    head: RequestHead,
    body: io.BytesIO,
    *,
    client: tuple[str, int] | Any,
    server: tuple[str, int] | Any,
    url_scheme: str,
    multiprocess: bool,
) -> dict[str, Any]:
    """The WSGI environ of a request (PEP 3333, and gunicorn's ``RAW_URI``)."""
    path = head.path
    if "%" in path:
        path = unquote_to_bytes(path).decode("latin-1")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": head.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": head.query,
        "RAW_URI": head.target,
        "SERVER_PROTOCOL": head.version,
        "SERVER_NAME": str(server[0]) if isinstance(server, tuple) else "localhost",
        "SERVER_PORT": str(server[1]) if isinstance(server, tuple) else "",
        "REMOTE_ADDR": str(client[0]) if isinstance(client, tuple) else "",
        "REMOTE_PORT": str(client[1]) if isinstance(client, tuple) else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url_scheme,
        "wsgi.input": body,
        "wsgi.input_terminated": True,  # the body is whole: read it to its end, with or without a length
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
    }
    for name, value in head.headers:
        if "_" in name:  # HTTP_X_A would not tell X-A from X_A: a header a proxy did not vet (gunicorn drops it too)
            continue
        key = name.upper().replace("-", "_")
        if key in {"CONTENT_TYPE", "CONTENT_LENGTH"}:
            environ[key] = value
            continue
        key = "HTTP_" + key
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


class Response:
    """``start_response`` and the writing of one response through ``send``.

    ``close`` says whether the connection must end after it: the request or the
    worker wanted it, the application said so, or the response ended short.
    """

    def __init__(self, send: Send, head: RequestHead, *, close: bool) -> None:
        self._send = send
        self._version = head.version
        self._head_request = head.method == "HEAD"
        self.close = close or not head.keep_alive
        self.status = ""
        self.headers: list[tuple[str, str]] = []
        self.sent = 0  # body bytes sent (gunicorn's access-log atom)
        self.headers_sent = False
        self._length: int | None = None
        self._chunked = False
        self._no_body = False

    def start_response(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
        if exc_info is not None:
            try:
                if self.headers_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status:
            raise ResponseError("start_response called twice without exc_info")
        self.status, self.headers = status, list(headers)
        return self.write

    def write(self, data: bytes) -> None:
        """Send ``data`` (the head first, in the same write)."""
        if not self.headers_sent:
            self._send(self._head_bytes() + self._frame(data))
            return
        if data:
            self._send(self._frame(data))

    def finish(self) -> None:
        """After the application's last chunk: the head if nothing was sent, the last chunk, or a short end."""
        if not self.headers_sent:
            self._send(self._head_bytes())
        elif self._chunked:
            self._send(b"0\r\n\r\n")
        if self._length is not None and self.sent < self._length and not self._no_body:
            self.close = True  # the client waits for bytes that will never come: only closing tells it

    def _frame(self, data: bytes) -> bytes:
        if self._no_body or not data:
            return b""
        if self._length is not None:
            data = data[: max(0, self._length - self.sent)]
        self.sent += len(data)
        if self._chunked:
            return b"%x\r\n%s\r\n" % (len(data), data)
        return data

    def _head_bytes(self) -> bytes:
        if not self.status:
            raise ResponseError("the application sent a body before start_response")
        lines = [f"{self._version} {self.status}\r\n".encode("latin-1")]
        for name, value in self.headers:
            if "\n" in value or "\r" in value or "\n" in name or "\r" in name or ":" in name:
                raise ResponseError(f"the response header {name!r} would split the response")
            key = name.lower()
            if key == "content-length":
                if not value.isdigit() or not value.isascii():
                    raise ResponseError(f"the response's Content-Length {value!r} is not a number")
                self._length = int(value)
            elif key in _HOP_BY_HOP:
                if key == "connection" and "close" in value.lower():
                    self.close = True
                continue  # the server frames and keeps the connection, not the application
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        self._no_body = self._head_request or self.status.startswith(_NO_BODY_STATUS)
        if self._length is None and not self._no_body:
            if self._version == "HTTP/1.1":
                self._chunked = True
                lines.append(b"Transfer-Encoding: chunked\r\n")
            else:
                self.close = True  # an HTTP/1.0 client reads the body until the connection closes
        lines.append(b"Date: " + _CLOCK.date() + b"\r\n")
        if self.close:
            lines.append(b"Connection: close\r\n")
        elif self._version == "HTTP/1.0":
            lines.append(b"Connection: keep-alive\r\n")
        lines.append(b"\r\n")
        self.headers_sent = True
        return b"".join(lines)


def run_app(app: WSGIApp, environ: dict[str, Any], response: Response) -> None:
    """Call the application and write what it returns; exceptions propagate (the caller answers or closes)."""
    result = app(environ, response.start_response)
    try:
        for data in result:
            response.write(data)
        response.finish()
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()


def error_body(status: int, reason: str, message: str) -> bytes:
    """The one JSON shape of every refusal: ``{"code", "reason", "message"}`` and a newline."""
    return json.dumps({"code": status, "reason": reason, "message": message}, separators=(",", ":")).encode() + b"\n"


_REASONS = {
    400: "Bad Request",
    413: "Content Too Large",
    414: "URI Too Long",
    417: "Expectation Failed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    505: "HTTP Version Not Supported",
}


def error_response(status: int, reason: str, message: str) -> bytes:
    """A whole JSON error response that closes the connection, for what the worker answers itself."""
    body = error_body(status, reason, message)
    return (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nDate: {_CLOCK.date().decode()}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1") + body
