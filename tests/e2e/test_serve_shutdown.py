"""Rollouts drop no admission: ``noe serve`` answers the reviews in flight when it is told to stop.

Kubernetes sends SIGTERM to a pod it removes (after the preStop hook); the API
server may have sent it an AdmissionReview a moment before. A registry that
never answers makes that admission last until ``--admission-deadline``; the
SIGTERM lands in the middle of it, and the answer must still arrive.
"""

from __future__ import annotations

import concurrent.futures
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from noe_core.testing import admission_review, pod
from tests.support.noe_serve import post_review, start_noe

pytestmark = pytest.mark.e2e

DEADLINE = 3.0


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """Accepts TCP connections (the kernel's backlog) and never answers a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_sigterm_during_a_slow_admission_still_answers_it(tmp_path: Path, silent_registry: str) -> None:
    noe = start_noe(
        tmp_path,
        [
            "--insecure-registries",
            "127.0.0.1:*",
            "--admission-deadline",
            str(DEADLINE),
            "--graceful-timeout",
            "15",
            "--workers",
            "1",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        None,
    )
    try:
        review = admission_review(pod([f"{silent_registry}/stuck/app:1"], namespace="rollout"), uid=str(uuid.uuid4()))
        with noe.session() as http, concurrent.futures.ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            answer = pool.submit(post_review, http, noe, review, DEADLINE + 20)
            time.sleep(1.0)  # the admission is waiting on the registry now
            assert not answer.done()
            noe.proc.send_signal(signal.SIGTERM)
            response = answer.result(timeout=DEADLINE + 20)
            elapsed = time.monotonic() - started
        assert response["allowed"] is True
        assert any("stuck/app" in w for w in response.get("warnings", [])), response
        assert elapsed >= DEADLINE - 0.5, "answered before the lookup deadline: the admission was not slow"
        # and then the server stops by itself, well within Kubernetes' grace period
        assert noe.proc.wait(30) == 0, noe.output()[-3000:]
    finally:
        noe.stop()
