"""Placement policies end to end: a real ``noe serve`` (two gunicorn workers) against the HTTPS stand-in API
server holding the policies and Namespaces; and ``noe serve --policy FILE`` giving the same answers offline."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from noe_core import testing
from noe_core.policies.trail import POLICIES_ANNOTATION
from tests.support.certs import CA, make_ca
from tests.support.fake_cluster import FakeCluster, start_fake_cluster
from tests.support.noe_serve import NoeProcess, apply, archs_allowed, post_review, start_noe, uid

pytestmark = pytest.mark.e2e

TOKEN = "policies-e2e-" + uuid.uuid4().hex
PLATFORMS = {"multi:1": ["linux/amd64", "linux/arm64", "linux/ppc64le"], "arm:1": ["linux/arm64"]}
CLUSTER, NAMESPACED = "clusterplacementpolicies", "placementpolicies"
BASE = testing.cluster_policy(
    "base",
    namespaceSelector={"matchLabels": {"env": "prod"}},
    preferredArchitectures=[{"architecture": "arm64", "weight": 80}, {"architecture": "amd64", "weight": 20}],
)
TEAM = testing.placement_policy(
    "amd-only", "team-a", podSelector={"matchLabels": {"app": "legacy"}}, schedulableArchitectures=["amd64"]
)


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("policies e2e kube CA", tmp_path_factory.mktemp("policies-e2e-ca"))


@pytest.fixture(scope="module")
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.5
        c.add("namespaces", testing.namespace("team-a", {"env": "prod"}))
        c.add("namespaces", testing.namespace("team-b", {"env": "dev"}))
        c.add(CLUSTER, BASE)
        c.add(NAMESPACED, TEAM)
        yield c


def serve(work: Path, cluster: FakeCluster | None, *extra: str, workers: int = 2) -> NoeProcess:
    platforms = work / "platforms.json"
    platforms.write_text(json.dumps(PLATFORMS))
    args = ["--image-platforms", str(platforms), "--workers", str(workers), "--state-dir", str(work / "state")]
    if cluster is not None:
        args += ["--kubeconfig", str(cluster.api.write_kubeconfig(work / "kubeconfig", token=TOKEN))]
    return start_noe(work, [*args, *extra], None)


@pytest.fixture(scope="module")
def noe(tmp_path_factory: pytest.TempPathFactory, cluster: FakeCluster) -> Iterator[NoeProcess]:
    proc = serve(tmp_path_factory.mktemp("policies-noe"), cluster)
    try:
        with proc.session() as s:
            assert _eventually(lambda: _ready(s, proc), 20), proc.output()[-3000:]
        yield proc
    finally:
        proc.stop()


def _ready(s: requests.Session, proc: NoeProcess) -> bool:
    with s.get(proc.url + "/readyz", timeout=5) as resp:
        return resp.status_code == 200


def _eventually(condition: Callable[[], Any], within: float) -> Any:
    end = time.monotonic() + within
    while True:
        value = condition()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.05)


def admit(proc: NoeProcess, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    review = testing.admission_review(obj, uid=uid())
    with proc.session() as s:
        response = post_review(s, proc, review)
    return response, apply(review, response)


def trail(obj: dict[str, Any]) -> str:
    return str((obj["metadata"].get("annotations") or {}).get(POLICIES_ANNOTATION, ""))


def every_worker(proc: NoeProcess, obj: dict[str, Any], expected: Callable[[dict[str, Any]], bool]) -> bool:
    """Ten admissions in a row (both workers answer some) all meet ``expected``."""
    return all(expected(admit(proc, obj)[1]) for _ in range(10))


def test_the_cluster_policies_place_pods_in_every_worker(noe: NoeProcess) -> None:
    legacy = testing.pod(["multi:1"], namespace="team-a", labels={"app": "legacy"})
    assert every_worker(noe, legacy, lambda p: archs_allowed(p) == {"amd64"})
    _, placed = admit(noe, legacy)
    assert trail(placed) == "ClusterPlacementPolicy/base,PlacementPolicy/team-a/amd-only"
    _, web = admit(noe, testing.pod(["multi:1"], namespace="team-a"))
    preferred = web["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [(t["preference"]["matchExpressions"][0]["values"][0], t["weight"]) for t in preferred] == [
        ("arm64", 80),
        ("amd64", 20),
    ]
    _, dev = admit(noe, testing.pod(["multi:1"], namespace="team-b"))
    assert trail(dev) == "" and archs_allowed(dev) == {"amd64", "arm64", "ppc64le"}


def test_a_changed_policy_applies_in_every_worker_within_two_seconds(noe: NoeProcess, cluster: FakeCluster) -> None:
    pod = testing.pod(["multi:1"], namespace="team-b")
    cluster.add(
        CLUSTER,
        testing.cluster_policy(
            "dev-required", namespaceSelector={"matchLabels": {"env": "dev"}}, preferenceMode="required"
        ),
    )
    changed = time.monotonic()
    assert _eventually(lambda: every_worker(noe, pod, lambda p: archs_allowed(p) == {"amd64"}), 10)
    assert time.monotonic() - changed < 2.0 + 2.0  # 2 s, plus the twenty admissions that observe it
    cluster.delete(CLUSTER, "", "dev-required")
    assert _eventually(lambda: every_worker(noe, pod, lambda p: trail(p) == ""), 4)


def test_events_and_the_log_line_name_the_policies(noe: NoeProcess, cluster: FakeCluster) -> None:
    admit(noe, testing.pod(["arm:1"], namespace="team-a", name="evented"))
    events = _eventually(
        lambda: [
            e
            for e in cluster.events()
            if e["metadata"]["namespace"] == "team-a" and e["involvedObject"].get("name") == "evented"
        ],
        10,
    )
    assert events and "placement policies: ClusterPlacementPolicy/base" in events[0]["message"]
    lines = [json.loads(line) for line in noe.out_path.read_text().splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("event") == "admission" and line.get("name") == "evented"]
    assert logged and logged[0]["policies"] == ["ClusterPlacementPolicy/base"]


def test_the_staleness_gauge_is_exported(noe: NoeProcess) -> None:
    with requests.Session() as s:
        s.trust_env = False
        text = s.get(f"http://127.0.0.1:{noe.metrics_port}/metrics", timeout=10).text
    assert "noe_policy_watch_stale_seconds 0.0" in text


def test_policy_files_give_the_in_cluster_answer(tmp_path: Path, noe: NoeProcess, cluster: FakeCluster) -> None:
    files = tmp_path / "policies.yaml"
    files.write_text(
        yaml.safe_dump_all(
            [BASE, TEAM, testing.namespace("team-a", {"env": "prod"}), testing.cluster_policy("ignored", priority=-1)]
        )
    )
    offline = serve(tmp_path, None, "--policy", str(files), workers=1)
    try:
        for obj in (
            testing.pod(["multi:1"], namespace="team-a", labels={"app": "legacy"}),
            testing.pod(["multi:1"], namespace="team-a"),
            testing.pod(["arm:1", "multi:1"], namespace="team-b"),
        ):
            review = testing.admission_review(obj, uid="same-uid")
            with offline.session() as s1, noe.session() as s2:
                assert post_review(s1, offline, review) == post_review(s2, noe, review)
        assert "placement policy ignored: ClusterPlacementPolicy/ignored: PriorityOutOfRange" in offline.output()
    finally:
        offline.stop()


def test_without_the_crds_the_webhook_runs_on_the_flags_and_says_so_once(tmp_path: Path, kube_ca: CA) -> None:
    with start_fake_cluster(kube_ca, tokens=(TOKEN,)) as bare:
        bare.state.policy_crds = False
        proc = serve(tmp_path, bare, workers=1)
        try:
            with proc.session() as s:
                assert _eventually(lambda: _ready(s, proc), 20)
            _, placed = admit(proc, testing.pod(["multi:1"], namespace="team-a"))
            assert trail(placed) == "" and archs_allowed(placed) == {"amd64", "arm64", "ppc64le"}

            def said() -> list[str]:
                return [line for line in proc.output().splitlines() if "placement policy CRDs not installed" in line]

            assert _eventually(said, 5), proc.output()[-3000:]
            time.sleep(1.5)  # the webhook looks for them again meanwhile, and says nothing more
            assert len(said()) == 1, said()
        finally:
            proc.stop()
