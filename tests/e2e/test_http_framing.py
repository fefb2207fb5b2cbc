"""HTTP/1.1 on the wire of a real ``noe serve``: raw bytes over TLS in, the exact answers out.

Issue 19: 50 requests pipelined in one write got one answer (the worker handed a
request over and left the bytes behind it unserved), and an HTTP/1.0 POST
without Content-Length got gunicorn's HTML 400 where every other malformed
request gets the JSON ``{"code", "reason", "message"}``. Each test here opens
its own TLS connection, writes bytes as a client would, and reads every byte
the server sends until it closes or stops answering.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from noe_core.testing import admission_review, pod
from tests.support.noe_serve import NoeProcess, start_noe

pytestmark = pytest.mark.e2e

IMAGE = "static.example/app:1"
MAX_BODY = 64 * 1024


@dataclass
class Answer:
    status_line: bytes
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def status(self) -> int:
        return int(self.status_line.split(b" ")[1])

    def json(self) -> dict[str, object]:
        doc: dict[str, object] = json.loads(self.body)
        return doc


class Wire:
    """One TLS connection: write bytes, read HTTP/1.1 answers one by one off the stream."""

    def __init__(self, noe: NoeProcess) -> None:
        context = ssl.create_default_context(cafile=str(noe.ca_file))
        raw = socket.create_connection(("127.0.0.1", noe.port), timeout=10)
        self.tls = context.wrap_socket(raw, server_hostname="localhost")
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.tls.sendall(data)

    def _fill(self) -> bool:
        data = self.tls.recv(65536)
        self.buf += data
        return bool(data)

    def answer(self, *, to_head: bool = False) -> Answer:
        """The next answer; ``to_head``: it answers a HEAD request (no body, whatever its length says)."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise AssertionError(f"the connection closed before an answer; read {self.buf!r}")
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status_line, *lines = head.split(b"\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(b":")
            headers[name.decode().lower()] = value.strip().decode()
        assert "transfer-encoding" not in headers, headers  # every answer here has a length
        length = 0 if to_head else int(headers["content-length"])
        while len(self.buf) < length:
            if not self._fill():
                raise AssertionError("the connection closed in the middle of a body")
        body, self.buf = self.buf[:length], self.buf[length:]
        return Answer(status_line, headers, body)

    def closed(self) -> bool:
        """Whether the server closes the connection with nothing more to say."""
        try:
            more = self._fill()
        except (ConnectionResetError, ssl.SSLError):
            more = False
        return not more and not self.buf

    def close(self) -> None:
        self.tls.close()


@pytest.fixture(scope="module")
def noe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NoeProcess]:
    work = tmp_path_factory.mktemp("http-framing")
    platforms = work / "platforms.json"
    platforms.write_text(json.dumps({IMAGE: ["linux/amd64", "linux/arm64"]}))
    proc = start_noe(
        work,
        [
            "--image-platforms",
            str(platforms),
            "--workers",
            "1",
            "--threads",
            "4",
            "--max-body-bytes",
            str(MAX_BODY),
            "--state-dir",
            str(work / "state"),
        ],
        None,
    )
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def wire(noe: NoeProcess) -> Iterator[Wire]:
    connection = Wire(noe)
    yield connection
    connection.close()


def _review(uid: str) -> bytes:
    return json.dumps(admission_review(pod([IMAGE], name=f"pod-{uid}"), uid=uid)).encode()


def post(body: bytes, *, version: bytes = b"HTTP/1.1", extra: bytes = b"") -> bytes:
    return (
        b"POST /mutate " + version + b"\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n" % len(body) + extra + b"\r\n" + body
    )


def get(path: bytes, *, method: bytes = b"GET") -> bytes:
    return method + b" " + path + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"


def _assert_admitted(answer: Answer, uid: str) -> None:
    assert answer.status_line == b"HTTP/1.1 200 OK", answer
    assert answer.headers["content-type"] == "application/json"
    response = answer.json()["response"]
    assert isinstance(response, dict)
    assert response["uid"] == uid and response["allowed"] is True and "patch" in response, response


def _assert_json_refusal(answer: Answer, status: int, reason: str) -> None:
    assert answer.status == status, answer
    assert answer.headers["content-type"] == "application/json", answer.headers
    assert answer.body.endswith(b"\n")
    doc = answer.json()
    assert doc["code"] == status and doc["reason"] == reason, doc
    assert isinstance(doc["message"], str) and doc["message"]


# ----------------------------------------------------------------------------- pipelining


def test_fifty_posts_pipelined_in_one_write_get_fifty_answers_in_order(wire: Wire) -> None:
    uids = [f"pipelined-{i:02d}" for i in range(50)]
    wire.send(b"".join(post(_review(uid)) for uid in uids))
    for uid in uids:
        answer = wire.answer()
        _assert_admitted(answer, uid)
        assert "connection" not in answer.headers  # HTTP/1.1: the connection stays open
    wire.send(get(b"/livez"))  # and still serves
    assert wire.answer().body == b"ok\n"


def test_pipelined_mix_of_probes_and_admissions_is_answered_in_order(wire: Wire) -> None:
    requests = [
        get(b"/readyz"),
        post(_review("mix-1")),
        get(b"/livez"),
        get(b"/readyz"),
        post(_review("mix-2")),
        get(b"/livez", method=b"HEAD"),  # no body in its answer: the next answer must still line up
        post(_review("mix-3")),
    ]
    wire.send(b"".join(requests))
    ready = wire.answer()
    assert ready.status == 200 and ready.json()["status"] == "ready"
    _assert_admitted(wire.answer(), "mix-1")
    assert wire.answer().body == b"ok\n"
    assert wire.answer().json()["status"] == "ready"
    _assert_admitted(wire.answer(), "mix-2")
    head = wire.answer(to_head=True)
    assert head.status == 200 and head.headers["content-length"] == "3" and head.body == b""
    _assert_admitted(wire.answer(), "mix-3")


