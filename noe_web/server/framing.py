"""HTTP/1.1 requests in a buffer: where one ends, what its head says, its body once whole.

The serving worker (:mod:`noe_web.server.worker`) reads requests in its event loop,
without blocking, and hands a request to a request thread only when these
bytes say it is complete. The head is parsed once, here, strictly (RFC 9112):
the same parse decides the framing and becomes the WSGI environ, so no second
parser can read the bytes differently from the one that framed them. A
request whose head is malformed or whose length is ambiguous is refused with
a :class:`RequestRejected` (answered by the worker, connection closed); a
chunked body whose chunks are malformed is handed to the application as an
unreadable body (:class:`MalformedBody`), which refuses it like any body it
cannot read.

A request with neither ``Content-Length`` nor ``Transfer-Encoding`` has a
body of length zero (RFC 9112 section 6.3): what follows its head is the
next request.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
MAX_REQUEST_LINE = 8 * 1024

_HEADER_END = b"\r\n\r\n"
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # no CTL but HTAB in a head, once its CRLFs are gone
_VERSIONS = {b"HTTP/1.1": "HTTP/1.1", b"HTTP/1.0": "HTTP/1.0"}
_ANY_VERSION = re.compile(rb"HTTP/[0-9]\.[0-9]")
_MAX_CHUNK_LINE = 1024


class RequestRejected(Exception):
    """A request the worker answers itself with ``status`` (and closes the connection): its head is unusable."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class MalformedBody(Exception):
    """A chunked body whose chunks cannot be read: raised by the body stream when the application reads it."""


