"""An HTTP proxy in front of the real registry that pages tag lists the way distribution 3 does.

Debian's registry (CNCF distribution 2.8.2) answers ``GET /v2/<name>/tags/list``
with every tag whatever ``n`` and ``last`` say: tag-list pagination arrived in
distribution 3.0, whose handler sorts the tags, starts after ``last``, returns
at most ``n`` and, when more remain, a ``Link: </v2/<name>/tags/list?last=<last
tag of the page>&n=<n>>; rel="next"`` header (Docker Hub, GHCR and Harbor
answer alike). This proxy asks the real registry for the whole list — with the
client's own ``Authorization``, so the registry's auth still decides — and
answers one page of it. Every other request is passed through untouched, so
the real registry serves the manifests, blobs and auth challenges.

    with start_paging_proxy(registry) as proxy:
        proxy.host              # "127.0.0.1:PORT": image references go through it
        proxy.tag_pages         # the tags/list requests it answered, path and query

Only plain HTTP upstreams (the anonymous and token registries of the fixtures).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import requests

from tests.support.registry_server import RegistryServer
from tests.support.scripted_server import serving

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


@dataclass
class PagingProxy:
    upstream: str
    host: str = ""
    tag_pages: list[str] = field(default_factory=list)
    refuse_tags: int | None = None
    """When set, every tag list is answered with this status (a registry that will not list tags)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def page_of(tags: list[str], name: str, query: dict[str, list[str]]) -> tuple[list[str], str | None]:
    """One page of ``tags`` as distribution 3 answers ``?n=&last=``, and its ``Link`` header (if more remain)."""
    ordered = sorted(tags)
    last = query.get("last", [""])[0]
    if last:
        ordered = [tag for tag in ordered if tag > last]
    size = query.get("n", [""])[0]
    if not size.isdigit():
        return ordered, None
    page = ordered[: int(size)]
    if len(ordered) <= int(size) or not page:
        return page, None
    return page, f'</v2/{name}/tags/list?last={quote(page[-1])}&n={size}>; rel="next"'


@contextlib.contextmanager
def start_paging_proxy(registry: RegistryServer) -> Iterator[PagingProxy]:
    state = PagingProxy(registry.url)
    session = requests.Session()
    session.trust_env = False

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _relay(self) -> None:
            url = urlsplit(self.path)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            paging = self.command == "GET" and url.path.startswith("/v2/") and url.path.endswith("/tags/list")
            if paging and state.refuse_tags is not None:
                with state.lock:
                    state.tag_pages.append(self.path)
                self.send_response(state.refuse_tags)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                return
            target = f"{state.upstream}{url.path}" + ("" if paging or not url.query else f"?{url.query}")
            upstream = session.request(
                self.command, target, headers=headers, data=body, allow_redirects=False, timeout=30
            )
            payload = upstream.content
            reply = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            if paging:
                with state.lock:
                    state.tag_pages.append(self.path)
                if upstream.status_code == 200:
                    doc = json.loads(payload)
                    name = url.path[len("/v2/") : -len("/tags/list")]
                    tags, link = page_of(doc.get("tags") or [], name, parse_qs(url.query))
                    payload = json.dumps({"name": doc.get("name", name), "tags": tags}).encode()
                    if link is not None:
                        reply["Link"] = link
            self.send_response(upstream.status_code)
            for key, value in reply.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

        do_GET = do_HEAD = do_POST = do_PUT = _relay

    try:
        with serving(Handler) as host:
            state.host = host
            yield state
    finally:
        session.close()
