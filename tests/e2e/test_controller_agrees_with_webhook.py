"""``noe controller`` never evicts what the webhook placed: both decide through the one placement pipeline.

Against the HTTPS stand-in cluster and the real registry. Pods are admitted by the webhook's own
``admit`` with the cluster's placement policies (selecting pods by ``podSelector`` and declaring
``imagePlatforms``) and learned platforms, then bound to a node their patch allows, not Ready and owned by
a ReplicaSet: the controller evicts such a pod whenever it judges its node wrong. It must judge them all
right — and still evict a pod bound where the webhook's decision would not allow it, by the same
platforms (declared, registry, learned). A later policy change (a narrower ``schedulableArchitectures``)
moves no running pod.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.learned import CONFIGMAP, LearnedPlatforms, data_key, read_learned
from noe_core.policies.documents import read_documents
from noe_core.policies.settings import PolicySettings
from noe_core.registry.lookup_service import LookupService
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from noe_web.controller.command import Running
from tests.support.certs import CA, make_ca
from tests.support.controller import Controllers, settle
from tests.support.fake_cluster import FakeCluster, owned_by, ready, start_fake_cluster
from tests.support.images import PushedImage

pytestmark = [pytest.mark.registry, pytest.mark.e2e]

TOKEN = "one-decision-" + uuid.uuid4().hex
NODES = [testing.node(f"n-{arch}", arch) for arch in ("amd64", "arm64", "ppc64le")]
CLUSTER, NAMESPACED = "clusterplacementpolicies", "placementpolicies"


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("one decision kube CA", tmp_path_factory.mktemp("one-decision-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.3
        for node in NODES:
            c.add("nodes", node)
        c.add("namespaces", testing.namespace("team-a", {"env": "prod"}))
        yield c


@pytest.fixture
def controller(cluster: FakeCluster, tmp_path: Path) -> Iterator[Callable[..., Running]]:
    controllers = Controllers(cluster, tmp_path, TOKEN, "--noe-namespace", "noe")
    yield controllers
    controllers.stop()


def policies(amd64_only: str, multi: str) -> list[dict[str, Any]]:
    """A cluster policy declaring an amd64-only image runnable on arm64 too, for pods labelled app=web; a team
    policy declaring the multi-arch image ppc64le-only for pods labelled tier=db."""
    return [
        testing.cluster_policy(
            "web-declares",
            podSelector={"matchLabels": {"app": "web"}},
            imagePlatforms=[{"image": amd64_only, "platforms": ["linux/amd64", "linux/arm64"]}],
        ),
        testing.placement_policy(
            "db-declares",
            "team-a",
            podSelector={"matchLabels": {"tier": "db"}},
            imagePlatforms=[{"image": multi, "platforms": ["linux/ppc64le"]}],
        ),
    ]


def learned_configmap(digest: str) -> dict[str, Any]:
    """What ``noe controller`` records after an exec format error of ``digest`` on arm64."""
    value = json.dumps({"architectures": ["arm64"], "evidence": ["team-a/old"], "time": "2026-12-01T00:00:00Z"})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": "noe"},
        "data": {data_key(digest): value},
    }


def webhook_decision(pod: dict[str, Any], docs: list[dict[str, Any]], learned: LearnedPlatforms) -> dict[str, Any]:
    """The pod as the webhook's own ``admit`` patches it, with the cluster's policies and learned platforms."""
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",))
    resolver = Resolver(make_session(settings), settings=settings)
    service = LookupService(resolver=resolver)
    request = parse_admission_review(testing.admission_review(pod, uid=uuid.uuid4().hex))
    admission = admit(
        request,
        PolicySettings(preferred_arch=""),
        lambda lookup: service.inspect(lookup, deadline=Deadline.after(10)).result,
        policies=read_documents([*docs, testing.namespace("team-a", {"env": "prod"})], "test").as_policies(),
        learned=learned,
    )
    assert admission.decision.allowed, admission.decision.message
    return admission.decision.obj


def allowed(obj: dict[str, Any]) -> list[str]:
    return [node["metadata"]["name"] for node in NODES if testing.schedulable(obj, node)]


def bound(obj: dict[str, Any], node: str, name: str) -> dict[str, Any]:
    """The admitted pod as the cluster holds it once bound to ``node``: named, owned, not Ready."""
    out = json.loads(json.dumps(obj))
    out["metadata"]["name"] = name
    out["metadata"]["ownerReferences"] = owned_by("ReplicaSet", name.rsplit("-", 1)[0])
    out["spec"]["nodeName"] = node
    out["status"] = ready(False)
    return out


def evicted(cluster: FakeCluster) -> set[str]:
    return {path.split("/")[-2] for method, path in cluster.writes() if path.endswith("/eviction")}


def test_no_eviction_of_what_the_webhook_placed_and_one_of_what_it_would_not(
    cluster: FakeCluster, controller: Callable[..., Running], pushed_images: dict[str, PushedImage]
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    multi = pushed_images["docker-manifest-list"]  # amd64, arm64/v8, arm/v7, ppc64le, s390x
    docs = policies(amd64_only, multi.reference)
    for doc in docs:
        cluster.add(CLUSTER if doc["kind"] == "ClusterPlacementPolicy" else NAMESPACED, doc)
    configmap = learned_configmap(multi.digest)  # arm64 disproved for the multi-arch image's index digest
    cluster.add("configmaps", configmap)
    learned = LearnedPlatforms(read_learned(configmap["data"]))

    web = webhook_decision(testing.pod([amd64_only], namespace="team-a", labels={"app": "web"}), docs, learned)
    db = webhook_decision(testing.pod([multi.reference], namespace="team-a", labels={"tier": "db"}), docs, learned)
    api = webhook_decision(testing.pod([multi.reference], namespace="team-a", labels={"app": "api"}), docs, learned)
    # the webhook's decisions: the podSelector's declarations and the learned entry narrow them
    assert allowed(web) == ["n-amd64", "n-arm64"]
    assert allowed(db) == ["n-ppc64le"]
    assert allowed(api) == ["n-amd64", "n-ppc64le"]

    placed = {
        "web-a-1": bound(web, "n-arm64", "web-a-1"),  # arm64 only because the cluster policy declares it
        "web-b-1": bound(web, "n-amd64", "web-b-1"),
        "db-a-1": bound(db, "n-ppc64le", "db-a-1"),  # ppc64le only because the team policy declares it
        "api-a-1": bound(api, "n-amd64", "api-a-1"),
        "api-b-1": bound(api, "n-ppc64le", "api-b-1"),
    }
    wrong = {
        # bound where the webhook's decision does not allow them, by the same platforms
        "api-c-1": bound(api, "n-arm64", "api-c-1"),  # arm64 was learned out of this digest
        "db-c-1": bound(db, "n-amd64", "db-c-1"),  # the team policy declares ppc64le only
    }
    for pod in (*placed.values(), *wrong.values()):
        cluster.add("pods", pod)
    running = controller()
    settle(cluster, running, 1.5)
    assert cluster.wait(lambda: evicted(cluster) >= set(wrong), 15), evicted(cluster)
    settle(cluster, running, 1.0)
    assert evicted(cluster) == set(wrong)

    # a later policy change narrows where new pods may go; the running ones stay where they are
    cluster.update(CLUSTER, "", "web-declares", lambda p: p["spec"].update(schedulableArchitectures=["amd64"]))
    running.controller.started_leading()  # every pod examined again, with the new policy
    settle(cluster, running, 1.5)
    assert evicted(cluster) == set(wrong)
    assert not [w for w in cluster.writes() if w[0] == "DELETE"]
