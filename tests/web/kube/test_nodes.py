"""Nodes read for ``kubectl debug`` checks against a real HTTPS peer: labels read, cached, failures as values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from noe_core import testing
from noe_core.image.node_platform import NodePlatform
from noe_core.placement.ephemeral import NodeFailure
from noe_core.util.deadline import Deadline
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.nodes import KubeNodes
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api

TOKEN = "kube-token-nodes"


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("fake kube CA", tmp_path_factory.mktemp("kube-ca"))


@pytest.fixture
def api(kube_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(kube_ca, tokens=(TOKEN,)) as server:
        server.add_node(testing.node("arm-1", "arm64"))
        server.add_node(testing.node("win-1", "amd64", "windows", windows_build="10.0.20348", x86_64_level=3))
        yield server


@pytest.fixture
def client(api: FakeKubeAPI, tmp_path: Path) -> Iterator[KubeClient]:
    kube = KubeClient(load_kubeconfig(api.write_kubeconfig(tmp_path / "kc", token=TOKEN)), timeout=5.0)
    yield kube
    kube.close()


def _gets(api: FakeKubeAPI) -> list[str]:
    return [r.path for r in api.requests_snapshot() if r.path.startswith("/api/v1/nodes")]


def test_a_node_is_read_once_and_kept(api: FakeKubeAPI, client: KubeClient) -> None:
    nodes = KubeNodes(client)
    deadline = Deadline.after(5)
    assert nodes.platform("arm-1", deadline) == NodePlatform("linux", "arm64")
    assert nodes.platform("win-1", deadline) == NodePlatform("windows", "amd64", "10.0.20348", 3)
    assert nodes.platform("arm-1", deadline) == NodePlatform("linux", "arm64")
    assert _gets(api) == ["/api/v1/nodes/arm-1", "/api/v1/nodes/win-1"]


def test_failures_are_values_and_kept_briefly(api: FakeKubeAPI, client: KubeClient) -> None:
    nodes = KubeNodes(client, failure_ttl=60)
    missing = nodes.platform("gone", Deadline.after(5))
    assert missing == NodeFailure("GET /api/v1/nodes/gone: not found")
    assert nodes.platform("gone", Deadline.after(5)) == missing
    assert _gets(api) == ["/api/v1/nodes/gone"]
    api.state.nodes_forbidden = True
    forbidden = KubeNodes(client).platform("arm-1", Deadline.after(5))
    assert isinstance(forbidden, NodeFailure) and "403" in forbidden.reason
    assert KubeNodes(None).platform("arm-1", Deadline.after(5)) == NodeFailure("noe has no Kubernetes API access")
    assert KubeNodes(client).platform("../secrets", Deadline.after(5)) == NodeFailure(
        "the pod's nodeName is not a node name"
    )


def test_a_slow_api_is_cut_by_the_deadline(api: FakeKubeAPI, client: KubeClient) -> None:
    api.state.delay = 3.0
    deadline = Deadline.after(0.3)
    found = KubeNodes(client).platform("arm-1", deadline)
    assert isinstance(found, NodeFailure)
    assert deadline.remaining() > -0.5  # answered about when the deadline said, not after the API's 3 s
    assert KubeNodes(client).platform("arm-1", Deadline.after(0)) == NodeFailure(
        "no time left in the admission to read it"
    )
