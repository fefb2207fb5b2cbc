"""noe_web.kube.events: valid Event objects, owner events, bounded queue, a sink that fails."""

from __future__ import annotations

import re
import threading
from typing import Any

from noe_core.k8s.object_meta import read_object_meta
from noe_web.kube.events import (
    REASON_FAILED,
    REASON_INJECTED,
    EventRecorder,
    EventRequest,
    ObjectRef,
    build_event,
    controller_ref,
    event_name,
    object_ref,
)

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ListSink:
    def __init__(self, fail: bool = False, gate: threading.Event | None = None) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.gate = gate
        self.lock = threading.Lock()

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise ConnectionError("API down")
        with self.lock:
            self.events.append((namespace, event))


def pod(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "team", **meta}, "spec": {}}


def test_event_names_are_valid_for_named_and_generate_name_pods() -> None:
    named = object_ref(read_object_meta(pod(name="web")), kind="Pod", namespace="team")
    assert event_name(named).startswith("web.")
    generated = object_ref(read_object_meta(pod(generateName="web-7d4b9c-")), kind="Pod", namespace="team")
    assert generated.name == ""
    names = {event_name(generated) for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert DNS_SUBDOMAIN.match(name), name
        assert re.match(r"^web-7d4b9c-[a-z0-9]{5}\.[0-9a-f]{16}$", name), name
    odd = ObjectRef("v1", "Pod", "team", name="Weird_Name" + "x" * 300)
    name = event_name(odd)
    assert len(name) <= 253 and DNS_SUBDOMAIN.match(name)


def test_built_event_shape() -> None:
    ref = object_ref(read_object_meta(pod(generateName="job-", uid="")), kind="Pod", namespace="team")
    event = build_event(EventRequest(ref, "Warning", REASON_FAILED, "x" * 5000), instance="noe-0")
    assert event["type"] == "Warning" and event["reason"] == REASON_FAILED
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "team"}
    assert event["metadata"]["namespace"] == "team"
    assert len(event["message"]) <= 1024
    assert event["reportingComponent"] == "noe.adevinta.com/webhook"
    assert event["reportingInstance"] == "noe-0"
    assert event["source"]["component"] == "noe"
    assert event["firstTimestamp"].endswith("Z")


def test_controller_ref_only() -> None:
    obj = pod(
        generateName="web-",
        ownerReferences=[
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "1"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "2", "controller": True},
        ],
    )
    owner = controller_ref(read_object_meta(obj), "team")
    assert owner == ObjectRef("apps/v1", "ReplicaSet", "team", "web-7d4b9c", "2")
    assert controller_ref(read_object_meta(pod(name="x")), "team") is None
    garbage_collected_only = pod(name="y", ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}])
    assert controller_ref(read_object_meta(garbage_collected_only), "team") is None


def test_recorder_writes_in_background_and_dedupes_owner_events() -> None:
    sink = ListSink()
    recorder = EventRecorder(sink, instance="i")
    recorder.start()
    owner = ObjectRef("apps/v1", "ReplicaSet", "team", "web-1", "u")
    for i in range(5):
        recorder.record(EventRequest(ObjectRef("v1", "Pod", "team", f"p{i}"), "Normal", REASON_INJECTED, "m"))
        recorder.record(EventRequest(owner, "Normal", REASON_INJECTED, "m", is_owner=True))
    recorder.stop()
    kinds = [e["involvedObject"]["kind"] for _, e in sink.events]
    assert kinds.count("Pod") == 5 and kinds.count("ReplicaSet") == 1
    assert recorder.written == 6


def test_full_queue_drops_and_counts() -> None:
    gate = threading.Event()
    sink = ListSink(gate=gate)
    drops: list[str] = []
    recorder = EventRecorder(sink, maxsize=3, on_drop=drops.append)
    recorder.start()
    accepted = [
        recorder.record(EventRequest(ObjectRef("v1", "Pod", "t", f"p{i}"), "Normal", "R", "m")) for i in range(10)
    ]
    assert accepted.count(False) >= 6
    assert recorder.dropped == len(drops) == accepted.count(False)
    gate.set()
    recorder.stop()
    assert len(sink.events) == accepted.count(True)


def test_failing_sink_never_kills_the_worker() -> None:
    sink = ListSink(fail=True)
    outcomes: list[str] = []
    recorder = EventRecorder(sink, on_written=outcomes.append)
    recorder.start()
    for i in range(3):
        recorder.record(EventRequest(ObjectRef("v1", "Pod", "t", f"p{i}"), "Normal", "R", "m"))
    recorder.stop()
    assert outcomes == ["error"] * 3 and recorder.failed == 3
