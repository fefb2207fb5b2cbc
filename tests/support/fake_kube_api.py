"""A small HTTPS server speaking the two Kubernetes API paths noe uses, for tests.

    GET  /api/v1/namespaces/NS/secrets/NAME   → the Secret put with ``add_secret``; 404/403 Status otherwise
    GET  /api/v1/nodes/NAME                   → the Node put with ``add_node``; 404, or 403 with ``nodes_forbidden``
    POST /api/v1/namespaces/NS/events         → 201, the Event recorded in ``events``
    GET  /api/v1/namespaces/NS/events         → those Events, filtered by ``fieldSelector`` (involvedObject.*)
    GET  /api/v1/[namespaces/NS/]pods, /apis/apps/v1/[namespaces/NS/]replicasets,
         /apis/batch/v1/[namespaces/NS/]jobs  → the objects put with ``add_objects``, paginated
         with ``limit`` and an opaque ``continue`` token as the API server does (items
         without ``kind``; ``expire_continue`` answers the next continued page 410 Expired)
    POST /api/v1/namespaces/NS/pods?dryRun=All → 201, the pod as admitted by ``admit`` (the mutating
                                                 webhook: AdmissionReview in, AdmissionReview out, patch applied)

Lists and watches take the API's read options as kube-apiserver does
(:func:`read_kind` classifies them, :func:`invalid_options` refuses what its
``ValidateListOptions`` refuses with 422): ``resourceVersion`` unset is a
consistent read; ``"0"`` is served from the watch cache (which ignores
``limit`` while ``cache_ignores_limit`` is set, as API servers before 1.33
do); ``N`` with ``resourceVersionMatch=NotOlderThan`` (or without ``limit``) is
not older than ``N`` (504 ``ResourceVersionTooLarge`` beyond the newest);
``Exact`` (or a legacy ``N`` with ``limit``) answers 410 once ``N`` is
compacted; a streaming list (``sendInitialEvents``) needs ``watch_list`` (the
WatchList feature gate). Every list and watch is kept in ``reads``
(:class:`Read`): which kind of read it was, and what was answered.

It checks authentication the way the API server would (a bearer token from
``tokens``, or a client certificate signed by ``client_ca``), records every
request (``requests``: method, path, who) and can be told to stall
(``delay``) or fail (``fail_with``). Listens on 127.0.0.1 only.
``write_kubeconfig`` produces a kubeconfig pointing at it.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonpatch
import yaml

from tests.support.certs import CA, CertPair


@dataclass
class Recorded:
    method: str
    path: str
    auth: str  # "token:<token>", "cert:<CN>", "basic", "none"
    body: Any = None


CONSISTENT, CACHE, NOT_OLDER, EXACT, CONTINUE, WATCH, STREAM = (
    "consistent",
    "cache",
    "not-older-than",
    "exact",
    "continue",
    "watch",
    "stream",
)


@dataclass(frozen=True)
class Read:
    """One list or watch request, as the API server read it: its kind, its options and the answer's status."""

    resource: str
    kind: str
    query: dict[str, str]
    status: int = 200


def read_kind(query: dict[str, str], *, watch: bool) -> str:
    """What a list or watch with these options reads (the "Resource versions" table of the API concepts)."""
    version = query.get("resourceVersion", "")
    if watch:
        return STREAM if query.get("sendInitialEvents") == "true" else WATCH
    if query.get("continue"):
        return CONTINUE
    if not version:
        return CONSISTENT
    if version == "0":
        return CACHE
    match = query.get("resourceVersionMatch", "")
    if match == "Exact" or (not match and query.get("limit") not in (None, "", "0")):
        return EXACT  # before resourceVersionMatch, N with a limit meant exactly N
    return NOT_OLDER


def invalid_options(query: dict[str, str], *, watch: bool, watch_list: bool) -> str | None:
    """Why kube-apiserver refuses these list options with 422 Invalid, or ``None``."""
    version, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
    initial = query.get("sendInitialEvents")
    problems = []
    if match not in ("", "NotOlderThan", "Exact"):
        problems.append(f'resourceVersionMatch: Unsupported value: "{match}"')
    if initial is not None:
        if not watch:
            problems.append("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
        elif not watch_list:
            problems.append(
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                "feature gate is enabled"
            )
        else:
            if match != "NotOlderThan":
                problems.append("resourceVersionMatch: Forbidden: sendInitialEvents requires NotOlderThan")
            if query.get("allowWatchBookmarks") not in ("1", "true"):
                problems.append("allowWatchBookmarks: Forbidden: sendInitialEvents requires allowWatchBookmarks")
    elif match and watch:
        problems.append("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch")
    if match and not version and initial is None:
        problems.append("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion")
    if match == "Exact" and version == "0":
        problems.append('resourceVersionMatch: Forbidden: "Exact" is forbidden for resourceVersion "0"')
    if query.get("continue") and version:
        problems.append("resourceVersion: Forbidden: specifying resource version is not allowed when using continue")
    if not problems:
        return None
    return 'ListOptions.meta.k8s.io "" is invalid: ' + ", ".join(problems)


def too_large(version: int, current: int) -> dict[str, Any]:
    """The Status of a read at a resourceVersion this API server has not reached (it waited, then gave up)."""
    status = _status(504, "Timeout", f"Too large resource version: {version}, current: {current}")
    status["details"] = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}
    return status


