"""Kubernetes Events about admissions, written off the request path.

An admission only *enqueues* :class:`EventRequest` values; one background
thread turns them into ``core/v1`` Events and POSTs them. The queue is
bounded: when the API is slow and it fills up, new events are dropped and
counted rather than slowing admissions down or growing memory.

Each admission that changed the pod yields a Normal ``InjectedNodeSelector``;
a deny or an allowed pod whose images could not all be inspected yields a
Warning ``FailedToInjectNodeSelector``. The event is recorded on the pod and
on its controller owner (``ownerReferences[].controller: true``). A pod
created with ``generateName`` has no name yet at admission time (the API
server names it afterwards), so its event is named after the generateName plus
a random suffix and its ``involvedObject`` carries no name; the owner's event
is the one ``kubectl describe`` finds. Events on an owner with the same reason
and message are written once per ``owner_repeat_after`` seconds, so a
ReplicaSet scaling to 500 pods does not write 500 identical owner events.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import datetime as dt
import logging
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from noe_core.image.image_platforms import LookupFailure
from noe_core.k8s.object_meta import ObjectMeta
from noe_core.placement.rules import Decision
from noe_core.util.printable import printable

log = logging.getLogger("noe.events")

NORMAL = "Normal"
WARNING = "Warning"
REASON_INJECTED = "InjectedNodeSelector"
REASON_FAILED = "FailedToInjectNodeSelector"
REASON_FALLBACK = "FallbackArchitecture"
"""Rule 13a: a pod required onto its fallback architecture because an image could not be inspected."""
REPORTING_CONTROLLER = "noe.adevinta.com/webhook"
COMPONENT = "noe"
MAX_MESSAGE = 1024
MAX_NAME = 253
# The alphabet kube-apiserver uses for generateName suffixes (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_INVALID_NAME_CHARS = re.compile(r"[^a-z0-9.-]+")


class EventSink(Protocol):
    def create_event(self, namespace: str, event: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class ObjectRef:
    """What an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str = ""
    uid: str = ""
    generate_name: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace}
        if self.name:
            out["name"] = self.name
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class EventRequest:
    """One Event to write: about ``regarding``, of ``type`` with ``reason`` and ``message``."""

    regarding: ObjectRef
    type: str
    reason: str
    message: str
    is_owner: bool = False


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))


def _dns_subdomain(text: str) -> str:
    name = _INVALID_NAME_CHARS.sub("-", text.lower())
    name = re.sub(r"\.{2,}", ".", name).strip(".-")
    return name or "object"


def event_name(ref: ObjectRef) -> str:
    """A valid, unique Event name: ``<object name>.<16 hex>`` (Kubernetes' own pattern).

    For an object that has only a generateName, the object part is the
    generateName plus a random suffix, the way the API server would name it.
    """
    base = ref.name or (ref.generate_name + random_suffix() if ref.generate_name else ref.kind.lower())
    unique = secrets.token_hex(8)
    base = _dns_subdomain(base)[: MAX_NAME - len(unique) - 1].rstrip(".-") or "object"
    return f"{base}.{unique}"


def build_event(req: EventRequest, *, instance: str, now: dt.datetime | None = None) -> dict[str, Any]:
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = printable(req.message)  # owner names come from the pod as sent, not yet validated
    message = text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(req.regarding), "namespace": req.regarding.namespace},
        "involvedObject": req.regarding.to_json(),
        "type": req.type,
        "reason": req.reason,
        "message": message,
        "source": {"component": COMPONENT, "host": instance},
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def object_ref(meta: ObjectMeta, *, kind: str, namespace: str) -> ObjectRef:
    """A reference to the object whose metadata is ``meta`` (read once where the object came in)."""
    api_version = meta.api_version or ("apps/v1" if kind == "DaemonSet" else "v1")
    return ObjectRef(api_version, kind, namespace, meta.name, meta.uid, meta.generate_name)


def controller_ref(meta: ObjectMeta, namespace: str) -> ObjectRef | None:
    """The object's controlling owner (``ownerReferences[].controller: true``) as an :class:`ObjectRef`.

    ``None`` when no owner controls it: only a controller's events concern the pods it makes.
    """
    owner = meta.owner
    if owner is None or not owner.controller:
        return None
    return ObjectRef(owner.api_version, owner.kind, namespace, owner.name, owner.uid)


class EventRecorder:
    """A bounded queue and one worker thread that writes Events through a sink."""

    def __init__(
        self,
        sink: EventSink,
        *,
        maxsize: int = 1000,
        instance: str | None = None,
        owner_repeat_after: float = 600.0,
        on_drop: Callable[[str], None] | None = None,
        on_written: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink = sink
        # Each request with the context it was recorded in: its POST is a span of that admission's trace.
        self._queue: queue.Queue[tuple[EventRequest, contextvars.Context] | None] = queue.Queue(maxsize=maxsize)
        self.instance = instance or socket.gethostname()
        self._owner_repeat_after = owner_repeat_after
        self._owner_seen: collections.OrderedDict[tuple[str, ...], float] = collections.OrderedDict()
        self._on_drop = on_drop or (lambda reason: None)
        self._on_written = on_written or (lambda outcome: None)
        self._clock = clock
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.written = 0
        self.failed = 0
        self._last_failure_log = 0.0

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="noe-events", daemon=True)
                self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (within ``timeout``) and stop the worker."""
        thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        thread.join(timeout)
        self._thread = None

    def _owner_is_fresh(self, req: EventRequest) -> bool:
        """False when the same owner event was written recently (and remembers this one)."""
        key = (req.regarding.namespace, req.regarding.kind, req.regarding.name, req.reason, req.message)
        now = self._clock()
        with self._lock:
            seen = self._owner_seen.get(key)
            if seen is not None and now - seen < self._owner_repeat_after:
                return False
            self._owner_seen[key] = now
            self._owner_seen.move_to_end(key)
            while len(self._owner_seen) > 4096:
                self._owner_seen.popitem(last=False)
            return True

    def record(self, req: EventRequest) -> bool:
        """Enqueue without blocking; ``False`` (and counted) when the queue is full."""
        if req.is_owner and not self._owner_is_fresh(req):
            return False
        try:
            self._queue.put_nowait((req, contextvars.copy_context()))
        except queue.Full:
            with self._lock:
                self.dropped += 1
            self._on_drop("queue_full")
            return False
        return True

    def pending(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            req, context = item
            event = build_event(req, instance=self.instance)
            try:
                context.run(self._sink.create_event, req.regarding.namespace, event)
            except Exception as exc:  # the sink's errors must never kill the worker
                with self._lock:
                    self.failed += 1
                self._on_written("error")
                now = self._clock()
                if now - self._last_failure_log > 60:
                    self._last_failure_log = now
                    log.warning(
                        "could not write an Event (%s: %s); further failures in 60 s are not logged",
                        type(exc).__name__,
                        exc,
                    )
            else:
                with self._lock:
                    self.written += 1
                self._on_written("ok")


def fallback_message(decision: Decision) -> str:
    """The ``FallbackArchitecture`` Event's words: which images could not be inspected, and where the pod goes."""
    failed = [image for image, found in decision.lookups.items() if isinstance(found, LookupFailure)]
    shown = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    return (
        f"required kubernetes.io/arch in [{decision.fallback}] (fallback architecture): {shown} could not be inspected"
    )
