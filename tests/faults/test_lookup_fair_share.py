"""One admission cannot starve the others of lookup capacity (issue 13, defect 3).

A pod naming thousands of images on a registry that never answers used to fill
the worker's shared lookup pool until its own deadline, so a pod arriving a
moment later, whose lookup needs 1.7 s, timed out instead of being placed.
Real services: the webhook's AdmissionService with the real Resolver, a
hanging TCP listener and a scripted registry that takes 1.7 s to answer.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from noe_core.errors import RegistryError
from noe_core.image.manifest import sha256_digest
from noe_core.policies.settings import PolicySettings
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.testing import admission_review, pod
from noe_core.util.deadline import Deadline
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService
from tests.support.scripted_server import (
    ARM64_CONFIG,
    OCI_MANIFEST,
    ScriptedServer,
    single_arch_manifest,
    start_scripted_server,
)

INSECURE = RegistrySettings(insecure_registries=("127.0.0.1:*",))
CONFIG = ARM64_CONFIG
DEADLINE = 3.0
SLOW = 1.7


@pytest.fixture
def hanging() -> Iterator[str]:
    """Accepts TCP connections and never answers a byte."""
    with socket.create_server(("127.0.0.1", 0), backlog=4096) as listener:
        yield f"127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def slow_registry() -> Iterator[ScriptedServer]:
    manifest = single_arch_manifest()

    def slow_manifest(_handler: Any) -> tuple[int, dict[str, str], bytes]:
        time.sleep(SLOW)
        return 200, {"Content-Type": OCI_MANIFEST}, manifest

    with start_scripted_server() as server:
        server.routes["/v2/app/manifests/v1"] = slow_manifest
        server.routes[f"/v2/app/blobs/{sha256_digest(CONFIG)}"] = lambda h: (200, {}, CONFIG)
        yield server


def test_a_pod_with_thousands_of_hanging_images_does_not_delay_the_next_pod(
    hanging: str,
    slow_registry: ScriptedServer,
) -> None:
    session = make_session(INSECURE)
    service = AdmissionService(
        policy=PolicySettings(),
        metrics=Metrics(),
        deadline_seconds=DEADLINE,
        resolver=Resolver(session, settings=INSECURE),
        pool_size=32,
    )
    try:
        greedy = admission_review(pod([f"{hanging}/img-{i}:v1" for i in range(3000)], namespace="greedy"))
        answers: dict[str, Any] = {}
        flood = threading.Thread(target=lambda: answers.update(greedy=service.review(greedy)))
        flood.start()
        time.sleep(0.3)  # the greedy pod's lookups have the pool
        start = time.monotonic()
        modest = admission_review(pod([f"{slow_registry.host}/app:v1"], namespace="modest"))
        response = service.review(modest)["response"]
        elapsed = time.monotonic() - start
        flood.join(30)
    finally:
        service.close()
        session.close()
    assert "patch" in response, f"the second pod was not placed ({elapsed:.1f}s): {response.get('warnings')}"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert "arm64" in json.dumps(patch)
    assert elapsed < DEADLINE, elapsed
    assert answers["greedy"]["response"]["allowed"] is True  # the greedy pod is answered too (unplaced)


def test_lookups_abandoned_at_the_deadline_let_go_of_the_registry(slow_registry: ScriptedServer) -> None:
    """A pod naming 40 images on a registry dripping 4 bytes/s: at the deadline its lookups hang up."""
    for i in range(40):
        slow_registry.routes[f"/v2/drip-{i}/manifests/v1"] = lambda h: (
            200,
            {"Content-Type": OCI_MANIFEST},
            b"{" + b" " * 4096 + b"}",
        )
        slow_registry.drip[f"/v2/drip-{i}/manifests/v1"] = 4.0
    session = make_session(INSECURE)
    resolver = Resolver(session, settings=INSECURE)
    with pytest.raises(RegistryError):  # learn that the host speaks plain HTTP, as a running webhook has
        resolver.resolve(f"{slow_registry.host}/warm-up:v1", deadline=Deadline.after(10))
    service = AdmissionService(
        policy=PolicySettings(),
        metrics=Metrics(),
        deadline_seconds=1.5,
        resolver=resolver,
        pool_size=64,
        lookup_share=64,
    )
    try:
        review = admission_review(pod([f"{slow_registry.host}/drip-{i}:v1" for i in range(40)], namespace="drip"))
        start = time.monotonic()
        service.review(review)
        answered = time.monotonic() - start
        end = time.monotonic() + 3.0  # the server notices a hang-up at its second write after it, 1-2 s
        while slow_registry.dripping and time.monotonic() < end:
            time.sleep(0.05)
        held = slow_registry.dripping
    finally:
        service.close()
        session.close()
    assert answered < 1.5 + 0.5, answered
    assert held == 0, f"{held} lookups still reading from the dripping registry 3 s after the deadline"
