"""The webhook's admission service: rule 13a's fallback architecture as the webhook answers and records it."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from noe_core.image.declared import StaticPlatforms
from noe_core.policies.settings import PolicySettings
from noe_core.testing import admission_review, node, pod, schedulable
from noe_core.util.json_patch import apply_patch
from noe_web.kube.events import EventRecorder
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService

PLATFORMS = {
    "app:1": ["linux/amd64", "linux/arm64"],
    "down:1": {"error": "registry.corp answered 503 Service Unavailable"},
}
NODES = [node(f"n-{arch}", arch) for arch in ("amd64", "arm64")]


class Sink:
    """Where the recorder writes Events: kept, for the test to read."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        self.events.append(event)


def service(settings: PolicySettings, sink: Sink) -> AdmissionService:
    recorder = EventRecorder(sink)
    recorder.start()
    return AdmissionService(
        policy=settings, metrics=Metrics(), static=StaticPlatforms.from_mapping(PLATFORMS), events=recorder
    )


def answer(svc: AdmissionService, obj: dict[str, Any]) -> dict[str, Any]:
    review = svc.review(admission_review(obj, namespace="apps"))
    return review["response"]  # type: ignore[no-any-return]


def wait_for(sink: Sink, count: int) -> list[dict[str, Any]]:
    end = time.monotonic() + 5
    while time.monotonic() < end and len(sink.events) < count:
        time.sleep(0.02)
    return sink.events


def test_the_webhook_falls_back_with_the_label_and_a_normal_event() -> None:
    sink = Sink()
    svc = service(PolicySettings(fallback_arch="arm64"), sink)
    try:
        obj = pod(["app:1", "down:1"], namespace="apps")
        response = answer(svc, obj)
        patched = apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
        assert {n["metadata"]["name"] for n in NODES if schedulable(patched, n)} == {"n-arm64"}
        assert patched["metadata"]["labels"]["arch.noe.adevinta.com/fallback"] == "true"
        assert any("down:1" in w for w in response["warnings"])  # rule 5's warning still names the image
        (event,) = wait_for(sink, 1)
        assert (event["type"], event["reason"]) == ("Normal", "FallbackArchitecture")
        assert "arm64" in event["message"] and "down:1" in event["message"]
    finally:
        svc.close()


def test_without_the_flag_nothing_changes() -> None:
    sink = Sink()
    svc = service(PolicySettings(), sink)
    try:
        obj = pod(["app:1", "down:1"], namespace="apps")
        response = answer(svc, obj)
        patched = apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
        assert {n["metadata"]["name"] for n in NODES if schedulable(patched, n)} == {"n-amd64", "n-arm64"}
        assert "arch.noe.adevinta.com/fallback" not in (patched["metadata"].get("labels") or {})
        assert [e["reason"] for e in wait_for(sink, 1)] == ["InjectedNodeSelector"]
    finally:
        svc.close()