def test_requests_split_across_writes_and_pipelined_behind_a_body(wire: Wire) -> None:
    first, second = post(_review("split-1")), post(_review("split-2"))
    wire.send(first[:40])
    wire.send(first[40:] + second[:100])  # the first ends mid-write, the second starts behind it
    _assert_admitted(wire.answer(), "split-1")
    wire.send(second[100:])
    _assert_admitted(wire.answer(), "split-2")


# ----------------------------------------------------------------------------- framing


def test_http10_post_without_content_length_is_a_json_400_and_closes(wire: Wire) -> None:
    head = b"POST /mutate HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n\r\n"
    wire.send(head + _review("http10"))  # a body meant to end when the client closes
    answer = wire.answer()
    _assert_json_refusal(answer, 400, "empty")
    assert answer.status_line.startswith(b"HTTP/1.0 400")
    assert answer.headers["connection"] == "close"
    assert wire.closed()


def test_http11_post_without_length_is_a_json_400_that_closes_before_the_stray_body(wire: Wire) -> None:
    """No Content-Length, no chunking: an empty body (RFC 9112 6.3); the bytes behind it are never a request."""
    wire.send(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\r\n")
    wire.send(_review("no-length"))
    answer = wire.answer()
    _assert_json_refusal(answer, 400, "empty")
    assert answer.headers["connection"] == "close"
    assert wire.closed()  # one answer, not a second one for the body read as a request


def test_chunked_body_and_keep_alive(wire: Wire) -> None:
    body = _review("chunked")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:100], body[100:]))
    wire.send(
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n" + post(_review("after-chunked"))
    )
    _assert_admitted(wire.answer(), "chunked")
    _assert_admitted(wire.answer(), "after-chunked")


def test_expect_100_continue_then_the_body(wire: Wire) -> None:
    body = _review("continue")
    head = post(body, extra=b"Expect: 100-continue\r\n")[: -len(body)]
    wire.send(head)
    while b"\r\n\r\n" not in wire.buf:
        assert wire._fill()
    interim, _, wire.buf = wire.buf.partition(b"\r\n\r\n")
    assert interim == b"HTTP/1.1 100 Continue"
    wire.send(body)
    _assert_admitted(wire.answer(), "continue")


def test_too_large_body_is_read_and_answered(wire: Wire) -> None:
    body = b'{"a": "' + b"x" * (2 * MAX_BODY) + b'"}'
    wire.send(post(body))
    answer = wire.answer()
    _assert_json_refusal(answer, 400, "too_large")
    assert answer.headers["connection"] == "close"
    assert wire.closed()


# ----------------------------------------------------------------------------- what the worker refuses itself


@pytest.mark.parametrize(
    ("request_bytes", "status", "reason"),
    [
        (b"GARBAGE\r\n\r\n", 400, "malformed_request_line"),
        (b"GET /livez HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, "http_version_not_supported"),
        (b"GET /livez HTTP/1.1\r\n\r\n", 400, "bad_host"),
        (b"GET /livez HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "bad_host"),
        (b"GET /livez HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n", 400, "malformed_header"),
        (b"GET /livez HTTP/1.1\r\nHost: localhost\r\nX-A: 1\r\n folded\r\n\r\n", 400, "malformed_header"),
        (b"GET /livez HTTP/1.1\r\nHost : localhost\r\n\r\n", 400, "malformed_header"),
        (b"GET /livez HTTP/1.1\r\nHost: local\x00host\r\n\r\n", 400, "malformed_request"),
        (
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
            "ambiguous_length",
        ),
        (b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2, 2\r\n\r\n{}", 400, "ambiguous_length"),
        (
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501,
            "unsupported_transfer_coding",
        ),
        (b"GET /livez HTTP/1.1\r\nHost: localhost\r\nExpect: magic\r\n\r\n", 417, "expectation_failed"),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414, "uri_too_long"),
        (b"GET /livez HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "headers_too_large"),
    ],
    ids=[
        "garbage",
        "http2-version",
        "no-host",
        "two-hosts",
        "no-colon",
        "obs-fold",
        "space-before-colon",
        "nul",
        "length-and-chunked",
        "length-list",
        "gzip-coding",
        "unknown-expectation",
        "long-target",
        "huge-headers",
    ],
)
def test_malformed_requests_get_the_json_refusal_and_the_connection_closes(
    wire: Wire, request_bytes: bytes, status: int, reason: str
) -> None:
    wire.send(request_bytes)
    answer = wire.answer()
    _assert_json_refusal(answer, status, reason)
    assert answer.headers["connection"] == "close"
    assert wire.closed()


def test_a_malformed_request_pipelined_behind_good_ones_is_refused_after_them(wire: Wire) -> None:
    wire.send(post(_review("before-garbage")) + get(b"/livez") + b"NOT HTTP AT ALL\r\n\r\n" + get(b"/livez"))
    _assert_admitted(wire.answer(), "before-garbage")
    assert wire.answer().body == b"ok\n"
    _assert_json_refusal(wire.answer(), 400, "malformed_request_line")
    assert wire.closed()  # the request behind the garbage is not served: where it starts is unknown


def test_the_server_still_serves_after_all_this(noe: NoeProcess) -> None:
    with noe.session() as http, http.post(noe.url + "/mutate", data=_review("last"), timeout=10) as resp:
        assert resp.status_code == 200 and resp.json()["response"]["uid"] == "last"
    assert "Traceback" not in noe.output()
