"""``noe controller`` learns from exec format errors, against the HTTPS stand-in cluster: the digest and the
node's architecture recorded in the ConfigMap noe-learned-platforms of noe's namespace, a conflicting write
(another writer first) read again and retried without losing either change, nothing written on --dry-run."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core import testing
from noe_core.image.learned import CONFIGMAP, data_key
from tests.support.certs import CA, make_ca
from tests.support.controller import Controllers
from tests.support.fake_cluster import FakeCluster, owned_by, ready, start_fake_cluster

TOKEN = "controller-learning-" + uuid.uuid4().hex
DIGEST = "sha256:" + "d" * 64
OTHER = "sha256:" + "0" * 64


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("controller learning kube CA", tmp_path_factory.mktemp("controller-learning-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.3
        c.add("nodes", testing.node("n-arm64", "arm64"))
        yield c


@pytest.fixture
def controller(cluster: FakeCluster, tmp_path: Path) -> Iterator[Controllers]:
    controllers = Controllers(cluster, tmp_path, TOKEN, "--noe-namespace", "noe")
    yield controllers
    controllers.stop()


def failing_pod(name: str = "web-1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "ownerReferences": owned_by("ReplicaSet", "web-5d8f")},
        "spec": {"nodeName": "n-arm64", "containers": [{"name": "web", "image": "registry.example/web:1"}]},
        "status": {
            **ready(False),
            "containerStatuses": [
                {
                    "name": "web",
                    "image": "registry.example/web:1",
                    "imageID": f"docker-pullable://registry.example/web@{DIGEST}",
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "exec /web: exec format error"}},
                    "lastState": {},
                }
            ],
        },
    }


def learned(cluster: FakeCluster) -> dict[str, Any]:
    found = cluster.get("configmaps", "noe", CONFIGMAP) or {}
    return {key: json.loads(value) for key, value in (found.get("data") or {}).items()}


def test_an_exec_format_error_is_recorded_for_the_digest_and_architecture(
    cluster: FakeCluster, controller: Controllers
) -> None:
    cluster.add("pods", failing_pod())
    controller()
    assert cluster.wait(lambda: learned(cluster), 15), "nothing learned"
    entry = learned(cluster)[data_key(DIGEST)]
    assert entry["architectures"] == ["arm64"] and entry["evidence"] == ["shop/web-1"]
    assert entry["time"].endswith("Z")


def test_a_conflicting_write_is_read_again_and_retried(cluster: FakeCluster, controller: Controllers) -> None:
    other = json.dumps({"architectures": ["ppc64le"], "evidence": ["x/y"], "time": "2026-12-01T00:00:00Z"})
    cluster.add(
        "configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP, "namespace": "noe"}, "data": {}},
    )
    # another writer records its entry between the controller's read and its write: the write gets 409
    cluster.change_before_next_put(lambda cm: cm.setdefault("data", {}).update({data_key(OTHER): other}))
    cluster.add("pods", failing_pod())
    running = controller()
    assert cluster.wait(lambda: data_key(DIGEST) in learned(cluster), 15)
    assert set(learned(cluster)) == {data_key(DIGEST), data_key(OTHER)}  # neither update lost
    assert running.controller.learning is not None and running.controller.learning.conflicts == 1
    puts = [p for m, p in cluster.writes() if m == "PUT" and "/configmaps/" in p]
    assert len(puts) == 2


def test_dry_run_learns_nothing(cluster: FakeCluster, controller: Controllers) -> None:
    cluster.add("pods", failing_pod())
    controller("--dry-run")
    assert cluster.wait(lambda: cluster.events("ExecFormatError"), 15)
    time.sleep(0.5)
    assert cluster.get("configmaps", "noe", CONFIGMAP) is None
