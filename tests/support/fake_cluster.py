"""A stand-in Kubernetes API for the controller: the fake API server of fake_kube_api, with a cluster in it.

It speaks, over HTTPS and behind a kubeconfig, what ``noe controller`` uses:

    GET    /api/v1/pods, /api/v1/nodes         lists (limit/continue, resourceVersion and resourceVersionMatch:
                                                consistent, watch cache, not older than, exact; see
                                                fake_kube_api) and watches (watch=1, allowWatchBookmarks,
                                                timeoutSeconds, 410 Gone; sendInitialEvents while
                                                ``watch_list`` is on: the state as ADDED events, then a
                                                BOOKMARK annotated k8s.io/initial-events-end)
    GET    /api/v1/namespaces/NS/pods/NAME      one pod
    PATCH  /api/v1/namespaces/NS/pods/NAME      application/json-patch+json: a failing ``test`` → 422,
                                                a stale metadata.resourceVersion → 409, and a gated pod
                                                may only gain scheduling constraints (as kube-apiserver)
    POST   /api/v1/namespaces/NS/pods/NAME/eviction   201 (the pod goes away, or with ``graceful_eviction``
                                                is marked with deletionTimestamp until deleted) or 429
                                                from a budget
    GET    /api/v1/namespaces/NS/pods/NAME/log  container, previous, tailLines, limitBytes
    GET/POST/PUT /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]   409 on a stale resourceVersion
    GET/POST/PUT /apis/wgpolicyk8s.io/v1alpha2/namespaces/NS/policyreports[/NAME]   the same; 404 on every
                                                path while ``policy_report_crd`` is off (the CRD not installed)
    DELETE /api/v1/namespaces/NS/pods/NAME      (answered, and recorded: the controller must never send it)
    GET    /api/v1/namespaces[/NAME]            Namespaces: list and watch, or one
    GET/POST/PUT /api/v1/namespaces/NS/configmaps[/NAME]   list and watch, one, create, replace (409 on a
                                                stale resourceVersion; ``change_before_next_put`` makes one)
    GET    /apis/arch.noe.adevinta.com/v1alpha1/clusterplacementpolicies, …/placementpolicies (every
                                                namespace) and …/namespaces/NS/placementpolicies: lists and watches
    GET/PUT /apis/arch.noe.adevinta.com/v1alpha1/[namespaces/NS/]KIND/NAME   one policy; a PUT that changes
                                                ``spec`` bumps ``metadata.generation``, as for any CRD
    GET/PUT/PATCH …/KIND/NAME/status            the status subresource: only ``status`` changes (PATCH:
                                                application/merge-patch+json); every policy path answers
                                                404 while ``policy_crds`` is off (the CRDs not installed)

plus the Secrets and Events of the base server. Every change bumps one
resourceVersion counter and is kept in a history that watches replay from;
:meth:`FakeCluster.compact` drops that history and ends open watches, so a
client coming back with an old resourceVersion gets ``410 Gone`` as the API
server answers after etcd compaction. A consistent or exact list, and every
continued page, is the state at the list's resourceVersion (the history is
undone back to it), as etcd serves it; ``reads`` records each list and watch.
"""

from __future__ import annotations

import base64
import bisect
import copy
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonpatch

from tests.support.certs import CA
from tests.support.fake_kube_api import (
    EXACT,
    NOT_OLDER,
    STREAM,
    FakeKubeAPI,
    FakeKubeState,
    _Handler,
    _status,
    read_kind,
    start_fake_kube_api,
)

KINDS = {
    "pods": "Pod",
    "nodes": "Node",
    "leases": "Lease",
    "policyreports": "PolicyReport",
    "namespaces": "Namespace",
    "clusterplacementpolicies": "ClusterPlacementPolicy",
    "placementpolicies": "PlacementPolicy",
    "configmaps": "ConfigMap",
}
POLICY_GROUP = ["apis", "arch.noe.adevinta.com", "v1alpha1"]
POLICY_KINDS = ("clusterplacementpolicies", "placementpolicies")
WATCHED = ("pods", "nodes", "namespaces")


