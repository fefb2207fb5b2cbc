"""Where one HTTP/1.1 request ends in a buffer, so a request is read whole before a thread takes it.

The serving worker (:mod:`noe_web.worker`) reads requests in its event loop,
without blocking, and hands a request to a request thread only when these
bytes say it is complete. The answer is deliberately coarse: anything this
module cannot frame (malformed chunk sizes, conflicting lengths) is handed
over as it is, and gunicorn's own parser rejects it from the buffered bytes
with a 400 — it never has to wait for the client.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

MAX_HEADER_BYTES = 64 * 1024

_HEADER_END = b"\r\n\r\n"


class Verdict(enum.Enum):
    MORE = "more"  # keep reading
    COMPLETE = "complete"  # the request ends at ``Framing.end``
    TOO_LARGE = "too_large"  # the body is larger than allowed: answer without waiting for all of it
    HEADERS_TOO_LARGE = "headers_too_large"  # no end of headers within MAX_HEADER_BYTES
    UNFRAMEABLE = "unframeable"  # let the HTTP parser reject what is there


@dataclass(frozen=True)
class Framing:
    verdict: Verdict
    end: int = 0  # for COMPLETE: offset just past the request
    header_end: int = 0  # offset of the body's first byte, once the headers are in
    content_length: int | None = None
    expects_continue: bool = False


def frame(buf: bytes, max_body: int) -> Framing:
    """Decide whether ``buf`` holds one complete request (headers and body)."""
    head_end = buf.find(_HEADER_END)
    if head_end < 0:
        return Framing(Verdict.HEADERS_TOO_LARGE if len(buf) > MAX_HEADER_BYTES else Verdict.MORE)
    body_start = head_end + len(_HEADER_END)
    if body_start > MAX_HEADER_BYTES:
        return Framing(Verdict.HEADERS_TOO_LARGE)
    headers = _headers(buf[:head_end])
    expects = headers.get("expect", "").lower() == "100-continue"
    coding = headers.get("transfer-encoding")
    length_text = headers.get("content-length")
    if coding is not None:
        if length_text is not None or coding.lower().replace(" ", "").split(",")[-1] != "chunked":
            return Framing(Verdict.UNFRAMEABLE, header_end=body_start)
        return _chunked(buf, body_start, max_body, expects)
    if length_text is None:
        return Framing(Verdict.COMPLETE, end=body_start, header_end=body_start)
    if not length_text.isdigit() or len(length_text) > 18:
        return Framing(Verdict.UNFRAMEABLE, header_end=body_start)
    length = int(length_text)
    if length > max_body:
        return Framing(Verdict.TOO_LARGE, header_end=body_start, content_length=length)
    if len(buf) - body_start >= length:
        return Framing(Verdict.COMPLETE, end=body_start + length, header_end=body_start, content_length=length)
    return Framing(Verdict.MORE, header_end=body_start, content_length=length, expects_continue=expects)


def _headers(block: bytes) -> dict[str, str]:
    """The header fields that frame a request (a repeated field keeps its last value; the parser judges)."""
    found: dict[str, str] = {}
    for line in block.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        key = name.strip().decode("latin-1").lower()
        if key in {"content-length", "transfer-encoding", "expect"}:
            text = value.strip().decode("latin-1")
            if key in found and found[key] != text:
                return {**found, "content-length": "conflicting"}
            found[key] = text
    return found


def _chunked(buf: bytes, pos: int, max_body: int, expects: bool) -> Framing:
    """Walk the chunks from ``pos``: complete at the last chunk's trailer section."""
    header_end, size_total = pos, 0
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            if len(buf) - pos > 1024:  # a chunk-size line is short
                return Framing(Verdict.UNFRAMEABLE, header_end=header_end)
            return Framing(Verdict.MORE, header_end=header_end, expects_continue=expects)
        size_text = buf[pos:line_end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16) if size_text and len(size_text) <= 16 else -1
        except ValueError:
            size = -1
        if size < 0:
            return Framing(Verdict.UNFRAMEABLE, header_end=header_end)
        pos = line_end + 2
        if size == 0:
            if buf.startswith(b"\r\n", pos):
                return Framing(Verdict.COMPLETE, end=pos + 2, header_end=header_end)
            trailer_end = buf.find(_HEADER_END, pos - 2)
            if trailer_end < 0:
                if len(buf) - pos > MAX_HEADER_BYTES:
                    return Framing(Verdict.UNFRAMEABLE, header_end=header_end)
                return Framing(Verdict.MORE, header_end=header_end)
            return Framing(Verdict.COMPLETE, end=trailer_end + 4, header_end=header_end)
        size_total += min(size, len(buf) - pos)
        if size_total > max_body:  # more than the limit has arrived: the application reads and refuses it
            return Framing(Verdict.TOO_LARGE, header_end=header_end)
        if len(buf) < pos + size + 2:
            return Framing(Verdict.MORE, header_end=header_end, expects_continue=expects)
        if buf[pos + size : pos + size + 2] != b"\r\n":
            return Framing(Verdict.UNFRAMEABLE, header_end=header_end)
        pos += size + 2