@dataclass
class FakeKubeState:
    tokens: set[str] = field(default_factory=set)
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    # RBAC on Secrets: the namespaces whose Secrets may be read (None: every namespace, as a ClusterRole grants).
    secret_namespaces: frozenset[str] | None = None
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes_forbidden: bool = False
    requests: list[Recorded] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    expire_continue: bool = False
    reads: list[Read] = field(default_factory=list)
    cache_ignores_limit: bool = False
    """Lists at ``resourceVersion=0`` come whole from the watch cache, ``limit`` ignored (before Kubernetes 1.33)."""
    watch_list: bool = False
    """The WatchList feature gate: watches with ``sendInitialEvents`` (streaming lists) are served."""
    too_old_lists: bool = False
    """A list ``NotOlderThan`` a compacted version answers 410 (a server whose cache cannot serve it)."""
    delay: float = 0.0
    fail_with: int = 0
    # The mutating webhook dry-run pods go through: AdmissionReview -> AdmissionReview.
    admit: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    stopping: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_LISTS = {("api", "v1"): ("pods",), ("apis", "apps", "v1"): ("replicasets",), ("apis", "batch", "v1"): ("jobs",)}
_LIST_KINDS = {"pods": "PodList", "replicasets": "ReplicaSetList", "jobs": "JobList"}


