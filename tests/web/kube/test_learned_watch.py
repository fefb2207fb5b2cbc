"""The webhook's watch of noe-learned-platforms, against the HTTPS stand-in API server: an entry the
controller records takes the architecture out of that digest for admissions; deleting it undoes it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import ImagePlatforms, fixed
from noe_core.image.learned import CONFIGMAP, data_key
from noe_core.policies.settings import PolicySettings
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.learned_watch import LearnedWatch
from tests.support.certs import CA, make_ca
from tests.support.fake_cluster import FakeCluster, start_fake_cluster

TOKEN = "learned-watch-token"
DIGEST = "sha256:" + "e" * 64
IMAGE = "registry.example/web:1"
LOOKUPS = {IMAGE: ImagePlatforms.of("linux/amd64", "linux/arm64", digest=DIGEST)}
NODES = [testing.node("amd", "amd64"), testing.node("arm", "arm64")]


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("learned watch kube CA", tmp_path_factory.mktemp("learned-watch-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.2
        yield c


@pytest.fixture
def watch(cluster: FakeCluster, tmp_path: Path) -> Iterator[LearnedWatch]:
    kube = KubeClient(load_kubeconfig(cluster.api.write_kubeconfig(tmp_path / "kc", token=TOKEN)))
    running = LearnedWatch(kube, "noe")
    running.start()
    assert running.informer.synced.wait(10)
    yield running
    running.stop()


def placed(watch: LearnedWatch) -> tuple[set[str], tuple[str, ...]]:
    review = parse_admission_review(testing.admission_review(testing.pod([IMAGE])))
    inspect = fixed(LOOKUPS)
    decision = admit(review, PolicySettings(), lambda request: watch.current().apply(inspect(request))).decision
    archs = {n["metadata"]["labels"]["kubernetes.io/arch"] for n in NODES if testing.schedulable(decision.obj, n)}
    return archs, decision.warnings


def soon(condition: Callable[[], Any], within: float = 2.0) -> Any:
    end = time.monotonic() + within
    while not (value := condition()) and time.monotonic() < end:
        time.sleep(0.02)
    return value


def test_learning_and_unlearning_through_the_configmap(cluster: FakeCluster, watch: LearnedWatch) -> None:
    assert placed(watch) == ({"amd64", "arm64"}, ())
    value = json.dumps({"architectures": ["arm64"], "evidence": ["shop/web-1"], "time": "2026-12-03T10:00:00Z"})
    cluster.add(
        "configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": "noe"},
            "data": {data_key(DIGEST): value},
        },
    )
    cluster.add(
        "configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "other", "namespace": "noe"},
            "data": {data_key(DIGEST): value},
        },
    )
    assert soon(lambda: placed(watch)[0] == {"amd64"})
    assert placed(watch)[1] == (
        f"{IMAGE}: arm64 left out: {DIGEST} failed with exec format error on arm64 (pod shop/web-1)",
    )
    cluster.update("configmaps", "noe", CONFIGMAP, lambda cm: cm["data"].clear())  # deleting the entry undoes it
    assert soon(lambda: placed(watch) == ({"amd64", "arm64"}, ()))
