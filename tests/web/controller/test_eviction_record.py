"""The eviction back-off kept in the cluster (ConfigMap noe-evictions), against the HTTPS stand-in.

Two records stand for two replicas of the controller (each with its own API client): what one claims,
the other sees; the clock is the test's, so a back-off passes without waiting.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_web.controller.eviction_record import CONFIGMAP, MAX_ENTRIES, EvictionRecord, RecordUnavailable, data_key
from noe_web.controller.podview import is_terminating, slim_pod
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from tests.support.certs import CA, make_ca
from tests.support.fake_cluster import FakeCluster, start_fake_cluster

BACKOFF = 3600.0
KEY = ("ReplicaSet/apps/web-5d8f", "sha256:" + "ab" * 32, "arm64")
OTHER = ("ReplicaSet/apps/api-7c9d", "sha256:" + "cd" * 32, "arm64")


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("eviction record kube CA", tmp_path_factory.mktemp("eviction-record-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca) as c:
        yield c


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def replica(cluster: FakeCluster, tmp_path: Path, clock: Clock, backoff: float = BACKOFF) -> EvictionRecord:
    token = f"replica-{uuid.uuid4().hex}"
    cluster.state.tokens.add(token)
    kube = KubeClient(load_kubeconfig(cluster.api.write_kubeconfig(tmp_path / token, token=token)))
    return EvictionRecord(kube, "noe", backoff, clock=clock)


def entries(cluster: FakeCluster) -> dict[str, dict[str, Any]]:
    found = cluster.get("configmaps", "noe", CONFIGMAP) or {}
    return {k: json.loads(v) for k, v in (found.get("data") or {}).items()}


def test_a_claim_is_seen_by_another_replica_until_the_backoff_ends(
    cluster: FakeCluster, tmp_path: Path, clock: Clock
) -> None:
    first, second = replica(cluster, tmp_path, clock), replica(cluster, tmp_path, clock)
    assert first.claim(KEY, "apps/web-5d8f-a") is None
    entry = entries(cluster)[data_key(KEY)]
    assert entry["key"] == list(KEY) and entry["pod"] == "apps/web-5d8f-a" and entry["time"].endswith("Z")
    clock.now += 600
    assert second.claim(KEY, "apps/web-5d8f-b") == pytest.approx(BACKOFF - 600, abs=0.01)
    assert second.claim(OTHER, "apps/api-7c9d-a") is None  # another owner is not held back
    clock.now += BACKOFF - 600
    assert second.claim(KEY, "apps/web-5d8f-b") is None  # the back-off is over
    assert entries(cluster)[data_key(KEY)]["pod"] == "apps/web-5d8f-b"


def test_a_released_claim_frees_the_key_at_once(cluster: FakeCluster, tmp_path: Path, clock: Clock) -> None:
    first, second = replica(cluster, tmp_path, clock), replica(cluster, tmp_path, clock)
    assert first.claim(KEY, "apps/web-5d8f-a") is None
    first.release(KEY)  # e.g. refused by a disruption budget: no eviction happened
    assert data_key(KEY) not in entries(cluster)
    assert second.claim(KEY, "apps/web-5d8f-a") is None


def test_a_conflicting_write_is_read_again_and_decided_again(
    cluster: FakeCluster, tmp_path: Path, clock: Clock
) -> None:
    first, second = replica(cluster, tmp_path, clock), replica(cluster, tmp_path, clock)
    assert first.claim(OTHER, "apps/api-7c9d-a") is None  # the ConfigMap exists: the next claim is a PUT
    stamp = entries(cluster)[data_key(OTHER)]["time"]
    racing = json.dumps({"key": list(KEY), "pod": "apps/web-5d8f-a", "time": stamp})
    # the other replica claims KEY between this one's read and its write: the write gets 409
    cluster.change_before_next_put(lambda cm: cm["data"].update({data_key(KEY): racing}))
    assert second.claim(KEY, "apps/web-5d8f-b") == pytest.approx(BACKOFF, abs=0.01)
    assert second.conflicts == 1
    assert entries(cluster)[data_key(KEY)]["pod"] == "apps/web-5d8f-a"  # neither update lost, nobody evicts twice


def test_entries_past_the_backoff_and_unreadable_ones_are_dropped_and_the_record_is_bounded(
    cluster: FakeCluster, tmp_path: Path, clock: Clock
) -> None:
    record = replica(cluster, tmp_path, clock, backoff=60.0)
    assert record.claim(KEY, "apps/web-5d8f-a") is None
    cluster.update("configmaps", "noe", CONFIGMAP, lambda cm: cm["data"].update({"junk": "not json"}))
    clock.now += 61
    assert record.claim(OTHER, "apps/api-7c9d-a") is None
    assert set(entries(cluster)) == {data_key(OTHER)}
    recent = dt.datetime.fromtimestamp(clock.now - 1, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    one = json.dumps({"key": ["o", "i", "a"], "pod": "p", "time": recent})
    many = {f"k{i:05d}": one for i in range(MAX_ENTRIES + 10)}
    cluster.update("configmaps", "noe", CONFIGMAP, lambda cm: cm["data"].update(many))
    assert record.claim(KEY, "apps/web-5d8f-b") is None
    assert len(entries(cluster)) == MAX_ENTRIES and data_key(KEY) in entries(cluster)


def test_an_unreadable_record_refuses_the_claim(cluster: FakeCluster, tmp_path: Path, clock: Clock) -> None:
    record = replica(cluster, tmp_path, clock)
    cluster.state.fail_with = 503
    with pytest.raises(RecordUnavailable, match=CONFIGMAP):
        record.claim(KEY, "apps/web-5d8f-a")
    cluster.state.fail_with = 0
    assert record.claim(KEY, "apps/web-5d8f-a") is None


def test_the_pod_cache_keeps_deletion_timestamp() -> None:
    pod = {
        "metadata": {"name": "web-1", "namespace": "apps", "deletionTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {},
    }
    assert is_terminating(slim_pod(pod))
    del pod["metadata"]["deletionTimestamp"]
    assert not is_terminating(slim_pod(pod))