def _collection(parts: list[str]) -> tuple[str, str | None] | None:
    """(resource, namespace or None) for a list path, else None."""
    for prefix, resources in _LISTS.items():
        n = len(prefix)
        if tuple(parts[:n]) != prefix:
            continue
        rest = parts[n:]
        if len(rest) == 1 and rest[0] in resources:
            return rest[0], None
        if len(rest) == 3 and rest[0] == "namespaces" and rest[2] in resources:
            return rest[2], rest[1]
    return None


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Go's net/http sets on every connection of a real API server: with Nagle's algorithm the
    # last segment of an answer waits for the client's delayed ACK (up to 40 ms a page, not the client's time)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _encode(self, body: dict[str, Any]) -> bytes:
        return json.dumps(body).encode()

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = self._encode(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _who(self) -> str:
        header = self.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return "token:" + header[7:]
        if header.startswith("Basic "):
            return "basic"
        cert = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        if cert:
            for rdn in cert.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        return f"cert:{value}"
        return "none"

    def _authorized(self, who: str) -> bool:
        state = self.server.state
        if who.startswith("token:"):
            return who[6:] in state.tokens
        return who.startswith("cert:")

    def _handle(self, method: str) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        who = self._who()
        with state.lock:
            state.requests.append(Recorded(method, self.path, who, body))
            delay, fail_with = state.delay, state.fail_with
        if delay:
            time.sleep(delay)
        if not self._authorized(who):
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        if fail_with:
            self._send(fail_with, _status(fail_with, "InternalError", "injected failure"))
            return
        self._route(method, self.path.split("?", 1)[0].strip("/").split("/"), body)

    def _route(self, method: str, parts: list[str], body: Any) -> None:
        """Answer an authenticated request; a subclass adds paths (tests/support/fake_cluster.py)."""
        state = self.server.state
        if method == "GET" and len(parts) == 6 and parts[:2] == ["api", "v1"] and parts[4] == "configmaps":
            with state.lock:
                found = [
                    o
                    for o in state.objects.get("configmaps", [])
                    if (o["metadata"].get("namespace"), o["metadata"].get("name")) == (parts[3], parts[5])
                ]
            if found:
                self._send(200, found[0])
            else:
                self._send(404, _status(404, "NotFound", f'configmaps "{parts[5]}" not found'))
            return
        collection = _collection(parts) if method == "GET" else None
        if collection is not None:
            self._list(*collection)
            return
        if method == "GET" and len(parts) == 6 and parts[:2] == ["api", "v1"] and parts[4] == "secrets":
            key = (parts[3], parts[5])
            outside = state.secret_namespaces is not None and key[0] not in state.secret_namespaces
            if key in state.forbidden or outside:
                self._send(
                    403,
                    _status(
                        403,
                        "Forbidden",
                        f'secrets "{key[1]}" is forbidden: cannot get resource "secrets" in the namespace "{key[0]}"',
                    ),
                )
                return
            secret = state.secrets.get(key)
            if secret is None:
                self._send(404, _status(404, "NotFound", f'secrets "{key[1]}" not found'))
                return
            self._send(200, secret)
            return
        if method == "GET" and len(parts) == 4 and parts[:3] == ["api", "v1", "nodes"]:
            node = state.nodes.get(parts[3])
            if state.nodes_forbidden:
                self._send(403, _status(403, "Forbidden", f'nodes "{parts[3]}" is forbidden'))
            elif node is None:
                self._send(404, _status(404, "NotFound", f'nodes "{parts[3]}" not found'))
            else:
                self._send(200, node)
            return
        if method == "GET" and len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "events":
            # a list with the API server's fieldSelector on involvedObject.* (equality, ANDed by commas)
            query = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
            wanted = [term.split("=", 1) for term in query.get("fieldSelector", "").split(",") if "=" in term]

            def field(event: dict[str, Any], path: str) -> str:
                value: Any = event
                for step in path.split("."):
                    value = value.get(step) if isinstance(value, dict) else None
                return "" if value is None else str(value)

            with state.lock:
                items = [
                    e
                    for e in state.events
                    if e.get("metadata", {}).get("namespace") == parts[3]
                    and all(field(e, key) == value for key, value in wanted)
                ]
            self._send(200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items})
            return
        if method == "POST" and len(parts) == 5 and parts[:2] == ["api", "v1"] and parts[4] == "events":
            if not isinstance(body, dict) or body.get("metadata", {}).get("namespace") != parts[3]:
                self._send(400, _status(400, "BadRequest", "event namespace does not match the path"))
                return
            with state.lock:
                state.events.append(body)
            self._send(201, body)
            return
        if (
            method == "POST"
            and len(parts) == 5
            and parts[:2] == ["api", "v1"]
            and parts[4] == "pods"
            and "dryRun=All" in self.path
            and isinstance(body, dict)
        ):
            self._send(*self._admit_pod(parts[3], body, state))
            return
        self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def _refuse_read(self, resource: str, query: dict[str, str], *, watch: bool, current: int) -> bool:
        """Answer and record what kube-apiserver refuses before reading anything; ``True`` if it did."""
        state = self.server.state
        kind = read_kind(query, watch=watch)
        problem = invalid_options(query, watch=watch, watch_list=state.watch_list)
        version = query.get("resourceVersion", "")
        if problem is not None:
            self._answer_read(resource, query, watch, 422, _status(422, "Invalid", problem))
            return True
        if version.isdigit() and int(version) > current and kind != CONTINUE:
            self._answer_read(resource, query, watch, 504, too_large(int(version), current))
            return True
        return False

    def _answer_read(
        self, resource: str, query: dict[str, str], watch: bool, code: int, body: dict[str, Any] | None
    ) -> None:
        """Record a list or watch with its status; send ``body`` when given (a watch's stream is its own)."""
        state = self.server.state
        with state.lock:
            state.reads.append(Read(resource, read_kind(query, watch=watch), dict(query), code))
        if body is not None:
            self._send(code, body)

    def _list(self, resource: str, namespace: str | None) -> None:
        state = self.server.state
        query = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
        if self._refuse_read(resource, query, watch=False, current=4242):
            return
        with state.lock:
            items = [o for o in state.objects.get(resource, []) if namespace in (None, o["metadata"].get("namespace"))]
            expire = state.expire_continue
        version = query.get("resourceVersion", "")
        if read_kind(query, watch=False) == EXACT and version != "4242":
            self._answer_read(
                resource, query, False, 410, _status(410, "Expired", f"too old resource version: {version}")
            )
            return
        limit = int(query.get("limit") or 0) or len(items) or 1
        if version == "0" and state.cache_ignores_limit:
            limit = len(items) or 1
        start = 0
        if "continue" in query:
            if expire:
                self._answer_read(
                    resource, query, False, 410, _status(410, "Expired", "The provided continue parameter is too old")
                )
                return
            start = int(base64.urlsafe_b64decode(query["continue"]).decode().removeprefix("offset:"))
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": "4242"}
        if start + limit < len(items):
            metadata["continue"] = base64.urlsafe_b64encode(f"offset:{start + limit}".encode()).decode()
            metadata["remainingItemCount"] = len(items) - start - limit
        body_items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page]
        self._answer_read(resource, query, False, 200, None)
        self._send(200, {"kind": _LIST_KINDS[resource], "apiVersion": "v1", "metadata": metadata, "items": body_items})

    def _admit_pod(self, namespace: str, pod: dict[str, Any], state: FakeKubeState) -> tuple[int, dict[str, Any]]:
        """What the API server does for a dry-run create: call the mutating webhook, apply its patch."""
        obj = json.loads(json.dumps(pod))
        obj.setdefault("metadata", {})["namespace"] = namespace
        if state.admit is None:
            return 201, obj
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": namespace,
                "operation": "CREATE",
                "object": obj,
                "dryRun": True,
                "userInfo": {"username": self._who()},
            },
        }
        response = state.admit(review)["response"]
        if not response.get("allowed"):
            message = (response.get("status") or {}).get("message", "denied")
            return 400, _status(400, "BadRequest", f"admission webhook denied the request: {message}")
        if response.get("patch"):
            obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
        return 201, obj

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: FakeKubeState

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that refuse our certificate or hang up mid-handshake are part of the tests.
        return


