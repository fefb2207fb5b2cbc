"""A registry that drips its answers a few bytes a second cannot outlast the lookup's deadline.

Socket timeouts restart with every byte; the sender's exchange is bounded by
wall-clock time instead (issue 13, defect 2): connect, headers and the whole
body together, for the library, the webhook's lookups and ``noe inspect --timeout``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import requests

from noe_core.errors import DeadlineExceeded
from noe_core.image.manifest import sha256_digest
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from tests.support.paths import ROOT
from tests.support.scripted_server import (
    ARM64_CONFIG,
    OCI_MANIFEST,
    ScriptedServer,
    single_arch_manifest,
    start_scripted_server,
)

INSECURE = RegistrySettings(insecure_registries=("127.0.0.1:*",))
RATE = 4.0  # bytes per second


CONFIG = ARM64_CONFIG
CONFIG_PATH = f"/v2/app/blobs/{sha256_digest(CONFIG)}"


@pytest.fixture
def dripping() -> Iterator[ScriptedServer]:
    with start_scripted_server() as server:
        server.routes[CONFIG_PATH] = lambda h: (200, {}, CONFIG)
        server.routes["/v2/app/manifests/v1"] = lambda h: (200, {"Content-Type": OCI_MANIFEST}, single_arch_manifest())
        yield server


@pytest.fixture
def session() -> Iterator[requests.Session]:
    s = make_session(INSECURE)
    yield s
    s.close()


@pytest.mark.parametrize("path", ["/v2/app/manifests/v1", CONFIG_PATH])
def test_dripping_answer_stops_at_the_deadline(dripping: ScriptedServer, session: requests.Session, path: str) -> None:
    """The manifest or the config blob drips (status line, headers and body): the deadline holds."""
    dripping.drip[path] = RATE
    with Resolver(session, settings=INSECURE) as resolver:
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded) as caught:
            resolver.resolve(f"{dripping.host}/app:v1", deadline=Deadline.after(1.5))
        elapsed = time.monotonic() - start
    assert elapsed < 1.5 + 0.5, f"a registry dripping {RATE} bytes/s held the lookup {elapsed:.1f}s"
    assert dripping.host in str(caught.value)


def test_noe_inspect_timeout_holds_against_a_dripping_registry(dripping: ScriptedServer) -> None:
    dripping.drip["/v2/app/manifests/v1"] = RATE
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "noe_core.cli.inspect",
            f"{dripping.host}/app:v1",
            "--timeout",
            "4",
            "--insecure-registries",
            "127.0.0.1:*",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    elapsed = time.monotonic() - start
    assert elapsed < 4 + 3, f"noe inspect --timeout 4 took {elapsed:.1f}s"
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "deadline" in lines[0], proc.stderr