@dataclass
class Budget:
    """A PodDisruptionBudget reduced to what eviction reads: the pods it covers and disruptions left."""

    namespace: str
    match_labels: dict[str, str]
    disruptions_allowed: int


@dataclass
class ClusterState(FakeKubeState):
    rv: int = 1
    objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )
    history: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)
    prior: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    """For each resourceVersion in the history, the object as it was before that change (``None``: absent)."""
    compacted: int = 0
    watch_generation: int = 0
    budgets: list[Budget] = field(default_factory=list)
    logs: dict[tuple[str, str, str, bool], str] = field(default_factory=dict)
    evicted: list[tuple[str, str]] = field(default_factory=list)
    bookmark_interval: float = 0.5
    watches_held: bool = False
    before_patch: list[Callable[[dict[str, Any]], None]] = field(default_factory=list)
    policy_report_crd: bool = True
    policy_crds: bool = True
    before_put: list[Callable[[dict[str, Any]], None]] = field(default_factory=list)
    graceful_eviction: bool = False
    """An evicted pod stays, marked with ``deletionTimestamp``, until the test deletes it (its kubelet)."""
    raw: dict[str, str] = field(default_factory=dict)
    changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    # --- called with the lock held ---------------------------------------------------------------
    def _write(self, kind: str, event: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        self.prior[self.rv] = self.objects[kind].get(key)
        if event == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            if kind in POLICY_KINDS:  # the API server counts changes of spec in metadata.generation
                before = self.objects[kind].get(key)
                if before is None:
                    meta["generation"] = 1
                elif before.get("spec") != obj.get("spec"):
                    meta["generation"] = int(before["metadata"].get("generation") or 1) + 1
                else:
                    meta["generation"] = before["metadata"].get("generation") or 1
            meta["resourceVersion"] = str(self.rv)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self.objects[kind][key] = obj
        self.history.append((self.rv, kind, event, copy.deepcopy(obj)))
        self.changed.notify_all()
        return obj

    def snapshot(self, kind: str, at: int) -> dict[tuple[str, str], dict[str, Any]]:
        """The objects of ``kind`` as they were at resourceVersion ``at`` (not before the compaction)."""
        objects = dict(self.objects[kind])
        for rv, entry_kind, _, obj in reversed(self.history):
            if rv <= at:
                break
            if entry_kind != kind:
                continue
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            before = self.prior.get(rv)
            if before is None:
                objects.pop(key, None)
            else:
                objects[key] = before
        return objects


def _pod_ready(pod: dict[str, Any]) -> bool:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _gated_update_problem(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """What kube-apiserver refuses in an update of a pod (most spec fields are immutable; a gated pod
    may gain node selectors, affinity requirements and tolerations, and lose scheduling gates)."""
    old, new = before.get("spec", {}), after.get("spec", {})
    gated = bool(old.get("schedulingGates"))
    for key in set(old) | set(new):
        if key in ("nodeSelector", "affinity", "schedulingGates", "tolerations"):
            continue
        if old.get(key) != new.get(key):
            return f"spec.{key}: Forbidden: pod updates may not change this field"
    old_gates = [g["name"] for g in old.get("schedulingGates") or []]
    new_gates = [g["name"] for g in new.get("schedulingGates") or []]
    if any(g not in old_gates for g in new_gates):
        return "spec.schedulingGates: Forbidden: only deletion is allowed"
    old_tol, new_tol = old.get("tolerations") or [], new.get("tolerations") or []
    if new_tol[: len(old_tol)] != old_tol:
        return "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
    if old.get("nodeSelector") == new.get("nodeSelector") and old.get("affinity") == new.get("affinity"):
        return None
    if not gated:
        return "spec: Forbidden: node selection may only change on a pod with scheduling gates"
    old_sel, new_sel = old.get("nodeSelector") or {}, new.get("nodeSelector") or {}
    if any(new_sel.get(k) != v for k, v in old_sel.items()):
        return "spec.nodeSelector: Invalid value: only additions to spec.nodeSelector are allowed"
    old_na = (old.get("affinity") or {}).get("nodeAffinity")
    new_na = (new.get("affinity") or {}).get("nodeAffinity")
    if old_na is None:
        return None
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    old_terms = (old_na.get(required) or {}).get("nodeSelectorTerms") or []
    new_terms = ((new_na or {}).get(required) or {}).get("nodeSelectorTerms") or []
    if not old_terms:
        return None
    if len(old_terms) != len(new_terms):
        return "spec.affinity.nodeAffinity: Invalid value: nodeSelectorTerms may only gain requirements"
    for before_term, after_term in zip(old_terms, new_terms, strict=True):
        for part in ("matchExpressions", "matchFields"):
            kept = before_term.get(part) or []
            if (after_term.get(part) or [])[: len(kept)] != kept:
                return "spec.affinity.nodeAffinity: Invalid value: existing requirements may not change"
    return None


class ClusterHandler(_Handler):
    server: Any

    @property
    def cluster(self) -> ClusterState:
        state: ClusterState = self.server.state
        return state

    def _query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def _route(self, method: str, parts: list[str], body: Any) -> None:
        query = self._query()
        if parts[:2] == ["api", "v1"] and len(parts) == 3 and parts[2] in WATCHED and method == "GET":
            self._list_or_watch(parts[2], query)
            return
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4 and method == "GET":
            self._get("namespaces", "", parts[3])
            return
        if parts[:3] == POLICY_GROUP:
            self._policies(method, parts[3:], query, body)
            return
        if parts[:2] == ["api", "v1"] and len(parts) >= 6 and parts[2] == "namespaces" and parts[4] == "pods":
            ns, name = parts[3], parts[5]
            sub = parts[6] if len(parts) == 7 else ""
            if sub == "eviction" and method == "POST":
                self._evict(ns, name)
            elif sub == "log" and method == "GET":
                self._log(ns, name, query)
            elif not sub and method == "GET":
                self._get("pods", ns, name)
            elif not sub and method == "PATCH":
                self._patch(ns, name, body)
            elif not sub and method == "DELETE":
                with self.cluster.lock:
                    pod = self.cluster.objects["pods"].get((ns, name))
                    if pod is not None:
                        self.cluster._write("pods", "DELETED", pod)
                self._send(200 if pod else 404, pod or _status(404, "NotFound", f'pods "{name}" not found'))
            else:
                self._send(405, _status(405, "MethodNotAllowed", "not supported here"))
            return
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) in (5, 6) and parts[4] == "configmaps":
            if method == "GET" and len(parts) == 5:
                self._list_or_watch("configmaps", query, namespace=parts[3])
            else:
                self._stored("configmaps", method, parts[3], parts[5] if len(parts) == 6 else "", body)
            return
        if (
            parts[:4] == ["apis", "coordination.k8s.io", "v1", "namespaces"]
            and len(parts) >= 6
            and parts[5] == "leases"
        ):
            self._stored("leases", method, parts[4], parts[6] if len(parts) == 7 else "", body)
            return
        if (
            parts[:4] == ["apis", "wgpolicyk8s.io", "v1alpha2", "namespaces"]
            and len(parts) >= 6
            and parts[5] == "policyreports"
        ):
            if not self.cluster.policy_report_crd:
                self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            self._stored("policyreports", method, parts[4], parts[6] if len(parts) == 7 else "", body)
            return
        super()._route(method, parts, body)

    # --- placement policies ----------------------------------------------------------------------
    def _policies(self, method: str, rest: list[str], query: dict[str, str], body: Any) -> None:
        """The two policy kinds: lists and watches, one object, its status subresource."""
        if not self.cluster.policy_crds:
            self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == "placementpolicies":
            namespace, rest = rest[1], rest[2:]
        cluster_wide_list = rest == ["placementpolicies"]
        kind = rest[0] if rest else ""
        if kind not in POLICY_KINDS or (kind == "placementpolicies" and not namespace and not cluster_wide_list):
            self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return
        if len(rest) == 1 and method == "GET":
            self._list_or_watch(kind, query, namespace=namespace)
        elif len(rest) == 2 and method == "GET":
            self._get(kind, namespace, rest[1])
        elif len(rest) == 2 and method == "PUT":
            self._replace(kind, namespace, rest[1], body, status_only=False)
        elif len(rest) == 3 and rest[2] == "status" and method == "GET":
            self._get(kind, namespace, rest[1])
        elif len(rest) == 3 and rest[2] == "status" and method == "PUT":
            self._replace(kind, namespace, rest[1], body, status_only=True)
        elif len(rest) == 3 and rest[2] == "status" and method == "PATCH":
            self._merge_status(kind, namespace, rest[1], body)
        else:
            self._send(405, _status(405, "MethodNotAllowed", "not supported here"))

    def _replace(self, kind: str, ns: str, name: str, body: Any, *, status_only: bool) -> None:
        """PUT of an object (its spec) or of its status subresource; 409 on a stale resourceVersion."""
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            self._send(400, _status(400, "BadRequest", f"a {KINDS[kind]} object is needed"))
            return
        state = self.cluster
        with state.lock:
            current = self._found(kind, ns, name)
            if current is None:
                return
            if body["metadata"].get("resourceVersion") not in (None, current["metadata"]["resourceVersion"]):
                self._send(409, _status(409, "Conflict", "the object has been modified"))
                return
            updated = copy.deepcopy(current)
            if status_only:
                updated["status"] = body.get("status")
            else:
                updated["spec"] = body.get("spec")
            self._send(200, copy.deepcopy(state._write(kind, "MODIFIED", updated)))

    def _found(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        """The stored object (the caller holds the lock), or ``None`` after answering 404."""
        current: dict[str, Any] | None = self.cluster.objects[kind].get((ns, name))
        if current is None:
            self._send(404, _status(404, "NotFound", f'{kind} "{name}" not found'))
        return current

    def _merge_status(self, kind: str, ns: str, name: str, body: Any) -> None:
        """``application/merge-patch+json`` of the status subresource (RFC 7386); nothing else changes."""
        if self.headers.get("Content-Type") != "application/merge-patch+json" or not isinstance(body, dict):
            self._send(415, _status(415, "UnsupportedMediaType", "this stand-in takes merge patches of status"))
            return
        state = self.cluster
        with state.lock:
            current = self._found(kind, ns, name)
            if current is None:
                return
            updated = copy.deepcopy(current)
            if "status" in body:
                updated["status"] = _merge_patch(updated.get("status"), body["status"])
            self._send(200, copy.deepcopy(state._write(kind, "MODIFIED", updated)))

    # --- lists and watches -----------------------------------------------------------------------
    def _list_or_watch(self, kind: str, query: dict[str, str], namespace: str = "") -> None:
        if query.get("watch") in ("1", "true"):
            self._watch(kind, query, namespace)
        else:
            self._list(kind, query, namespace)

    def _list(self, kind: str, query: dict[str, str], namespace: str = "") -> None:
        state = self.cluster
        with state.lock:
            current = state.rv
        if self._refuse_read(kind, query, watch=False, current=current):
            return
        read = read_kind(query, watch=False)
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        version = query.get("resourceVersion", "")
        refusal = None
        with state.lock:
            after = None
            list_rv = state.rv  # consistent, or the watch cache: kept current in this stand-in
            if token:
                list_rv, after = json.loads(base64.b64decode(token))
                if list_rv < state.compacted:
                    refusal = _status(410, "Expired", "The provided continue parameter is too old")
            elif read == EXACT:
                list_rv = int(version)
                if list_rv < state.compacted:
                    refusal = _status(410, "Expired", f"too old resource version: {version}")
            elif read == NOT_OLDER and state.too_old_lists and int(version) < state.compacted:
                refusal = _status(410, "Expired", f"too old resource version: {version}")
            if version == "0" and state.cache_ignores_limit:
                limit = 0  # the watch cache of an API server before 1.33 answers everything at once
            if refusal is None:
                objects = state.snapshot(kind, list_rv) if list_rv < state.rv else state.objects[kind]
                keys = sorted(k for k in objects if not namespace or k[0] == namespace)
                if after is not None:
                    keys = [k for k in keys if list(k) > after]
                page = keys[:limit] if limit else keys
                items = [copy.deepcopy(objects[k]) for k in page]
                more = bool(limit) and len(keys) > limit
        if refusal is not None:
            self._answer_read(kind, query, False, 410, refusal)
            return
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if more:
            metadata["continue"] = base64.b64encode(json.dumps([list_rv, list(page[-1])]).encode()).decode()
            metadata["remainingItemCount"] = len(keys) - limit
        self._answer_read(kind, query, False, 200, None)
        self._send(200, {"kind": KINDS[kind] + "List", "apiVersion": "v1", "metadata": metadata, "items": items})

    def _encode(self, body: dict[str, Any]) -> bytes:
        """JSON, with the raw texts of :meth:`FakeCluster.raw_json` put where their placeholders are."""
        text = json.dumps(body)
        for placeholder, raw in self.cluster.raw.items():
            text = text.replace(json.dumps(placeholder), raw)
        return text.encode()

    def _chunk(self, doc: dict[str, Any]) -> None:
        data = self._encode(doc) + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, kind: str, query: dict[str, str], namespace: str = "") -> None:
        state = self.cluster
        with state.lock:
            current = state.rv
        if self._refuse_read(kind, query, watch=True, current=current):
            return
        self._answer_read(kind, query, True, 200, None)
        streaming = read_kind(query, watch=True) == STREAM
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        end = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            with state.lock:
                while state.watches_held and not state.stopping:
                    state.changed.wait(0.1)  # an API server that is not answering watches (yet)
                generation = state.watch_generation
                initial: list[dict[str, Any]] = []
                if streaming:  # the state not older than the version asked for: this stand-in's newest
                    since = state.rv
                    objects = state.objects[kind]
                    initial = [copy.deepcopy(objects[k]) for k in sorted(objects) if not namespace or k[0] == namespace]
                elif since < state.compacted:
                    gone = _status(410, "Expired", f"too old resource version: {since} ({state.compacted})")
                    self._chunk({"type": "ERROR", "object": gone})
                    return
            for obj in initial:
                self._chunk({"type": "ADDED", "object": obj})
            if streaming:
                end_of_state = {"resourceVersion": str(since), "annotations": {"k8s.io/initial-events-end": "true"}}
                self._chunk({"type": "BOOKMARK", "object": {"kind": KINDS[kind], "metadata": end_of_state}})
            last_bookmark = time.monotonic()
            with state.lock:  # the history only grows (compaction empties it and ends every watch)
                position = bisect.bisect_right(state.history, since, key=lambda entry: entry[0])
            while time.monotonic() < end and not state.stopping:
                with state.lock:
                    if position >= len(state.history) and generation == state.watch_generation:
                        state.changed.wait(0.1)
                    if generation != state.watch_generation:
                        # compaction (or a hold) ends every open watch, before it sends anything that happened
                        # since: clients come back and get 410
                        return
                    fresh, position = state.history[position:], len(state.history)
                    current = state.rv
                pending = [
                    (rv, e, o)
                    for rv, k, e, o in fresh
                    if k == kind and rv > since and (not namespace or o["metadata"].get("namespace") == namespace)
                ]
                for rv, event, obj in pending:
                    self._chunk({"type": event, "object": obj})
                    since = rv
                if bookmarks and time.monotonic() - last_bookmark >= state.bookmark_interval:
                    since = max(since, current)
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": KINDS[kind],
                                "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(since)},
                            },
                        }
                    )
                    last_bookmark = time.monotonic()
        except OSError:
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True

    # --- pods ------------------------------------------------------------------------------------
    def _get(self, kind: str, ns: str, name: str) -> None:
        with self.cluster.lock:
            obj = copy.deepcopy(self.cluster.objects[kind].get((ns, name)))
        if obj is None:
            self._send(404, _status(404, "NotFound", f'{kind} "{name}" not found'))
        else:
            self._send(200, obj)

    def _patch(self, ns: str, name: str, body: Any) -> None:
        if self.headers.get("Content-Type") != "application/json-patch+json" or not isinstance(body, list):
            self._send(415, _status(415, "UnsupportedMediaType", "this stand-in takes JSON Patch only"))
            return
        state = self.cluster
        with state.lock:
            pod = state.objects["pods"].get((ns, name))
            if pod is None:
                self._send(404, _status(404, "NotFound", f'pods "{name}" not found'))
                return
            if state.before_patch:  # another writer gets there first (a kubelet, a user's kubectl label)
                concurrent = copy.deepcopy(pod)
                state.before_patch.pop(0)(concurrent)
                pod = state._write("pods", "MODIFIED", concurrent)
            try:
                patched = jsonpatch.apply_patch(pod, body)
            except jsonpatch.JsonPatchTestFailed as exc:
                self._send(422, _status(422, "Invalid", f"the server rejected our request: {exc}"))
                return
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                self._send(422, _status(422, "Invalid", f"the patch does not apply: {exc}"))
                return
            if patched["metadata"].get("resourceVersion") != pod["metadata"]["resourceVersion"]:
                self._send(
                    409,
                    _status(
                        409,
                        "Conflict",
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ),
                )
                return
            problem = _gated_update_problem(pod, patched)
            if problem:
                self._send(422, _status(422, "Invalid", f'Pod "{name}" is invalid: {problem}'))
                return
            result = copy.deepcopy(state._write("pods", "MODIFIED", patched))
        self._send(200, result)

    def _evict(self, ns: str, name: str) -> None:
        state = self.cluster
        with state.lock:
            pod = state.objects["pods"].get((ns, name))
            if pod is None:
                self._send(404, _status(404, "NotFound", f'pods "{name}" not found'))
                return
            labels = pod["metadata"].get("labels") or {}
            for budget in state.budgets:
                if budget.namespace == ns and all(labels.get(k) == v for k, v in budget.match_labels.items()):
                    if budget.disruptions_allowed <= 0:
                        self._send(
                            429,
                            _status(
                                429,
                                "TooManyRequests",
                                "Cannot evict pod as it would violate the pod's disruption budget.",
                            ),
                        )
                        return
                    budget.disruptions_allowed -= 1
            if state.graceful_eviction:
                # as kube-apiserver: the pod is marked for deletion and stays until its kubelet is done with it
                marked = copy.deepcopy(pod)
                marked["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                state._write("pods", "MODIFIED", marked)
            else:
                state._write("pods", "DELETED", pod)
            state.evicted.append((ns, name))
        self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    def _log(self, ns: str, name: str, query: dict[str, str]) -> None:
        previous = query.get("previous") in ("1", "true")
        with self.cluster.lock:
            text = self.cluster.logs.get((ns, name, query.get("container", ""), previous))
        if text is None:
            self._send(400, _status(400, "BadRequest", "previous terminated container not found"))
            return
        if query.get("tailLines"):
            text = "".join(text.splitlines(keepends=True)[-int(query["tailLines"]) :])
        data = text.encode()
        if query.get("limitBytes"):
            data = data[: int(query["limitBytes"])]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # --- leases ----------------------------------------------------------------------------------
    def _stored(self, kind: str, method: str, ns: str, name: str, body: Any) -> None:
        """GET, create (POST) and replace (PUT, 409 on a stale resourceVersion) of a namespaced object."""
        state = self.cluster
        if method == "GET" and name:
            self._get(kind, ns, name)
            return
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            self._send(400, _status(400, "BadRequest", f"a {KINDS[kind]} object is needed"))
            return
        with state.lock:
            if method == "POST" and not name:
                key = (ns, body["metadata"].get("name", ""))
                if key in state.objects[kind]:
                    self._send(409, _status(409, "AlreadyExists", f'{kind} "{key[1]}" already exists'))
                    return
                body["metadata"]["namespace"] = ns
                body["metadata"].pop("resourceVersion", None)
                self._send(201, copy.deepcopy(state._write(kind, "ADDED", body)))
                return
            if method == "PUT" and name:
                if state.before_put:  # another writer got there first
                    changed = copy.deepcopy(state.objects[kind].get((ns, name)))
                    if changed is not None:
                        state.before_put.pop(0)(changed)
                        state._write(kind, "MODIFIED", changed)
                current = state.objects[kind].get((ns, name))
                if current is None:
                    self._send(404, _status(404, "NotFound", f'{kind} "{name}" not found'))
                    return
                if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                    self._send(409, _status(409, "Conflict", "the object has been modified"))
                    return
                body["metadata"]["uid"] = current["metadata"]["uid"]
                self._send(200, copy.deepcopy(state._write(kind, "MODIFIED", body)))
                return
        self._send(405, _status(405, "MethodNotAllowed", "not supported here"))


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` removes, anything else (arrays too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


@dataclass
class FakeCluster:
    """The running stand-in and helpers to change the cluster the way kubelets and controllers would."""

    api: FakeKubeAPI
    state: ClusterState

    def add(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.state.lock:
            return copy.deepcopy(self.state._write(kind, "ADDED", copy.deepcopy(obj)))

    def update(self, kind: str, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        with self.state.lock:
            obj = copy.deepcopy(self.state.objects[kind][(namespace, name)])
            change(obj)
            self.state._write(kind, "MODIFIED", obj)

    def raw_json(self, text: str) -> str:
        """A placeholder value that the stand-in sends as ``text`` (JSON no Python structure could hold:
        nested deeper than ``json`` can read, as a hostile client may store in a custom resource)."""
        placeholder = f"@@raw-json-{uuid.uuid4()}@@"
        with self.state.lock:
            self.state.raw[placeholder] = text
        return placeholder

    def delete(self, kind: str, namespace: str, name: str) -> None:
        with self.state.lock:
            self.state._write(kind, "DELETED", copy.deepcopy(self.state.objects[kind][(namespace, name)]))

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.state.lock:
            return copy.deepcopy(self.state.objects[kind].get((namespace, name)))

    def compact(self) -> None:
        """Forget the history (as etcd compaction does) and end every open watch."""
        with self.state.lock:
            self.state.compacted = self.state.rv
            self.state.history.clear()
            self.state.prior.clear()
            self.state.watch_generation += 1
            self.state.changed.notify_all()

    def change_before_next_put(self, change: Callable[[dict[str, Any]], None]) -> None:
        """The next PUT of a Lease, PolicyReport or ConfigMap finds it changed by another writer (409)."""
        with self.state.lock:
            self.state.before_put.append(change)

    def change_before_next_patch(self, change: Callable[[dict[str, Any]], None]) -> None:
        """The next pod PATCH finds the pod changed by someone else just before it arrives."""
        with self.state.lock:
            self.state.before_patch.append(change)

    @contextmanager
    def watches_held(self) -> Iterator[None]:
        """End open watches and hold new ones until the block ends (the client misses what happens in it)."""
        with self.state.lock:
            self.state.watches_held = True
            self.state.watch_generation += 1
            self.state.changed.notify_all()
        try:
            yield
        finally:
            with self.state.lock:
                self.state.watches_held = False
                self.state.changed.notify_all()

    def set_log(self, namespace: str, pod: str, container: str, text: str, *, previous: bool = True) -> None:
        with self.state.lock:
            self.state.logs[(namespace, pod, container, previous)] = text

    def add_budget(self, namespace: str, match_labels: dict[str, str], disruptions_allowed: int) -> Budget:
        budget = Budget(namespace, dict(match_labels), disruptions_allowed)
        with self.state.lock:
            self.state.budgets.append(budget)
        return budget

    def set_budget(self, budget: Budget, disruptions_allowed: int) -> None:
        with self.state.lock:
            budget.disruptions_allowed = disruptions_allowed

    def writes(self) -> list[tuple[str, str]]:
        """Every request that changes something (method, path), Event writes included."""
        return [(r.method, r.path) for r in self.api.requests_snapshot() if r.method != "GET"]

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.api.events_snapshot() if reason is None or e.get("reason") == reason]

    def wait(self, condition: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
        end = time.monotonic() + timeout
        while True:
            value = condition()
            if value or time.monotonic() > end:
                return value
            time.sleep(interval)


@contextmanager
def start_fake_cluster(ca: CA, *, tokens: tuple[str, ...] = ()) -> Iterator[FakeCluster]:
    state = ClusterState()
    with start_fake_kube_api(ca, tokens=tokens, handler=ClusterHandler, state=state) as api:
        yield FakeCluster(api, state)


def owned_by(kind: str, name: str, api_version: str = "apps/v1") -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "uid": str(uuid.uuid4()),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def ready(value: bool) -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if value else "False"}]}
