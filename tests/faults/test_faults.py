"""A hostile registry beside the real one, against the real admission stack (issue 13, item 9).

The webhook's AdmissionService with the real Resolver and Flask app; the
real registry server for healthy images; a scripted registry (or a bare
socket) misbehaving in one way per case: hanging, dripping, 5xx, 429, huge
and gzip-bomb bodies, bad JSON, poisoned digests, redirect loops and
cross-host redirects, wrong-scope tokens, untrusted TLS. Each case asserts the
answer (admitted unplaced with a warning naming the registry), that it came
within the admission deadline, and that the next pod, on the healthy
registry, is still placed.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

from noe_core.image.manifest import sha256_digest
from noe_core.policies.settings import PolicySettings
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.testing import admission_review, pod
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService
from noe_web.webhook.app import Services, create_app
from tests.support.images import PushedImage
from tests.support.registry_server import RegistryServer
from tests.support.scripted_server import (
    ARM64_CONFIG,
    OCI_MANIFEST,
    ScriptedServer,
    single_arch_manifest,
    start_scripted_server,
)

pytestmark = [pytest.mark.faults, pytest.mark.registry]

DEADLINE = 2.0
SLACK = 0.8
CONFIG = ARM64_CONFIG
MANIFEST = single_arch_manifest()
MANIFEST_PATH = "/v2/app/manifests/v1"
Answer = tuple[int, dict[str, str], bytes]


@pytest.fixture
def hostile() -> Iterator[ScriptedServer]:
    with start_scripted_server() as server:
        server.routes[f"/v2/app/blobs/{sha256_digest(CONFIG)}"] = lambda h: (200, {}, CONFIG)
        yield server


@pytest.fixture
def accomplice() -> Iterator[ScriptedServer]:
    """A second host, for cross-host redirects and token realms."""
    with start_scripted_server() as server:
        yield server


@pytest.fixture
def hanging() -> Iterator[str]:
    with socket.create_server(("127.0.0.1", 0), backlog=64) as listener:
        yield f"127.0.0.1:{listener.getsockname()[1]}"


class Stack:
    def __init__(self, app: Flask, healthy: list[str]) -> None:
        self.app, self.healthy = app, healthy

    def admit(self, image: str) -> tuple[dict[str, Any], float]:
        review = admission_review(pod([image], namespace="faults"))
        start = time.monotonic()
        resp = self.app.test_client().post("/mutate", json=review)
        elapsed = time.monotonic() - start
        assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
        return resp.get_json()["response"], elapsed


def make_stack(insecure: tuple[str, ...], healthy: list[str]) -> Iterator[Stack]:
    settings = RegistrySettings(insecure_registries=insecure, max_retries=3)
    session = make_session(settings)
    service = AdmissionService(
        policy=PolicySettings(),
        metrics=Metrics(),
        deadline_seconds=DEADLINE,
        resolver=Resolver(session, settings=settings),
        pool_size=16,
    )
    try:
        yield Stack(create_app(Services(service)), healthy)
    finally:
        service.close()
        session.close()


@pytest.fixture
def stack(
    hostile: ScriptedServer,
    accomplice: ScriptedServer,
    hanging: str,
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
) -> Iterator[Stack]:
    healthy = [pushed_images[name].reference for name in ("docker-single-arm64", "docker-manifest-list")]
    yield from make_stack((hostile.host, accomplice.host, hanging, registry.host), healthy)


def assert_unplaced_in_time(response: dict[str, Any], elapsed: float, host: str) -> None:
    assert response["allowed"] is True and "patch" not in response, response
    assert any(host in w for w in response.get("warnings", [])), response.get("warnings")
    assert elapsed < DEADLINE + SLACK, f"answered after {elapsed:.2f}s"


def assert_next_pod_placed(stack: Stack) -> None:
    for image in stack.healthy:
        response, elapsed = stack.admit(image)
        assert "patch" in response, response
        assert elapsed < DEADLINE + SLACK, elapsed


GZIP_BOMB = gzip.compress(b" " * (64 * 1024 * 1024), compresslevel=9)  # 64 MiB in about 64 KiB


FAULTS: dict[str, Callable[[ScriptedServer, ScriptedServer], None]] = {
    "5xx": lambda h, a: h.routes.update({MANIFEST_PATH: lambda _: (503, {}, b"overloaded")}),
    "429": lambda h, a: h.routes.update({MANIFEST_PATH: lambda _: (429, {"Retry-After": "1"}, b"")}),
    "huge-body": lambda h, a: h.routes.update(
        {MANIFEST_PATH: lambda _: (200, {"Content-Type": OCI_MANIFEST}, b" " * (8 * 1024 * 1024))}
    ),
    "gzip-bomb": lambda h, a: h.routes.update(
        {MANIFEST_PATH: lambda _: (200, {"Content-Type": OCI_MANIFEST, "Content-Encoding": "gzip"}, GZIP_BOMB)}
    ),
    "bad-json": lambda h, a: h.routes.update(
        {MANIFEST_PATH: lambda _: (200, {"Content-Type": OCI_MANIFEST}, b'{"schemaVersion": 2, ')}
    ),
    "poisoned-digest": lambda h, a: h.routes.update(
        {
            MANIFEST_PATH: lambda _: (
                200,
                {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": "sha256:" + "0" * 64},
                MANIFEST,
            )
        }
    ),
    "poisoned-config": lambda h, a: h.routes.update(
        {
            MANIFEST_PATH: lambda _: (200, {"Content-Type": OCI_MANIFEST}, MANIFEST),
            f"/v2/app/blobs/{sha256_digest(CONFIG)}": lambda _: (200, {}, b'{"os":"linux","architecture":"amd64"}'),
        }
    ),
    "redirect-loop": lambda h, a: h.routes.update(
        {MANIFEST_PATH: lambda _: (302, {"Location": f"http://{h.host}{MANIFEST_PATH}"}, b"")}
    ),
    "cross-host-redirect-loop": lambda h, a: (
        h.routes.update({MANIFEST_PATH: lambda _: (307, {"Location": f"http://{a.host}/bounce"}, b"")}),
        a.routes.update({"/bounce": lambda _: (307, {"Location": f"http://{h.host}{MANIFEST_PATH}"}, b"")}),
    ),
    "wrong-scope-token": lambda h, a: (
        a.routes.update(
            {"/token": lambda _: (200, {"Content-Type": "application/json"}, b'{"token": "scoped-to-something-else"}')}
        ),
        h.routes.update(
            {
                MANIFEST_PATH: lambda _: (
                    401,
                    {
                        "WWW-Authenticate": f'Bearer realm="http://{a.host}/token",service="x",scope="repository:app:pull",'
                        'error="insufficient_scope"'
                    },
                    b'{"errors":[{"code":"DENIED"}]}',
                )
            }
        ),
    ),
    "drip": lambda h, a: (
        h.routes.update({MANIFEST_PATH: lambda _: (200, {"Content-Type": OCI_MANIFEST}, MANIFEST)}),
        h.drip.update({MANIFEST_PATH: 4.0}),
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_hostile_registry_fault(stack: Stack, hostile: ScriptedServer, accomplice: ScriptedServer, fault: str) -> None:
    FAULTS[fault](hostile, accomplice)
    response, elapsed = stack.admit(f"{hostile.host}/app:v1")
    assert_unplaced_in_time(response, elapsed, hostile.host)
    assert_next_pod_placed(stack)


def test_hanging_registry(stack: Stack, hanging: str) -> None:
    response, elapsed = stack.admit(f"{hanging}/app:v1")
    assert_unplaced_in_time(response, elapsed, hanging)
    assert_next_pod_placed(stack)


def test_cross_host_redirect_to_the_real_registry_is_followed(
    stack: Stack,
    hostile: ScriptedServer,
    pushed_images: dict[str, PushedImage],
    registry: RegistryServer,
) -> None:
    """Blob storage elsewhere is normal: following it places the pod, within the deadline."""
    image = pushed_images["docker-single-arm64"]
    hostile.routes[MANIFEST_PATH] = lambda _: (
        307,
        {"Location": f"http://{registry.host}/v2/{image.repository}/manifests/{image.digest}"},
        b"",
    )
    for digest in image.config_digests.values():
        hostile.routes[f"/v2/app/blobs/{digest}"] = lambda _, d=digest: (
            307,
            {"Location": f"http://{registry.host}/v2/{image.repository}/blobs/{d}"},
            b"",
        )
    response, elapsed = stack.admit(f"{hostile.host}/app:v1")
    assert "patch" in response, response
    assert "arm64" in json.dumps(json.loads(base64.b64decode(response["patch"])))
    assert elapsed < DEADLINE + SLACK
    assert_next_pod_placed(stack)


def test_untrusted_tls_registry(
    tls_registry: RegistryServer,
    tls_pushed_images: dict[str, PushedImage],
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
) -> None:
    healthy = [pushed_images["docker-single-arm64"].reference]
    for stack in make_stack((registry.host,), healthy):  # the TLS registry is not trusted, nor insecure
        image = tls_pushed_images["docker-single-arm64"].reference
        response, elapsed = stack.admit(image)
        assert_unplaced_in_time(response, elapsed, tls_registry.host)
        assert any("TLS" in w for w in response["warnings"]), response["warnings"]
        assert_next_pod_placed(stack)


def test_answers_are_valid_patches(stack: Stack) -> None:
    response, _ = stack.admit(stack.healthy[0])
    ops = json.loads(base64.b64decode(response["patch"]))
    assert any("kubernetes.io/arch" in json.dumps(op) for op in ops)
