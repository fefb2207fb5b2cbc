"""The stand-in cluster with large resources served from bytes prepared before the clock starts.

:func:`start_served_cluster` is :func:`~tests.support.fake_cluster.start_fake_cluster` where the
resources given to :meth:`ServedCluster.serve` (tens of thousands of pods) are never stored as
objects: each item is serialised once, pages of ``page_size`` are joined once, and a streaming
list's ``ADDED`` lines too, so a list costs the stand-in a socket write and a benchmark measures
its client, not the stand-in. The read options are those of the stand-in (``resourceVersion``,
``resourceVersionMatch``, ``limit``/``continue``, ``sendInitialEvents`` with ``watch_list``,
``cache_ignores_limit``), checked and recorded by the same code. Served resources do not change:
their watches carry bookmarks only.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.certs import CA
from tests.support.fake_cluster import KINDS, ClusterHandler, ClusterState, FakeCluster
from tests.support.fake_kube_api import EXACT, STREAM, _status, read_kind, start_fake_kube_api

_COMPACT = {"separators": (",", ":")}


@dataclass
class Served:
    """One resource's items as bytes, with its pages for one ``limit`` and its streaming list joined ahead."""

    kind: str
    version: int
    items: list[bytes]
    page_size: int
    pages: dict[int, bytes] = field(default_factory=dict)
    stream: bytes = b""

    def body(self, start: int, limit: int) -> bytes:
        """The list answer from item ``start``: ``limit`` items (all when 0), with a continue token if more."""
        if limit == self.page_size and start in self.pages:
            return self.pages[start]
        end = len(self.items) if not limit else min(len(self.items), start + limit)
        metadata: dict[str, Any] = {"resourceVersion": str(self.version)}
        if end < len(self.items):
            metadata["continue"] = base64.b64encode(f"served:{self.version}:{end}".encode()).decode()
            metadata["remainingItemCount"] = len(self.items) - end
        head = json.dumps({"kind": KINDS[self.kind] + "List", "apiVersion": "v1", "metadata": metadata}, **_COMPACT)
        return head[:-1].encode() + b',"items":[' + b",".join(self.items[start:end]) + b"]}"


def prepare(kind: str, objects: Iterable[dict[str, Any]], version: int, page_size: int) -> Served:
    items = [
        json.dumps({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}, **_COMPACT).encode()
        for obj in objects
    ]
    served = Served(kind, version, items, page_size)
    for start in range(0, max(len(items), 1), page_size):
        served.pages[start] = served.body(start, page_size)
    # the stand-in's watch events carry the objects as the list does (without kind): enough for every client here
    bookmark = {
        "type": "BOOKMARK",
        "object": {
            "kind": KINDS[kind],
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(version), "annotations": {"k8s.io/initial-events-end": "true"}},
        },
    }
    served.stream = (
        b"".join(b'{"type":"ADDED","object":' + item + b"}\n" for item in items)
        + json.dumps(bookmark, **_COMPACT).encode()
        + b"\n"
    )
    return served


@dataclass
class ServedState(ClusterState):
    served: dict[str, Served] = field(default_factory=dict)


class ServedHandler(ClusterHandler):
    def _list_or_watch(self, kind: str, query: dict[str, str], namespace: str = "") -> None:
        served = self.server.state.served.get(kind)
        if served is None or namespace:
            super()._list_or_watch(kind, query, namespace)
        elif query.get("watch") in ("1", "true"):
            self._watch_served(served, query)
        else:
            self._list_served(served, query)

    def _raw(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _list_served(self, served: Served, query: dict[str, str]) -> None:
        if self._refuse_read(served.kind, query, watch=False, current=self.cluster.rv):
            return
        version = query.get("resourceVersion", "")
        if read_kind(query, watch=False) == EXACT and int(version) != served.version:
            self._answer_read(served.kind, query, False, 410, _status(410, "Expired", "too old resource version"))
            return
        start, limit = 0, int(query.get("limit") or 0)
        if query.get("continue"):
            start = int(base64.b64decode(query["continue"]).decode().rsplit(":", 1)[1])
        if version == "0" and self.cluster.cache_ignores_limit:
            limit = 0
        self._answer_read(served.kind, query, False, 200, None)
        self._raw(200, served.body(start, limit))

    def _watch_served(self, served: Served, query: dict[str, str]) -> None:
        state = self.cluster
        if self._refuse_read(served.kind, query, watch=True, current=state.rv):
            return
        self._answer_read(served.kind, query, True, 200, None)
        end = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if read_kind(query, watch=True) == STREAM:
                self.wfile.write(f"{len(served.stream):x}\r\n".encode() + served.stream + b"\r\n")
                self.wfile.flush()
            while time.monotonic() < end and not state.stopping:
                time.sleep(min(state.bookmark_interval, max(0.0, end - time.monotonic())))
                bookmark = {"kind": KINDS[served.kind], "metadata": {"resourceVersion": str(served.version)}}
                self._chunk({"type": "BOOKMARK", "object": bookmark})
        except OSError:
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True


@dataclass
class ServedCluster(FakeCluster):
    state: ServedState

    def serve(self, kind: str, objects: Iterable[dict[str, Any]], *, page_size: int = 500) -> int:
        """Serve ``objects`` as ``kind`` from prepared bytes; how many there are."""
        with self.state.lock:
            version = self.state.rv
        served = prepare(kind, objects, version, page_size)
        with self.state.lock:
            self.state.served[kind] = served
        return len(served.items)


@contextmanager
def start_served_cluster(ca: CA, *, tokens: tuple[str, ...] = ()) -> Iterator[ServedCluster]:
    state = ServedState()
    with start_fake_kube_api(ca, tokens=tokens, handler=ServedHandler, state=state) as api:
        yield ServedCluster(api, state)