def pull_secret(
    host: str, user: str, password: str, *, name: str = "regcred", namespace: str = "shop"
) -> dict[str, Any]:
    """A ``kubernetes.io/dockerconfigjson`` Secret holding ``user``/``password`` for registry ``host``."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = json.dumps({"auths": {host: {"auth": auth}}})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": namespace},
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
    }


@dataclass
class FakeKubeAPI:
    """A running fake API server."""

    server: _Server
    thread: threading.Thread
    ca_file: Path
    state: FakeKubeState

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def add_secret(self, namespace: str, name: str, secret: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.secrets[(namespace, name)] = secret

    def add_node(self, node: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.nodes[node["metadata"]["name"]] = node

    def add_objects(self, resource: str, objects: list[dict[str, Any]]) -> None:
        """Serve ``objects`` under ``resource`` (``pods``, ``replicasets``, ``jobs``; ``configmaps`` one by one)."""
        with self.state.lock:
            self.state.objects.setdefault(resource, []).extend(objects)

    def events_snapshot(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.events)

    def requests_snapshot(self) -> list[Recorded]:
        with self.state.lock:
            return list(self.state.requests)

    def reads(self, resource: str | None = None) -> list[Read]:
        """Every list and watch of ``resource`` (all when ``None``), in order, as the server read it."""
        with self.state.lock:
            return [r for r in self.state.reads if resource in (None, r.resource)]

    def wait_for_events(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            events = self.events_snapshot()
            if len(events) >= count:
                return events
            time.sleep(0.05)
        return self.events_snapshot()

    def write_kubeconfig(
        self,
        path: Path,
        *,
        token: str | None = None,
        token_file: Path | None = None,
        client: CertPair | None = None,
        embed: bool = True,
        insecure: bool = False,
    ) -> Path:
        cluster: dict[str, Any] = {"server": self.url}
        if insecure:
            cluster["insecure-skip-tls-verify"] = True
        elif embed:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_file.read_bytes()).decode()
        else:
            cluster["certificate-authority"] = str(self.ca_file)
        user: dict[str, Any] = {}
        if token:
            user["token"] = token
        if token_file:
            user["tokenFile"] = str(token_file)
        if client is not None:
            if embed:
                user["client-certificate-data"] = base64.b64encode(client.cert_file.read_bytes()).decode()
                user["client-key-data"] = base64.b64encode(client.key_file.read_bytes()).decode()
            else:
                user["client-certificate"] = str(client.cert_file)
                user["client-key"] = str(client.key_file)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "noe", "user": user}, {"name": "other", "user": {"token": "wrong"}}],
            "contexts": [
                {"name": "other", "context": {"cluster": "fake", "user": "other"}},
                {"name": "noe", "context": {"cluster": "fake", "user": "noe", "namespace": "default"}},
            ],
            "current-context": "noe",
        }
        path.write_text(yaml.safe_dump(doc))
        return path


@contextmanager
def start_fake_kube_api(
    ca: CA,
    *,
    tokens: tuple[str, ...] = (),
    client_ca: Path | None = None,
    handler: type[_Handler] = _Handler,
    state: FakeKubeState | None = None,
) -> Iterator[FakeKubeAPI]:
    """Serve on 127.0.0.1 with a certificate from ``ca``; stops on exit.

    ``handler`` and ``state`` let a richer stand-in (the controller's cluster) reuse the server.
    """
    pair = ca.issue(["127.0.0.1", "localhost"], name=f"kube-api-{time.monotonic_ns()}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pair.cert_file), str(pair.key_file))
    if client_ca is not None:
        context.load_verify_locations(str(client_ca))
        context.verify_mode = ssl.CERT_OPTIONAL
    server = _Server(("127.0.0.1", 0), handler, bind_and_activate=False)
    server.state = state if state is not None else FakeKubeState()
    server.state.tokens |= set(tokens)
    server.server_bind()
    server.server_activate()
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield FakeKubeAPI(server, thread, ca.ca_file, server.state)
    finally:
        server.state.stopping = True
        server.shutdown()
        server.server_close()
        thread.join(5)
