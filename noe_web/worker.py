"""gunicorn's gthread worker with TLS handshakes and request reads moved into its event loop.

Why: gthread hands every accepted connection to a request thread, which then
does the TLS handshake and reads the request with blocking, untimed socket
calls (gunicorn 27 only waits 5 s for the *first* byte). A few dozen clients
that send half a ClientHello, half the headers, or announce a body and stall
held every request thread, so ``/readyz`` and admissions waited for them and
the API server failed open. Here the worker's main loop (a selector, one
thread) does the handshake and reads each request without blocking, until
:func:`noe_web.request_framing.frame` says it is complete; only then does a
request thread take it, with the whole request already in memory, so no
request thread ever waits for a client. Each connection has
:data:`CLIENT_TIMEOUT` seconds of wall-clock time, from accept (or from its
next request on a kept-alive connection), to complete the handshake and send
the request — dripping one byte at a time does not extend it.

Kept: Flask, gunicorn's arbiter, its request parser and its response writer.
Changed: only how a connection reaches a request thread.
"""

from __future__ import annotations

import contextlib
import errno
import json
import selectors
import ssl
import time
from collections import deque
from functools import partial
from typing import Any

from gunicorn import http, sock
from gunicorn.workers.gthread import TConn, ThreadWorker

from noe_web.request_framing import Framing, Verdict, frame

CLIENT_TIMEOUT = 5.0
WORKER_CONNECTIONS = 4096  # connections per worker (hostile ones included) before accept pauses
_RECV = 64 * 1024
_DEFAULT_MAX_BODY = 3 * 1024 * 1024
_DRAIN_FACTOR = 4  # a too-large body up to this many times the limit is read and discarded, then answered


class _Reading:
    """One connection being read by the event loop."""

    def __init__(self, conn: TConn, buf: bytes, deadline: float) -> None:
        self.conn = conn
        self.buf = bytearray(buf)
        self.deadline = deadline
        self.handshaken = not isinstance(conn.sock, ssl.SSLSocket) or conn.initialized
        self.continued = False
        self.discard_left = 0  # body bytes of a too-large request still to read and drop
        self.done = False
        self.events = 0


class GuardedThreadWorker(ThreadWorker):  # type: ignore[misc]
    """gthread, with handshakes and request reads done by the event loop under a wall-clock limit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reading: deque[_Reading] = deque()

    # -- gthread hooks -------------------------------------------------------

    def enqueue_req(self, conn: TConn) -> None:
        """Every connection (new, kept alive, or with bytes left over) is read here first."""
        if getattr(conn, "noe_ready", False):
            conn.noe_ready = False
            super().enqueue_req(conn)
            return
        leftover = b""
        if conn.parser is not None:
            leftover = conn.parser.unreader.take_buffered()
        if not conn.initialized and self.cfg.is_ssl:
            conn.sock = sock.ssl_context(self.cfg).wrap_socket(
                conn.sock,
                server_side=True,
                do_handshake_on_connect=False,
                suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
            )
        conn.sock.setblocking(False)
        state = _Reading(conn, leftover, time.monotonic() + CLIENT_TIMEOUT)
        self._reading.append(state)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_event, state))
        if state.buf:
            self._step(state)

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        while self._reading and (self._reading[0].done or self._reading[0].deadline <= now):
            state = self._reading.popleft()
            if not state.done:
                self._close(state)

    # -- the reader ----------------------------------------------------------

    def _on_event(self, state: _Reading, _fileobj: Any) -> None:
        self._step(state)

    def _step(self, state: _Reading) -> None:
        if state.done:
            return
        try:
            if not state.handshaken:
                state.conn.sock.do_handshake()
                state.handshaken = True
            self._read(state)
        except ssl.SSLWantReadError:
            self._want(state, selectors.EVENT_READ)
        except ssl.SSLWantWriteError:
            self._want(state, selectors.EVENT_WRITE)
        except (OSError, ValueError):  # reset, bad handshake, closed: nothing to answer
            self._close(state)

    def _read(self, state: _Reading) -> None:
        max_body = self._max_body()
        while True:
            try:
                data = state.conn.sock.recv(_RECV)
            except BlockingIOError:
                data = None
            if data is None:
                self._want(state, selectors.EVENT_READ)
                return
            if not data:
                self._close(state)
                return
            if state.discard_left:
                state.discard_left = max(0, state.discard_left - len(data))
                if not state.discard_left:
                    self._hand_over(state, len(state.buf))
                    return
                continue
            state.buf += data
            framing = frame(bytes(state.buf), max_body)
            if self._decide(state, framing, max_body):
                return

    def _decide(self, state: _Reading, framing: Framing, max_body: int) -> bool:
        """Act on the framing; True when this connection left the reader."""
        verdict = framing.verdict
        if verdict is Verdict.MORE:
            if framing.expects_continue and not state.continued:
                state.continued = True
                state.conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        if verdict is Verdict.COMPLETE or verdict is Verdict.UNFRAMEABLE:
            self._hand_over(state, framing.end if verdict is Verdict.COMPLETE else len(state.buf))
            return True
        if verdict is Verdict.TOO_LARGE:
            length = framing.content_length
            if length is None or length > _DRAIN_FACTOR * max_body:
                self._hand_over(state, len(state.buf))  # chunked (already over the limit) or hopeless
                return True
            received = len(state.buf) - framing.header_end
            del state.buf[framing.header_end :]
            state.discard_left = length - received
            if state.discard_left <= 0:
                self._hand_over(state, len(state.buf))
                return True
            return False
        self._reject(state)
        return True

    def _want(self, state: _Reading, event: int) -> None:
        if not state.done:
            self.poller.modify(state.conn.sock, event, partial(self._on_event, state))

    def _hand_over(self, state: _Reading, end: int) -> None:
        """The request is in ``state.buf[:end]``: give it to a request thread; never let it wait for the socket."""
        state.done = True
        self.poller.unregister(state.conn.sock)
        conn = state.conn
        request, rest = bytes(state.buf[:end]), bytes(state.buf[end:])
        conn.parser = http.get_parser(self.cfg, iter([request]), conn.client)
        if rest:
            conn.parser.unreader.unread(rest)
        conn.initialized = True
        conn.data_ready = True
        conn.noe_ready = True
        self.enqueue_req(conn)

    def _reject(self, state: _Reading) -> None:
        body = (
            json.dumps(
                {"code": 431, "reason": "headers_too_large", "message": "the request headers are larger than 64 KiB"}
            ).encode()
            + b"\n"
        )
        head = (
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            state.conn.sock.send(head + body)
        self._close(state)

    def _close(self, state: _Reading) -> None:
        state.done = True
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(state.conn.sock)
        self.nr_conns -= 1
        try:
            state.conn.close()
        except OSError as exc:
            if exc.errno not in (errno.EBADF, errno.ENOTCONN):
                raise

    def _max_body(self) -> int:
        extensions = getattr(self.wsgi, "extensions", None)
        services = extensions.get("noe") if isinstance(extensions, dict) else None
        value = getattr(services, "max_body_bytes", None)
        return value if isinstance(value, int) and value > 0 else _DEFAULT_MAX_BODY
