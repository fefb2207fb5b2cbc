"""A list-then-watch cache of one resource, as client-go's reflector keeps it.

The informer lists in pages (``limit``/``continue``), then watches from the
list's ``resourceVersion`` with bookmarks (so a quiet resource still moves the
version forward and a reconnect does not replay or miss anything). A watch the
server ends is resumed from the last version seen; ``410 Gone`` (the version
was compacted away) means list again, and objects that vanished meanwhile are
reported deleted. Connection errors are retried with a capped exponential
backoff. Only what ``slim`` keeps of each object is stored, so memory grows
with the number of objects, not with the size of their specs and statuses.

Once the first list is in, :attr:`synced` is set; ``on_change(key, old, new)``
is called for every change (``new`` is ``None`` on deletion) on the
informer's own thread.

A resource that may not be installed (a custom resource whose CRD is absent:
``absent_retry`` seconds given) answers its list with 404: the cache is then
empty, :attr:`absent` and :attr:`synced` are set, ``on_absent(True)`` is called,
and the list is tried again every ``absent_retry`` seconds, so a CRD installed
later is picked up (``on_absent(False)``).

:meth:`stale_for` says how long the cache may have missed changes: 0 while a
watch is open (or the last list is fresh), and the time since the watch broke
while it is being re-established — the age of the last good state.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from noe_web.kube.client import KubeClient
from noe_web.kube.errors import Gone, KubeError, NotFound

log = logging.getLogger("noe.kube.informer")

Key = tuple[str, str]
Slim = Callable[[dict[str, Any]], dict[str, Any]]
OnChange = Callable[[Key, dict[str, Any] | None, dict[str, Any] | None], None]

PAGE_SIZE = 500
WATCH_SECONDS = 300
BACKOFF_START, BACKOFF_CAP = 0.2, 30.0


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Informer:
    """One resource's cache, filled by list and watch on a daemon thread."""

    def __init__(
        self,
        kube: KubeClient,
        path: str,
        *,
        slim: Slim,
        on_change: OnChange,
        on_restart: Callable[[str], None] = lambda reason: None,
        page_size: int = PAGE_SIZE,
        watch_seconds: int = WATCH_SECONDS,
        absent_retry: float | None = None,
        on_absent: Callable[[bool], None] = lambda absent: None,
    ) -> None:
        self.kube, self.path = kube, path
        self._slim, self._on_change, self._on_restart = slim, on_change, on_restart
        self.page_size, self.watch_seconds = page_size, watch_seconds
        self.absent_retry, self._on_absent = absent_retry, on_absent
        self.absent = False
        self._broken_at: float | None = None
        self._items: dict[Key, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.synced = threading.Event()
        self.resource_version = ""
        self.lists = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"noe-informer{self.path}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def get(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(key)

    def key_list(self) -> list[Key]:
        with self._lock:
            return list(self._items)

    def values(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def stale_for(self, now: float | None = None) -> float:
        """Seconds since the cache was last known current (0 while its watch is open)."""
        broken = self._broken_at
        if broken is None:
            return 0.0
        return max(0.0, (time.monotonic() if now is None else now) - broken)

    def _current(self) -> None:
        self._broken_at = None

    def _broken(self) -> None:
        if self._broken_at is None:
            self._broken_at = time.monotonic()

    # --- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        backoff = BACKOFF_START
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                backoff = BACKOFF_START  # the server ended a healthy watch: resume at once
                self._on_restart("ended")
            except Gone:
                log.info("watch of %s: resourceVersion %s is gone: listing again", self.path, self.resource_version)
                need_list = True
                self._broken()
                self._on_restart("gone")
            except NotFound as exc:
                if self.absent_retry is None:
                    self._failed(exc, backoff)
                    backoff = min(backoff * 2, BACKOFF_CAP)
                    continue
                # the list's 404: not installed, look again later; a watch's: it went away, list to see
                wait = self._absent() if need_list else 0.0
                need_list = True
                if self._stop.wait(wait):
                    return
            except KubeError as exc:
                self._failed(exc, backoff)
                if self._stop.wait(backoff * random.uniform(0.8, 1.2)):  # noqa: S311
                    return
                backoff = min(backoff * 2, BACKOFF_CAP)

    def _failed(self, exc: KubeError, backoff: float) -> None:
        log.warning("watch of %s failed (%s); retrying in %.1fs", self.path, exc, backoff)
        self._broken()
        self._on_restart("error")

    def _absent(self) -> float:
        """The resource is not installed: an empty cache, synced; the wait before looking again."""
        with self._lock:
            old_items, self._items = self._items, {}
        for key, obj in old_items.items():
            self._on_change(key, obj, None)
        self.resource_version = ""
        self._current()  # nothing to miss: the API answered that there is nothing
        if not self.absent:
            self.absent = True
            self._on_absent(True)
        self.synced.set()
        return float(self.absent_retry or 0)

    def _list(self) -> None:
        fresh: dict[Key, dict[str, Any]] = {}
        params: dict[str, str] = {"limit": str(self.page_size)}
        version = ""
        while True:
            page = self.kube.call("GET", self.path, params=params, timeout=60)
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            for item in page.get("items") or ():
                if isinstance(item, dict):
                    fresh[key_of(item)] = self._slim(item)
            token = meta.get("continue")
            if not token:
                break
            params = {"limit": str(self.page_size), "continue": str(token)}
        with self._lock:
            old_items, self._items = self._items, fresh
        self.resource_version = version
        self.lists += 1
        self._current()
        if self.absent:
            self.absent = False
            self._on_absent(False)
        for key in old_items.keys() - fresh.keys():
            self._on_change(key, old_items[key], None)
        for key, obj in fresh.items():
            before = old_items.get(key)
            if before != obj:
                self._on_change(key, before, obj)
        self.synced.set()

    def _watch(self) -> None:
        params = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_seconds),
        }
        for event in self.kube.watch(self.path, params, timeout=self.watch_seconds + 30, on_open=self._current):
            if self._stop.is_set():
                return
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if kind == "BOOKMARK":
                self.resource_version = version or self.resource_version
                continue
            key = key_of(obj)
            with self._lock:
                before = self._items.get(key)
                after = None if kind == "DELETED" else self._slim(obj)
                if after is None:
                    self._items.pop(key, None)
                else:
                    self._items[key] = after
            if version:
                self.resource_version = version
            if before != after:
                self._on_change(key, before, after)
