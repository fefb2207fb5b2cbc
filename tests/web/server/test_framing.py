"""Where a request ends: the event-loop reader hands a request to a thread only when it is whole."""

from __future__ import annotations

from noe_web.server.framing import MAX_HEADER_BYTES, Verdict, frame

HEAD = b"POST /mutate HTTP/1.1\r\nHost: x\r\n"


def test_headers_not_finished_want_more() -> None:
    assert frame(HEAD, 100).verdict is Verdict.MORE


def test_no_body() -> None:
    request = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
    framing = frame(request + b"GET /livez", 100)
    assert framing.verdict is Verdict.COMPLETE and framing.end == len(request)


def test_content_length_body_must_all_arrive() -> None:
    head = HEAD + b"Content-Length: 10\r\n\r\n"
    assert frame(head + b"12345", 100).verdict is Verdict.MORE
    framing = frame(head + b"1234567890", 100)
    assert framing.verdict is Verdict.COMPLETE and framing.end == len(head) + 10


def test_announced_body_over_the_limit_is_too_large_at_once() -> None:
    framing = frame(HEAD + b"Content-Length: 101\r\n\r\n", 100)
    assert framing.verdict is Verdict.TOO_LARGE and framing.content_length == 101


def test_chunked_body() -> None:
    head = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    assert frame(head + b"5\r\nhello\r\n", 100).verdict is Verdict.MORE
    whole = head + b"5\r\nhello\r\n0\r\n\r\n"
    assert frame(whole, 100).end == len(whole)
    with_trailer = head + b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"
    assert frame(with_trailer, 100).end == len(with_trailer)


def test_chunked_body_over_the_limit_once_the_bytes_are_there() -> None:
    head = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    assert frame(head + b"100\r\n" + b"x" * 50, 100).verdict is Verdict.MORE  # announced, not yet sent
    assert frame(head + b"100\r\n" + b"x" * 101, 100).verdict is Verdict.TOO_LARGE


def test_malformed_framing_goes_to_the_parser() -> None:
    assert frame(HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 100).verdict is Verdict.UNFRAMEABLE
    assert frame(HEAD + b"Content-Length: -1\r\n\r\n", 100).verdict is Verdict.UNFRAMEABLE
    both = HEAD + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert frame(both, 100).verdict is Verdict.UNFRAMEABLE
    twice = HEAD + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"
    assert frame(twice, 100).verdict is Verdict.UNFRAMEABLE


def test_endless_headers_are_refused() -> None:
    assert frame(HEAD + b"X: " + b"a" * MAX_HEADER_BYTES, 100).verdict is Verdict.HEADERS_TOO_LARGE