class Verdict(enum.Enum):
    MORE = "more"  # keep reading
    COMPLETE = "complete"  # the request ends at ``Framing.end``; its body is ``Framing.body``
    TOO_LARGE = "too_large"  # the body is larger than allowed: answer without waiting for all of it
    HEADERS_TOO_LARGE = "headers_too_large"  # no end of headers within MAX_HEADER_BYTES
    UNFRAMEABLE = "unframeable"  # ``Framing.error`` (head) or ``Framing.body_error`` (chunks): cannot be framed


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A request line and its header fields, parsed and checked."""

    method: str
    target: str  # as sent (gunicorn's RAW_URI)
    path: str  # the target's path, not yet percent-decoded
    query: str
    version: str  # "HTTP/1.1" or "HTTP/1.0"
    headers: tuple[tuple[str, str], ...]  # (name as sent, value without surrounding whitespace), latin-1
    body_start: int  # offset of the body's first byte in the buffer
    content_length: int | None
    chunked: bool
    expects_continue: bool
    keep_alive: bool  # the client's wish (version and Connection header)

    @property
    def framed(self) -> bool:
        """Whether the request says how long its body is (a request that does not has none)."""
        return self.chunked or self.content_length is not None


@dataclass(frozen=True, slots=True)
class Framing:
    verdict: Verdict
    end: int = 0  # for COMPLETE: offset just past the request
    header_end: int = 0  # offset of the body's first byte, once the headers are in
    content_length: int | None = None
    expects_continue: bool = False
    head: RequestHead | None = None
    body: bytes = b""  # COMPLETE: the body (chunks decoded); UNFRAMEABLE/TOO_LARGE chunked: what was decoded
    error: RequestRejected | None = None  # UNFRAMEABLE: why the head is refused
    body_error: str = ""  # UNFRAMEABLE: why the chunks cannot be read (the head is fine)


def frame(buf: bytes | bytearray, max_body: int, head: RequestHead | None = None) -> Framing:
    """Decide whether ``buf`` holds one complete request (headers and body).

    ``head`` is the :attr:`Framing.head` of an earlier call on the same buffer: its
    headers are not parsed again as more of the body arrives.
    """
    if head is None:
        head_end = buf.find(_HEADER_END, 0, MAX_HEADER_BYTES + len(_HEADER_END))
        if head_end < 0:
            return Framing(Verdict.HEADERS_TOO_LARGE if len(buf) > MAX_HEADER_BYTES else Verdict.MORE)
        try:
            head = parse_head(buf[:head_end], head_end + len(_HEADER_END))
        except RequestRejected as exc:
            return Framing(Verdict.UNFRAMEABLE, header_end=head_end + len(_HEADER_END), error=exc)
    start = head.body_start
    if head.chunked:
        return _chunked(buf, head, max_body)
    length = head.content_length or 0
    if length > max_body:
        return Framing(Verdict.TOO_LARGE, header_end=start, content_length=length, head=head)
    if len(buf) - start >= length:
        return Framing(
            Verdict.COMPLETE,
            end=start + length,
            header_end=start,
            content_length=head.content_length,
            head=head,
            body=bytes(buf[start : start + length]),
        )
    return Framing(
        Verdict.MORE, header_end=start, content_length=length, expects_continue=head.expects_continue, head=head
    )


def parse_head(block: bytes | bytearray, body_start: int) -> RequestHead:
    """The request line and header fields in ``block`` (without the final empty line); raises RequestRejected."""
    lines = block.split(b"\r\n")
    if _CONTROL.search(block.replace(b"\r\n", b"")):
        raise RequestRejected(400, "malformed_request", "the request head holds a control character or a bare CR/LF")
    method, target, version = _request_line(lines[0])
    if len(lines) - 1 > MAX_HEADER_FIELDS:
        raise RequestRejected(431, "headers_too_large", f"more than {MAX_HEADER_FIELDS} header fields")
    headers: list[tuple[str, str]] = []
    lengths: list[str] = []
    codings: list[str] = []
    connection: list[str] = []
    expect: list[str] = []
    hosts = 0
    for line in lines[1:]:
        name_bytes, colon, value_bytes = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name_bytes):
            detail = "a folded header line" if line[:1] in (b" ", b"\t") else "a malformed header line"
            raise RequestRejected(400, "malformed_header", f"the request has {detail}")
        name, value = name_bytes.decode("latin-1"), value_bytes.strip(b" \t").decode("latin-1")
        headers.append((name, value))
        key = name.lower()
        if key == "content-length":
            lengths.append(value)
        elif key == "transfer-encoding":
            codings.extend(part.strip(" \t").lower() for part in value.split(","))
        elif key == "connection":
            connection.extend(part.strip(" \t").lower() for part in value.split(","))
        elif key == "expect":
            expect.append(value.lower())
        elif key == "host":
            hosts += 1
    if hosts > 1 or (hosts == 0 and version == "HTTP/1.1"):
        raise RequestRejected(400, "bad_host", "an HTTP/1.1 request must have exactly one Host header")
    content_length, chunked = _body_length(lengths, codings, version)
    if expect and expect != ["100-continue"]:
        raise RequestRejected(417, "expectation_failed", "the only expectation understood is 100-continue")
    path, _, query = target.partition("?")
    if target.startswith(("http://", "https://")):  # absolute-form: the path starts after the authority
        slash = target.find("/", target.find("//") + 2)
        path = target[slash:].partition("?")[0] if slash >= 0 else "/"
    return RequestHead(
        method=method,
        target=target,
        path=path,
        query=query,
        version=version,
        headers=tuple(headers),
        body_start=body_start,
        content_length=content_length,
        chunked=chunked,
        expects_continue=bool(expect) and version == "HTTP/1.1",
        keep_alive="close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection,
    )


def _request_line(line: bytes | bytearray) -> tuple[str, str, str]:
    if len(line) > MAX_REQUEST_LINE:
        raise RequestRejected(414, "uri_too_long", f"the request line is longer than {MAX_REQUEST_LINE} bytes")
    parts = line.split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise RequestRejected(400, "malformed_request_line", "the request line is not 'METHOD target HTTP/1.x'")
    version = _VERSIONS.get(bytes(parts[2]))
    if version is None:
        if _ANY_VERSION.fullmatch(parts[2]):
            raise RequestRejected(505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served")
        raise RequestRejected(400, "malformed_request_line", "the request line does not end with an HTTP version")
    target = parts[1].decode("latin-1")
    if not target.startswith("/") and not target.startswith(("http://", "https://")) and target != "*":
        raise RequestRejected(400, "malformed_request_line", "the request target is not a path or an absolute URL")
    return parts[0].decode("latin-1"), target, version


def _body_length(lengths: list[str], codings: list[str], version: str) -> tuple[int | None, bool]:
    """The Content-Length and whether the body is chunked; RequestRejected when they do not agree (RFC 9112 6.3)."""
    if codings:
        if lengths:
            raise RequestRejected(400, "ambiguous_length", "the request has both Transfer-Encoding and Content-Length")
        if version != "HTTP/1.1" or codings[-1] != "chunked":
            raise RequestRejected(400, "ambiguous_length", "a request's Transfer-Encoding must end with chunked")
        if len(codings) > 1:
            raise RequestRejected(501, "unsupported_transfer_coding", "only the chunked transfer coding is supported")
        return None, True
    if not lengths:
        return None, False
    if len(lengths) > 1 or not lengths[0].isdigit() or not lengths[0].isascii() or len(lengths[0]) > 18:
        raise RequestRejected(400, "ambiguous_length", "the request's Content-Length is not one decimal number")
    return int(lengths[0]), False


def _chunked(buf: bytes | bytearray, head: RequestHead, max_body: int) -> Framing:
    """Walk the chunks after the head: complete at the last chunk's trailer section."""
    start = pos = head.body_start
    parts: list[bytes] = []
    size_total = 0

    def more() -> Framing:
        return Framing(Verdict.MORE, header_end=start, expects_continue=head.expects_continue, head=head)

    def malformed(why: str) -> Framing:
        return Framing(Verdict.UNFRAMEABLE, header_end=start, head=head, body=b"".join(parts), body_error=why)

    while True:
        line_end = buf.find(b"\r\n", pos, pos + _MAX_CHUNK_LINE)
        if line_end < 0:
            return malformed("a chunk-size line is too long") if len(buf) - pos > _MAX_CHUNK_LINE else more()
        size_text = buf[pos:line_end].split(b";", 1)[0].strip(b" \t")
        if not size_text or len(size_text) > 16 or size_text.strip(b"0123456789abcdefABCDEF"):
            return malformed("a chunk size is not a hexadecimal number")
        size = int(size_text, 16)
        pos = line_end + 2
        if size == 0:
            trailer_end = buf.find(b"\r\n", pos) if buf.startswith(b"\r\n", pos) else buf.find(_HEADER_END, pos)
            if trailer_end < 0:
                return malformed("the trailer section is too long") if len(buf) - pos > MAX_HEADER_BYTES else more()
            end = trailer_end + (2 if trailer_end == pos else 4)
            return Framing(Verdict.COMPLETE, end=end, header_end=start, head=head, body=b"".join(parts))
        arrived = bytes(buf[pos : pos + size])
        size_total += len(arrived)
        if size_total > max_body:  # more than the limit has arrived: the application reads and refuses it
            parts.append(arrived)
            return Framing(Verdict.TOO_LARGE, header_end=start, head=head, body=b"".join(parts))
        if len(buf) < pos + size + 2:
            return more()
        if buf[pos + size : pos + size + 2] != b"\r\n":
            return malformed("a chunk does not end with CRLF")
        parts.append(arrived)
        pos += size + 2
