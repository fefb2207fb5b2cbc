"""A TCP relay in front of a real server that can hang: it accepts connections and, while closed,
never answers a byte (a registry that hangs); once opened, new connections are piped to the upstream.

    with start_relay("127.0.0.1:5000") as relay:   # relay.host is "127.0.0.1:PORT"
        ...                                        # lookups through relay.host hang
        relay.open()                               # from now on they reach the registry
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Relay:
    listener: socket.socket
    upstream: tuple[str, int]
    opened: threading.Event = field(default_factory=threading.Event)
    held: list[socket.socket] = field(default_factory=list)
    closed: bool = False

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.listener.getsockname()[1]}"

    def open(self) -> None:
        self.opened.set()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def _serve(relay: Relay) -> None:
    while True:
        try:
            conn, _ = relay.listener.accept()
        except OSError:
            return
        if relay.closed:
            conn.close()
            return
        if not relay.opened.is_set():
            relay.held.append(conn)  # never answered; the client gives up at its deadline
            continue
        try:
            up = socket.create_connection(relay.upstream, timeout=5)
        except OSError:
            conn.close()
            continue
        up.settimeout(None)
        threading.Thread(target=_pipe, args=(conn, up), daemon=True).start()
        threading.Thread(target=_pipe, args=(up, conn), daemon=True).start()


@contextlib.contextmanager
def start_relay(upstream: str) -> Iterator[Relay]:
    host, port = upstream.rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    relay = Relay(listener, (host, int(port)))
    thread = threading.Thread(target=_serve, args=(relay,), daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        relay.closed = True
        listener.close()
        thread.join(2)
        for conn in relay.held:
            conn.close()
