"""The eviction back-off, kept in the cluster (ConfigMap ``noe-evictions``) so that it survives a change of leader.

``--eviction-backoff`` allows one eviction per (owner, image digest, node
architecture): a bad image must not make the controller evict the replacement
pods of one ReplicaSet for ever. Kept only in the leader's memory, the back-off
died with the leader, and the next leader evicted again what the last one had
just caused. So the leader records each eviction here *before* sending it, and
reads the record before any eviction, whichever replica leads.

Why this object: the evicted pod is gone soon (and its replacement is a new
pod), so an annotation on it cannot carry the back-off; the owners are of every
kind (ReplicaSet, StatefulSet, Job, ...), and annotating them would widen noe's
RBAC to all of them; Events expire on the API server's schedule (``--event-ttl``),
not the back-off's, and reading them takes list access to every namespace. One
ConfigMap of noe's own namespace takes ``get`` and ``update`` on that one name
(``create`` the controller already has for ``noe-learned-platforms``).

Each entry: the data key is the SHA-256 of the key (ConfigMap keys allow only
``[-._a-zA-Z0-9]``), the value JSON ``{"key": [owner, image or pod, architecture],
"pod": "namespace/name", "time": RFC 3339}``. Writing before the eviction means
a crash in between costs one back-off without an eviction, never a second
eviction; an eviction that did not happen (a budget's 429, the pod gone, an API
error) removes its entry again. Every write is a read-modify-write with the
resourceVersion read (409: read again, decide again), so two replicas that both
believe they lead for a moment cannot both claim a key. Entries past the
back-off are dropped at each write; at most :data:`MAX_ENTRIES` are kept, oldest
dropped first (a ConfigMap holds at most 1 MiB). Replicas compare wall-clock
times here: their clocks are assumed to agree within seconds, as Lease election
already assumes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from noe_web.kube.client import KubeClient
from noe_web.kube.errors import Conflict, KubeError, NotFound

log = logging.getLogger("noe.controller")

CONFIGMAP = "noe-evictions"
MAX_ENTRIES = 2000
ATTEMPTS = 5
_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"

EvictionKey = tuple[str, str, str]
"""(owner ``Kind/namespace/name``, image digest (or, for a rollback, the pod), node architecture)."""


class RecordUnavailable(KubeError):
    """The record could not be read or written: no eviction is sent (never more than one per back-off)."""


def data_key(key: EvictionKey) -> str:
    """The ConfigMap data key of ``key`` (only ``[-._a-zA-Z0-9]`` is allowed there)."""
    return hashlib.sha256("\x00".join(key).encode()).hexdigest()


def _stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime(_STAMP)


def _time_of(value: object) -> float | None:
    """When the entry was written; ``None`` for an entry this code cannot read (treated as absent)."""
    try:
        entry = json.loads(value) if isinstance(value, str) else None
        stamp = entry.get("time") if isinstance(entry, Mapping) else None
        return dt.datetime.strptime(str(stamp), _STAMP).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


class EvictionRecord:
    """Who evicted what when, in the cluster: :meth:`claim` before an eviction, :meth:`release` if it failed."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        backoff: float,
        *,
        clock: Callable[[], float] = time.time,
        on_write: Callable[[], None] = lambda: None,
    ) -> None:
        self.kube, self.namespace, self.backoff, self._clock, self._on_write = kube, namespace, backoff, clock, on_write
        self._collection = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"
        self.path = f"{self._collection}/{CONFIGMAP}"
        self.conflicts = 0

    def claim(self, key: EvictionKey, pod: str) -> float | None:
        """Take ``key`` for one eviction of ``pod``: ``None`` when taken, or the seconds until the back-off of
        an earlier eviction (by this replica or another) ends. Raises :class:`RecordUnavailable`."""
        name = data_key(key)
        for _ in range(ATTEMPTS):
            current = self._read()
            data = dict(current.get("data") or {}) if current is not None else {}
            now = self._clock()
            since = _time_of(data.get(name))
            if since is not None and since + self.backoff > now:
                return since + self.backoff - now
            data = self._pruned(data, now)
            data[name] = json.dumps({"key": list(key), "pod": pod, "time": _stamp(now)}, sort_keys=True)
            if self._write(current, data):
                return None
        raise RecordUnavailable(f"{CONFIGMAP}: {ATTEMPTS} conflicting writes in a row")

    def release(self, key: EvictionKey) -> None:
        """Remove ``key``'s entry: its eviction did not happen. Best effort: left behind, it delays the next
        eviction of that key by one back-off, never causes an extra one."""
        name = data_key(key)
        try:
            for _ in range(ATTEMPTS):
                current = self._read()
                data = dict(current.get("data") or {}) if current is not None else {}
                if name not in data:
                    return
                del data[name]
                if self._write(current, data):
                    return
        except RecordUnavailable as exc:
            log.warning("%s: the entry of an eviction that did not happen stays (%s)", CONFIGMAP, exc)

    def _read(self) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.kube.call("GET", self.path)
        except NotFound:
            return None
        except KubeError as exc:
            raise RecordUnavailable(f"{CONFIGMAP} not readable: {exc}", status=exc.status) from exc
        return found

    def _write(self, current: dict[str, Any] | None, data: dict[str, str]) -> bool:
        """Create or replace the ConfigMap as read; ``False`` when someone else changed it meanwhile."""
        meta: dict[str, Any] = {"name": CONFIGMAP, "namespace": self.namespace}
        doc: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
        self._on_write()
        try:
            if current is None:
                meta["labels"] = {"app.kubernetes.io/name": "noe", "app.kubernetes.io/component": "controller"}
                self.kube.call("POST", self._collection, body=doc)
            else:
                meta["resourceVersion"] = str(current["metadata"]["resourceVersion"])
                meta["labels"] = current["metadata"].get("labels") or {}
                self.kube.call("PUT", self.path, body=doc)
        except Conflict:
            self.conflicts += 1
            return False
        except KubeError as exc:
            raise RecordUnavailable(f"{CONFIGMAP} not written: {exc}", status=exc.status) from exc
        return True

    def _pruned(self, data: dict[str, str], now: float) -> dict[str, str]:
        """Entries still within the back-off, at most ``MAX_ENTRIES - 1`` (room for one more), newest kept."""
        alive = [(t, k, v) for k, v in data.items() if (t := _time_of(v)) is not None and t + self.backoff > now]
        alive.sort()
        return {k: v for _, k, v in alive[-(MAX_ENTRIES - 1) :]}
