"""A list-then-watch cache of one resource, as client-go's reflector keeps it.

**Which read each list is.** Every list used to be a consistent read: the API
server asks etcd (a quorum read) and copies every object out of it, the most
expensive request a client can make of a large cluster. A list says what it
needs with ``resourceVersion`` (the API's "Resource versions" semantics):

========================  ===========================================================================
``resourceVersion=""``    consistent: the newest state (etcd; or, from Kubernetes 1.31, the watch
                          cache once it has caught up with etcd)
``"0"``                   any state the API server's watch cache holds, possibly a little old; an API
                          server before 1.33 then ignores ``limit`` and sends everything at once
``N`` + ``NotOlderThan``  a state at least as new as ``N``, from the watch cache (with ``limit`` an
                          API server before 1.33 asks etcd instead, so pages are asked for only when
                          the server paged before); ``504 ResourceVersionTooLarge`` from a server
                          behind ``N``, ``410`` from a server that cannot serve it
streaming (WatchList)     a watch with ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan``
                          and bookmarks: the state as ``ADDED`` events, one per object, then a
                          ``BOOKMARK`` annotated ``k8s.io/initial-events-end``; then the watch goes
                          on. From the watch cache; ``resourceVersion=""`` is consistent. Behind a
                          feature gate: a server without it answers ``422 Invalid``
========================  ===========================================================================

An informer made with ``consistent=False`` (the default: pods and nodes of
``noe controller``, the Namespaces of ``noe serve``) first tries a streaming
list (consistent, served from the watch cache); where the server refuses it,
its first list is ``"0"`` (the watch cache), and a list after its watch
expired (``410``) is ``NotOlderThan`` the last version it saw, so it never goes
back in time; a ``410`` or ``504`` to that list falls back to a consistent
read. What the cache lags behind is delivered by the watch that follows from
the list's version, and every write noe makes from these caches is guarded by
the server (an eviction of a pod that is gone answers 404, a patch carries the
``resourceVersion`` it was computed from, a disruption budget is the server's).

An informer made with ``consistent=True`` (the placement policies and the
learned-platforms ConfigMap) reads the newest state every time, streamed or
paged: those lists are small, and what they hold is applied to every admitted
pod and written back as policy status, so an old copy from a lagging API server
would be acted on, not merely seen late.

**Memory.** A list's answer is decoded one item at a time
(:mod:`noe_web.kube.list_stream`), whether the server pages or not, and
applied to the cache in place: a changed object replaces its old copy as it
arrives, and once the list is complete the objects it did not contain are
dropped (reported deleted). A relist therefore holds no second copy of the
cache, only the set of keys it has seen. ``on_change(key, old, new)`` is called
for every change (``new`` is ``None`` on deletion) on the informer's own
thread; an object that comes back unchanged is not a change. While a list runs
the cyclic garbage collector is paused, and after it the surviving objects are
moved out of the collector's generations (:mod:`noe_web.kube.collector`): they
live as long as the cache, and a collector that scanned them at every full
collection made decoding a large list three times slower. A page is decoded
only as far as ``schema`` reads, when one is given (:mod:`noe_web.kube.list_schema`).

The watch resumes from the last version seen (bookmarks move it forward on a
quiet resource); ``410 Gone`` means list again. Connection errors are retried
with a capped exponential backoff.

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
from noe_web.kube.collector import COLLECTOR
from noe_web.kube.errors import Gone, KubeError, NotFound, TooLargeResourceVersion
from noe_web.kube.list_schema import ListSchema

log = logging.getLogger("noe.kube.informer")

Key = tuple[str, str]
Slim = Callable[[dict[str, Any]], dict[str, Any]]
OnChange = Callable[[Key, dict[str, Any] | None, dict[str, Any] | None], None]

PAGE_SIZE = 500
WATCH_SECONDS = 300
LIST_TIMEOUT = 60.0
"""Seconds each read of a list answer may wait for its next bytes."""
BACKOFF_START, BACKOFF_CAP = 0.2, 30.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
NOT_OLDER_THAN = "NotOlderThan"
STREAM_REFUSED = (400, 422)
"""What an API server answers a streaming list it does not offer (the WatchList gate off, or too old)."""

# What a list was, as :attr:`Informer.last_read` says it (and the log line of each list).
STREAM, CACHE, NOT_OLDER, CONSISTENT = "stream", "cache", "not-older-than", "consistent"


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
        consistent: bool = False,
        streaming: bool = False,
        schema: ListSchema | None = None,
    ) -> None:
        self.kube, self.path = kube, path
        self.schema = schema
        """The fields ``slim`` reads, as list pages and watch events are decoded into them
        (:mod:`noe_web.kube.list_schema`)."""
        self._slim, self._on_change, self._on_restart = slim, on_change, on_restart
        self.page_size, self.watch_seconds = page_size, watch_seconds
        self.absent_retry, self._on_absent = absent_retry, on_absent
        self.consistent, self.streaming = consistent, streaming
        self.absent = False
        self._broken_at: float | None = None
        self._items: dict[Key, dict[str, Any]] = {}
        self._seen: set[Key] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.synced = threading.Event()
        self.resource_version = ""
        self.lists = 0
        self.last_read = ""
        self.paginated = True
        """Whether the server pages this resource's lists (a watch-cache list may come whole)."""
        self.stream_refused = False
        """Whether the server refused the last streaming list (the next list is tried streamed again)."""
        self._version_unusable = False
        self._pausing = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"noe-informer{self.path}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def get(self, key: Key) -> dict[str, Any] | None:
        # one read of a dict is atomic: no lock, which workers examining pods would contend for on every pod
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
                    try:
                        complete, watched = self._sync()
                    finally:
                        self._resume_collector()  # a list broken off half-way
                    need_list = not complete
                    if not watched:
                        continue  # a paged list: its watch comes next
                else:
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

    def _sync(self) -> tuple[bool, bool]:
        """Read the whole state again: whether it is complete, and whether a watch ran (and ended) meanwhile
        (a streaming list goes on as the watch)."""
        if self.streaming:
            try:
                return self._watch(initial=True), True
            except KubeError as exc:
                if exc.status not in STREAM_REFUSED:
                    raise
                if not self.stream_refused:
                    log.info("%s: no streaming list here (%s): listing in pages", self.path, exc)
                self.stream_refused = True
        self._list()
        return True, False

    # --- lists -----------------------------------------------------------------------------------
    def _list(self) -> None:
        """A paged list, applied in place; ``NotOlderThan`` a known version falls back to a consistent read."""
        started = time.monotonic()
        # the first list from the watch cache ("0"), later ones not older than the last version seen
        version = "" if self.consistent or self._version_unusable else self.resource_version or "0"
        try:
            count = self._list_pages(version)
        except (Gone, TooLargeResourceVersion) as exc:
            if version in ("", "0"):
                raise
            log.info("%s: no list at resourceVersion %s here (%s): a consistent read", self.path, version, exc)
            self._version_unusable = True
            count = self._list_pages("")
        self._version_unusable = False
        self._listed(count, started)

    def _listed(self, count: int, started: float) -> None:
        """The log line of a complete list, paged or streamed."""
        log.info(
            "listed %s",
            self.path,
            extra={
                "fields": {
                    "event": "listed",
                    "path": self.path,
                    "objects": count,
                    "read": self.last_read,
                    "paginated": self.paginated and self.last_read != STREAM,
                    "seconds": round(time.monotonic() - started, 3),
                }
            },
        )

    def _list_pages(self, version: str) -> int:
        """Every page of one list at ``version``; the number of objects listed."""
        params: dict[str, str] = {}
        if version:
            params["resourceVersion"] = version
        if version not in ("", "0"):
            params["resourceVersionMatch"] = NOT_OLDER_THAN
        if version in ("", "0") or self.paginated:
            params["limit"] = str(self.page_size)
        read = CONSISTENT if not version else CACHE if version == "0" else NOT_OLDER
        self._begin()
        listed, first, list_version = 0, True, ""
        on_page = 0

        def take(item: dict[str, Any]) -> None:
            nonlocal on_page
            on_page += 1
            self._take(item)

        while True:
            on_page = 0
            meta = self.kube.list_streamed(self.path, params, take, timeout=LIST_TIMEOUT, schema=self.schema)
            listed += on_page
            list_version = list_version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue")
            if first and "limit" in params:
                if token:
                    self.paginated = True
                elif on_page > self.page_size:
                    self.paginated = False  # the watch cache answered everything at once
            first = False
            if not token:
                break
            params = {"limit": str(self.page_size), "continue": str(token)}
        self._end(list_version, read)
        return listed

    def _begin(self) -> None:
        if not self._pausing:
            COLLECTOR.pause()  # the objects a list keeps hold no cycle: not walked again and again while it runs
            self._pausing = True
        with self._lock:
            self._seen = set()

    def _resume_collector(self) -> None:
        """The list ended, complete or broken off: the collector runs again once no other list is under way."""
        if self._pausing:
            self._pausing = False
            COLLECTOR.resume()

    def _take(self, obj: dict[str, Any]) -> None:
        """One object of a list: into the cache in place, and a change reported if it is one."""
        key = key_of(obj)
        after = self._slim(obj)
        with self._lock:
            before = self._items.get(key)
            if before != after:
                self._items[key] = after
            if self._seen is not None:
                self._seen.add(key)
        if before != after:
            self._on_change(key, before, after)

    def _end(self, version: str, read: str) -> None:
        """The list is complete: what it did not hold is gone; the cache is current as of ``version``."""
        with self._lock:
            seen, self._seen = self._seen or set(), None
            gone = [(key, self._items.pop(key)) for key in [k for k in self._items if k not in seen]]
        del seen
        self.resource_version = version
        self.lists += 1
        self.last_read = read
        self._current()
        if self.absent:
            self.absent = False
            self._on_absent(False)
        for key, obj in gone:
            self._on_change(key, obj, None)
        self._resume_collector()  # and the cache frozen out of its generations (noe_web.kube.collector)
        self.synced.set()

    # --- watches ---------------------------------------------------------------------------------
    def _watch(self, *, initial: bool = False) -> bool:
        """Watch until the server ends it; with ``initial``, a streaming list first (whose state is applied
        in place, as a paged list's). ``True`` when the state is complete (always, without ``initial``)."""
        params = {"allowWatchBookmarks": "true", "timeoutSeconds": str(self.watch_seconds)}
        replacing, started, streamed = initial, time.monotonic(), 0
        if initial:
            usable = not (self.consistent or self._version_unusable)
            params["resourceVersion"] = self.resource_version if usable else ""
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = NOT_OLDER_THAN
            self._begin()
        else:
            params["resourceVersion"] = self.resource_version
        try:
            events = self.kube.watch(
                self.path, params, timeout=self.watch_seconds + 30, on_open=self._current, schema=self.schema
            )
            for event in events:
                if self._stop.is_set():
                    return not replacing
                kind, obj = event.get("type"), event.get("object")
                if not isinstance(obj, dict):
                    continue
                meta = obj.get("metadata") or {}
                version = str(meta.get("resourceVersion") or "")
                if kind == "BOOKMARK":
                    annotations = meta.get("annotations") or {}
                    if replacing and annotations.get(INITIAL_EVENTS_END) == "true":
                        replacing = False
                        self.stream_refused = False
                        self._end(version or self.resource_version, STREAM)
                        self._listed(streamed, started)
                    elif not replacing:
                        self.resource_version = version or self.resource_version
                    continue
                if replacing:
                    if kind == "ADDED":
                        self._take(obj)
                        streamed += 1
                    continue
                self._event(kind, obj, version)
        except Gone:
            if initial and params["resourceVersion"]:
                self._version_unusable = True  # the next try asks for the newest state
            raise
        except TooLargeResourceVersion:
            if initial:
                self._version_unusable = True
            raise
        return not replacing

    def _event(self, kind: Any, obj: dict[str, Any], version: str) -> None:
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
