"""The worker's HTTP/1.1 head parser and framing, fuzzed: any bytes get a verdict, never an exception.

:func:`noe_web.server.framing.frame` runs in the worker's event loop on bytes
straight from the network; an exception there would stop the loop. Hypothesis
sends arbitrary bytes, and requests built from valid and invalid parts, and
checks that the verdict is consistent with the bytes: a complete request ends
inside the buffer, its body is what its framing says, and a request cut short
at any point asks for more or is refused, never completed.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_web.server.framing import RequestRejected, Verdict, frame

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=int(os.environ.get("NOE_FUZZ_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
MAX_BODY = 1000

_TOKENS = st.sampled_from([b"GET", b"POST", b"HEAD", b"PUT", b"get", b"", b"G ET", b"\x00"])
_TARGETS = st.sampled_from([b"/mutate", b"/readyz?x=1", b"*", b"http://h/p", b"", b"noslash", b"/a%20b"])
_VERSIONS = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1", b"http/1.1", b""])
_FIELDS = st.sampled_from(
    [
        b"Host: x",
        b"Content-Length: 5",
        b"Content-Length: 0",
        b"Content-Length: -1",
        b"Content-Length: 99999999999999999999",
        b"Transfer-Encoding: chunked",
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: identity",
        b"Expect: 100-continue",
        b"Connection: close",
        b"Connection: keep-alive",
        b" folded",
        b"No-Colon",
        b"Bad Name: x",
        b"X-Ctl: a\x01b",
        b"X-Empty:",
    ]
)
_BODIES = st.sampled_from([b"", b"hello", b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\n", b"3\r\nab", b"0\r\nT: 1\r\n\r\n"])


def _check(buf: bytes) -> None:
    framing = frame(buf, MAX_BODY)
    if framing.verdict is Verdict.COMPLETE:
        assert framing.head is not None
        assert framing.head.body_start <= framing.end <= len(buf)
        if framing.head.content_length is not None:
            assert framing.body == buf[framing.head.body_start : framing.end]
        assert len(framing.body) <= MAX_BODY
    if framing.verdict is Verdict.UNFRAMEABLE:
        assert (framing.error is None) != (framing.head is None)
        assert framing.error is None or isinstance(framing.error, RequestRejected)
        assert framing.error is None or framing.error.status in {400, 414, 417, 431, 501, 505}


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_get_a_verdict(data: bytes) -> None:
    _check(data)
    _check(data + b"\r\n\r\n")


@FUZZ
@given(_TOKENS, _TARGETS, _VERSIONS, st.lists(_FIELDS, max_size=6), _BODIES, st.data())
def test_requests_from_good_and_bad_parts(  # noqa: PLR0917
    method: bytes, target: bytes, version: bytes, fields: list[bytes], body: bytes, data: st.DataObject
) -> None:
    request = method + b" " + target + b" " + version + b"\r\n" + b"".join(f + b"\r\n" for f in fields) + b"\r\n" + body
    _check(request)
    whole = frame(request, MAX_BODY)
    cut = data.draw(st.integers(min_value=0, max_value=len(request)))
    if whole.verdict is Verdict.COMPLETE and cut < whole.end:
        # a prefix of a complete request is never complete itself
        assert frame(request[:cut], MAX_BODY).verdict is not Verdict.COMPLETE
