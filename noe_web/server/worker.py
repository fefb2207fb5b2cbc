"""The serving worker: one event loop reads every request whole, request threads answer them.

Why not gunicorn's gthread as it is: gthread hands every accepted connection
to a request thread, which does the TLS handshake and reads the request with
blocking calls; a few dozen clients that send half a ClientHello, half the
headers, or announce a body and stall held every request thread, and the API
server failed open (issue 13). Here a request thread never waits for a client:

* the event loop (one thread, ``epoll``) accepts, does the TLS handshake and
  reads requests without blocking, until :func:`noe_web.server.framing.frame`
  says one is complete. Each connection has :data:`CLIENT_TIMEOUT` seconds of
  wall-clock time, from accept (or from the first byte of its next request on
  a kept-alive connection), to complete the handshake and send the request —
  dripping one byte at a time does not extend it;
* a request thread then builds the environ from the head the loop parsed,
  calls the WSGI application and writes the response in one ``send``
  (:mod:`noe_web.server.exchange`); a client that does not read its response has
  :data:`WRITE_TIMEOUT` seconds before the connection is dropped;
* requests pipelined on one connection are answered one after the other, in
  order: the bytes read past a request stay in the connection's buffer and are
  framed as soon as its answer is written;
* what the worker refuses itself (a malformed head, headers over 64 KiB,
  ambiguous framing) is answered with the same JSON body as every other
  refusal, ``{"code", "reason", "message"}``, and the connection closed.

Cost, measured (bench/bench_throughput.py): each connection is registered
once, ``EPOLLONESHOT``, and re-armed with one ``epoll_ctl`` by the thread that
answered it — no unregister/register pair, no wake-up of the loop per
request — and the head is parsed once, not by the loop and again by
gunicorn's parser.

Kept from gunicorn: the arbiter (workers, signals, heartbeat, graceful
stop), its TLS context hook, its access log.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import io
import os
import queue
import select
import socket
import ssl
import threading
import time
from typing import Any

from gunicorn.sock import ssl_context
from gunicorn.workers.base import Worker
from gunicorn.workers.gthread import PollableMethodQueue

from noe_web.server.exchange import Response, UnreadableBody, build_environ, error_response, run_app
from noe_web.server.framing import Framing, RequestHead, RequestRejected, Verdict, frame

CLIENT_TIMEOUT = 5.0
WRITE_TIMEOUT = 10.0
WORKER_CONNECTIONS = 4096  # connections per worker (hostile ones included) before accept pauses
STOP_LINGER = 2.0  # a stopping worker keeps idle kept-alive connections this long, for a request under way
CLOSE_LINGER = 2.0  # after a last response, what the client still sends is read and dropped this long
_LINGER_BYTES = 64 * 1024
"""At least this much of what a client still sends after the last response is read and dropped (and at least
the body limit: a client refused for a too-large body is still sending it, and closing on unread bytes resets
the connection, which can destroy the answer before the client reads it)."""
_RECV = 64 * 1024
_DEFAULT_MAX_BODY = 3 * 1024 * 1024
_DRAIN_FACTOR = 4  # a too-large body up to this many times the limit is read and discarded, then answered
_SWEEP = 0.5  # seconds between looks for connections past their deadline
_HEARTBEAT = 1.0  # seconds between notes to the arbiter that this worker is alive
_READ = select.EPOLLIN | select.EPOLLONESHOT
_WRITE = select.EPOLLOUT | select.EPOLLONESHOT


class _Conn:
    """One client connection.

    Owned by the event loop while it reads (``serving`` false) and by one
    request thread while that answers (``serving`` true; the socket is then
    disarmed, so the loop never touches it). ``lock`` orders a thread's hand-back
    against the loop's sweep of expired connections.
    """

    __slots__ = (
        "buf",
        "client",
        "continued",
        "deadline",
        "discard_head",
        "discard_left",
        "fd",
        "handshaken",
        "head",
        "idle",
        "linger_left",
        "lingering",
        "lock",
        "server",
        "serving",
        "sock",
    )

    def __init__(self, sock: socket.socket, client: Any, server: Any, deadline: float, *, handshaken: bool) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.client, self.server = client, server
        self.buf: bytes | bytearray = b""
        self.head: RequestHead | None = None  # the head of the request being read, once parsed
        self.deadline = deadline
        self.handshaken = handshaken
        self.continued = False  # "100 Continue" sent for the request being read
        self.discard_left = 0  # body bytes of a too-large request still to read and drop
        self.discard_head: RequestHead | None = None
        self.idle = False  # kept alive, no byte of a next request yet
        self.serving = False
        self.lingering = False  # answered for the last time: reading and dropping what still comes
        self.linger_left = 0
        self.lock = threading.Lock()


class GuardedThreadWorker(Worker):  # type: ignore[misc]
    """Request reads in one event loop under a wall-clock limit; answers on request threads."""

    alive: bool  # gunicorn's Worker: false once the worker is told to stop

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.worker_connections = self.cfg.worker_connections
        self.nr_conns = 0
        self._conns: dict[int, _Conn] = {}
        self._jobs: queue.SimpleQueue[tuple[_Conn, RequestHead, io.BytesIO, bool] | None] = queue.SimpleQueue()
        self._wake = PollableMethodQueue()  # request threads → the loop (closing, pipelined bytes)
        self._accepting = False
        self._next_sweep = 0.0
        self._next_heartbeat = 0.0
        self._max_body = _DEFAULT_MAX_BODY
        self._listeners: dict[int, tuple[Any, Any]] = {}

    # -- the loop ----------------------------------------------------------------------------------------

    def run(self) -> None:
        self._max_body = self._configured_max_body()
        self._epoll = select.epoll()
        self._wake.init()
        self._epoll.register(self._wake.fileno(), select.EPOLLIN)
        self._epoll.register(self.PIPE[0], select.EPOLLIN)  # signals wake the loop (set_wakeup_fd)
        for listener in self.sockets:
            listener.setblocking(False)
            self._listeners[listener.fileno()] = (listener, listener.getsockname())
        threads = [
            threading.Thread(target=self._request_thread, name=f"noe-request-{i}", daemon=True)
            for i in range(self.cfg.threads)
        ]
        for thread in threads:
            thread.start()
        try:
            while self.alive:
                now = self._tick()
                self._set_accepting(self.nr_conns < self.worker_connections)
                self._dispatch(self._epoll.poll(_SWEEP))
                self._sweep(now)
            self._stop()
        finally:
            for _ in threads:
                self._jobs.put(None)
            self._epoll.close()
            self._wake.close()

    def _tick(self) -> float:
        """Tell the arbiter this worker is alive, and see that the arbiter is, once a second (not per event)."""
        now = time.monotonic()
        if now >= self._next_heartbeat:
            self.notify()
            self._next_heartbeat = now + _HEARTBEAT
            if self.alive and self.ppid != os.getppid():
                self.log.info("Parent changed, shutting down: %s", self)
                self.alive = False
        return now

    def _stop(self) -> None:
        """Stop accepting; answer what is under way (with ``Connection: close``), then close everything."""
        self._set_accepting(False)
        now = time.monotonic()
        for conn in self._conns.values():
            if not conn.serving and not conn.buf:
                conn.deadline = min(conn.deadline, now + STOP_LINGER)
        end = now + self.cfg.graceful_timeout
        while self._conns and time.monotonic() < end:
            self._dispatch(self._epoll.poll(0.2))
            self._sweep(self._tick(), force=True)
        for conn in list(self._conns.values()):
            self._close(conn)

    def _dispatch(self, events: list[tuple[int, int]]) -> None:
        for fd, _ in events:
            conn = self._conns.get(fd)
            if conn is not None:
                self._on_ready(conn)
            elif fd in self._listeners:
                self._accept(self._listeners[fd])
            elif fd == self._wake.fileno():
                self._wake.run_callbacks(None)
            else:
                with contextlib.suppress(OSError):
                    os.read(fd, 4096)  # the signal wake-up byte; the handler already ran

    def _set_accepting(self, enabled: bool) -> None:
        if enabled == self._accepting:
            return
        for fd in self._listeners:
            if enabled:
                self._epoll.register(fd, select.EPOLLIN)
            else:
                self._epoll.unregister(fd)
        self._accepting = enabled

    def _accept(self, listener: tuple[Any, Any]) -> None:
        try:
            raw, client = listener[0].accept()
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                return
            raise
        raw.setblocking(False)
        sock = raw
        if self.cfg.is_ssl:
            sock = ssl_context(self.cfg).wrap_socket(
                raw,
                server_side=True,
                do_handshake_on_connect=False,
                suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
            )
        conn = _Conn(sock, client, listener[1], time.monotonic() + CLIENT_TIMEOUT, handshaken=not self.cfg.is_ssl)
        self.nr_conns += 1
        self._conns[conn.fd] = conn
        self._epoll.register(conn.fd, _READ)

    def _sweep(self, now: float, *, force: bool = False) -> None:
        """Close the connections past their deadline that no request thread holds."""
        if now < self._next_sweep and not force:
            return
        self._next_sweep = now + _SWEEP
        for conn in list(self._conns.values()):
            if conn.deadline <= now and not conn.serving:
                with conn.lock:
                    if not conn.serving:
                        self._close(conn)

    # -- reading (the loop) ------------------------------------------------------------------------------

    def _on_ready(self, conn: _Conn) -> None:
        if conn.lingering:
            self._linger(conn)
            return
        sock = conn.sock
        try:
            if not conn.handshaken and isinstance(sock, ssl.SSLSocket):
                sock.do_handshake()
                conn.handshaken = True
            data = sock.recv(_RECV)
            while data and isinstance(sock, ssl.SSLSocket) and sock.pending():
                data += sock.recv(_RECV)
        except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            self._arm(conn, _READ)
            return
        except ssl.SSLWantWriteError:
            self._arm(conn, _WRITE)
            return
        except (OSError, ValueError):  # reset, bad handshake, closed: nothing to answer
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        if conn.discard_left:
            self._discard(conn, data)
            return
        if conn.idle:  # the first byte of a next request: it has CLIENT_TIMEOUT to arrive whole
            conn.idle = False
            conn.deadline = time.monotonic() + CLIENT_TIMEOUT
        if conn.buf:
            if isinstance(conn.buf, bytes):
                conn.buf = bytearray(conn.buf)
            conn.buf += data
        else:
            conn.buf = data
        self._advance(conn)

    def _advance(self, conn: _Conn) -> None:
        """Act on what the buffer holds: wait for more, hand a whole request over, or refuse."""
        framing = frame(conn.buf, self._max_body, conn.head)
        verdict, head = framing.verdict, framing.head
        if verdict is Verdict.MORE:
            conn.head = head
            if framing.expects_continue and not conn.continued:
                conn.continued = True
                try:
                    conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                except OSError:
                    self._close(conn)
                    return
            self._arm(conn, _READ)
        elif verdict is Verdict.COMPLETE and head is not None:
            self._hand_over(conn, head, io.BytesIO(framing.body), framing.end, close=False)
        elif verdict is Verdict.TOO_LARGE and head is not None:
            self._too_large(conn, framing, head)
        elif verdict is Verdict.UNFRAMEABLE and head is not None:  # a head that is fine, chunks that are not
            self._hand_over(conn, head, UnreadableBody(framing.body, framing.body_error), len(conn.buf), close=True)
        elif framing.error is not None:
            self._refuse(conn, framing.error)
        else:
            self._refuse(conn, RequestRejected(431, "headers_too_large", "the request headers are larger than 64 KiB"))

    def _too_large(self, conn: _Conn, framing: Framing, head: RequestHead) -> None:
        """The application answers a too-large body; an announced one not far over is read and dropped first,
        so that the client, still sending it, reads the answer rather than a reset."""
        length = head.content_length
        arrived = len(conn.buf) - head.body_start
        if head.chunked or length is None or length > _DRAIN_FACTOR * self._max_body or head.expects_continue:
            # chunked (over the limit already), hopeless, or a client that waits for "100 Continue" to send it
            self._hand_over(conn, head, io.BytesIO(framing.body), len(conn.buf), close=True)
            return
        if arrived >= length:
            self._hand_over(conn, head, io.BytesIO(), head.body_start + length, close=True)
            return
        conn.discard_left, conn.discard_head = length - arrived, head
        conn.buf, conn.head = b"", None
        self._arm(conn, _READ)

    def _discard(self, conn: _Conn, data: bytes) -> None:
        dropped = min(len(data), conn.discard_left)
        conn.discard_left -= dropped
        if conn.discard_left or conn.discard_head is None:
            self._arm(conn, _READ)
            return
        head, conn.discard_head = conn.discard_head, None
        conn.buf = data[dropped:]
        self._hand_over(conn, head, io.BytesIO(), 0, close=True)

    def _hand_over(self, conn: _Conn, head: RequestHead, body: io.BytesIO, end: int, *, close: bool) -> None:
        """Give the request to a request thread; the bytes past ``end`` stay for the next request."""
        conn.buf = conn.buf[end:]
        conn.head = None
        conn.continued = False
        conn.serving = True
        self._jobs.put((conn, head, body, close))

    def _refuse(self, conn: _Conn, error: RequestRejected) -> None:
        """Answer a request the worker cannot hand over (JSON, like every refusal), then close."""
        self.log.warning("Invalid request from ip=%s: %s", _host(conn.client), error.message)
        with contextlib.suppress(OSError):
            conn.sock.send(error_response(error.status, error.reason, error.message))
        self._end(conn)

    def _arm(self, conn: _Conn, events: int) -> None:
        self._epoll.modify(conn.fd, events)

    # -- closing (the loop) ------------------------------------------------------------------------------

    def _end(self, conn: _Conn) -> None:
        """After the last response: send FIN, then read and drop what the client still sends, for a while
        (closing with unread bytes would reset the connection and could destroy the response in flight)."""
        conn.serving = False
        if self._conns.get(conn.fd) is not conn:
            return
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.lingering, conn.linger_left = True, max(_LINGER_BYTES, self._max_body)
        conn.deadline = time.monotonic() + CLOSE_LINGER
        self._arm(conn, _READ)

    def _linger(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            self._arm(conn, _READ)
            return
        except OSError:
            data = b""
        conn.linger_left -= len(data)
        if not data or conn.linger_left <= 0:
            self._close(conn)
        else:
            self._arm(conn, _READ)

    def _close(self, conn: _Conn) -> None:
        if self._conns.get(conn.fd) is conn:
            del self._conns[conn.fd]
            self.nr_conns -= 1
        with contextlib.suppress(OSError):
            conn.sock.close()  # also leaves the epoll set

    def _resume(self, conn: _Conn) -> None:
        """Frame the bytes a request thread left in the buffer (requests pipelined behind the one answered)."""
        if self._conns.get(conn.fd) is conn and not conn.serving:
            self._advance(conn)

    # -- answering (request threads) ---------------------------------------------------------------------

    def _request_thread(self) -> None:
        while (job := self._jobs.get()) is not None:
            conn, head, body, close = job
            keep = self._answer(conn, head, body, close=close or not self.alive)
            if not keep:
                self._wake.defer(self._end, conn)
                continue
            with conn.lock:
                conn.serving = False
                if conn.buf:
                    conn.deadline = time.monotonic() + CLIENT_TIMEOUT
                    self._wake.defer(self._resume, conn)
                else:
                    conn.idle = True
                    conn.deadline = time.monotonic() + (self.cfg.keepalive if self.alive else STOP_LINGER)
                    with contextlib.suppress(OSError, ValueError):  # closed meanwhile by a stopping worker
                        self._arm(conn, _READ)

    def _answer(self, conn: _Conn, head: RequestHead, body: io.BytesIO, *, close: bool) -> bool:
        """Run the application on one request and write its response; whether the connection stays open."""
        started = time.monotonic()
        environ = build_environ(
            head,
            body,
            client=conn.client,
            server=conn.server,
            url_scheme="https" if self.cfg.is_ssl else "http",
            multiprocess=self.cfg.workers > 1,
        )
        response = Response(lambda data: self._send(conn, data), head, close=close)
        try:
            run_app(self.wsgi, environ, response)
        except (OSError, TimeoutError):  # the client went away or does not read
            return False
        except Exception:
            self.log.exception("Error handling request %s %s", head.method, head.target)
            if not response.headers_sent:
                with contextlib.suppress(OSError, TimeoutError):
                    self._send(conn, error_response(500, "internal_error", "the server failed to answer the request"))
            return False
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
        self.log.access(response, head.headers, environ, dt.timedelta(seconds=time.monotonic() - started))
        return not response.close

    def _send(self, conn: _Conn, data: bytes) -> None:
        """All of ``data`` on the non-blocking socket, waiting at most WRITE_TIMEOUT for a client that reads slowly."""
        sock, view = conn.sock, memoryview(data)
        deadline = 0.0
        while view:
            try:
                view = view[sock.send(view) :]
                continue
            except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                wanted = select.POLLOUT
            except ssl.SSLWantReadError:
                wanted = select.POLLIN
            now = time.monotonic()
            deadline = deadline or now + WRITE_TIMEOUT
            poller = select.poll()
            poller.register(conn.fd, wanted)
            if deadline <= now or not poller.poll((deadline - now) * 1000):
                raise TimeoutError("the client does not read its response")

    def _configured_max_body(self) -> int:
        extensions = getattr(self.wsgi, "extensions", None)
        services = extensions.get("noe") if isinstance(extensions, dict) else None
        value = getattr(services, "max_body_bytes", None)
        return value if isinstance(value, int) and value > 0 else _DEFAULT_MAX_BODY


def _host(client: Any) -> str:
    return str(client[0]) if isinstance(client, tuple) and client else str(client)
