"""Leader election on a Lease against the HTTPS stand-in cluster, as client-go's leaderelection behaves.

Each elector has its own API client and token (so the stand-in tells their
requests apart, and one can be cut off alone), and short timings: the lease
lasts 1.2 s, a leader must renew within 0.8 s, candidates try every 0.1 s.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_web.controller.leader import JITTER, LeaderElector, LeaseSettings
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from tests.support.certs import CA, make_ca
from tests.support.fake_cluster import FakeCluster, start_fake_cluster

LEASE = LeaseSettings("noe", "noe-controller", lease_duration=1.2, renew_deadline=0.8, retry_period=0.1)
TRY = LEASE.retry_period * JITTER


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("leader kube CA", tmp_path_factory.mktemp("leader-ca"))


@pytest.fixture
def cluster(kube_ca: CA) -> Iterator[FakeCluster]:
    with start_fake_cluster(kube_ca) as c:
        yield c


class Candidate:
    """An elector with its own token, and a record of its on_started/on_stopped calls."""

    def __init__(self, cluster: FakeCluster, tmp_path: Path, name: str) -> None:
        self.token = f"{name}-{uuid.uuid4().hex}"
        cluster.state.tokens.add(self.token)
        self.kube = KubeClient(load_kubeconfig(cluster.api.write_kubeconfig(tmp_path / name, token=self.token)))
        self.calls: list[tuple[str, float]] = []
        self.elector = LeaderElector(
            self.kube,
            LEASE,
            holder=name,
            on_started=lambda: self.calls.append(("started", time.monotonic())),
            on_stopped=lambda: self.calls.append(("stopped", time.monotonic())),
        )

    @property
    def leads(self) -> bool:
        return self.elector.is_leader()


@pytest.fixture
def candidate(cluster: FakeCluster, tmp_path: Path) -> Iterator[Callable[[str], Candidate]]:
    made: list[Candidate] = []

    def make(name: str) -> Candidate:
        made.append(Candidate(cluster, tmp_path, name))
        return made[-1]

    yield make
    for one in made:
        one.elector.stop(release=False)
        one.kube.close()


def lease(cluster: FakeCluster) -> dict[str, Any]:
    found = cluster.get("leases", LEASE.namespace, LEASE.name)
    assert found is not None, "no Lease"
    spec: dict[str, Any] = found["spec"]
    return spec


class Watch:
    """Samples who leads every 10 ms on a thread: two leaders at once must never be seen."""

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates = candidates
        self.both: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            if sum(c.leads for c in self.candidates) > 1:
                self.both.append(time.monotonic())

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(2)
        return self.both


def test_two_candidates_one_leader_that_keeps_renewing(
    cluster: FakeCluster, candidate: Callable[[str], Candidate]
) -> None:
    a, b = candidate("a"), candidate("b")
    watch = Watch([a, b])
    a.elector.start()
    b.elector.start()
    assert cluster.wait(lambda: a.leads or b.leads, 5, interval=0.01)
    leader, follower = (a, b) if a.leads else (b, a)
    first = lease(cluster)
    assert first["holderIdentity"] == leader.elector.holder
    assert first["leaseDurationSeconds"] == 1  # whole seconds, as the API field is
    time.sleep(LEASE.lease_duration * 2)  # well past the lease: renewals keep it
    later = lease(cluster)
    assert later["holderIdentity"] == leader.elector.holder and later["acquireTime"] == first["acquireTime"]
    assert later["renewTime"] > first["renewTime"] and later["leaseTransitions"] == first["leaseTransitions"]
    assert leader.leads and not follower.leads
    assert watch.stop() == []
    # both raced to create it: one POST won, the other got 409 and wrote nothing after that
    posts = [r for r in cluster.api.requests_snapshot() if r.method == "POST" and "/leases" in r.path]
    assert 1 <= len(posts) <= 2
    puts = {r.auth for r in cluster.api.requests_snapshot() if r.method == "PUT" and "/leases/" in r.path}
    assert puts == {f"token:{leader.token}"}
    assert [what for what, _ in leader.calls] == ["started"] and follower.calls == []


def test_a_stale_holder_is_taken_over_after_the_lease_duration_on_the_candidates_own_clock(
    cluster: FakeCluster, candidate: Callable[[str], Candidate]
) -> None:
    # a holder that died long ago, with a renewTime in the future (its node's clock ran ahead): ignored,
    # only the candidate's own clock since it first saw this record counts
    cluster.add(
        "leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE.name, "namespace": LEASE.namespace},
            "spec": {
                "holderIdentity": "ghost",
                "leaseDurationSeconds": 1,
                "acquireTime": "2030-01-01T00:00:00.000000Z",
                "renewTime": "2030-01-01T00:00:00.000000Z",
                "leaseTransitions": 4,
            },
        },
    )
    a = candidate("a")
    started = time.monotonic()
    a.elector.start()
    assert cluster.wait(lambda: a.leads, 5, interval=0.01)
    took = time.monotonic() - started
    assert LEASE.lease_duration <= took < LEASE.lease_duration + 2 * TRY + 0.5, took
    spec = lease(cluster)
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 5
    assert spec["acquireTime"] < "2030" and spec["acquireTime"] == spec["renewTime"]
    assert a.elector.transitions == 1


def test_a_leader_cut_off_from_the_api_stops_within_the_renew_deadline_before_anyone_takes_over(
    cluster: FakeCluster, candidate: Callable[[str], Candidate]
) -> None:
    a = candidate("a")
    a.elector.start()
    assert cluster.wait(lambda: a.leads, 5, interval=0.01)
    b = candidate("b")
    b.elector.start()
    watch = Watch([a, b])
    time.sleep(0.5)
    assert a.leads and not b.leads
    last_renewal = time.monotonic()
    cluster.state.tokens.discard(a.token)  # a's requests now get 401: it can neither renew nor read
    assert cluster.wait(lambda: not a.leads, 5, interval=0.01)
    stopped = time.monotonic()
    assert stopped - last_renewal < LEASE.renew_deadline + 2 * TRY + 0.5, stopped - last_renewal
    assert [what for what, _ in a.calls] == ["started", "stopped"]
    assert cluster.wait(lambda: b.leads, 5, interval=0.01)
    took_over = time.monotonic()
    assert took_over - last_renewal >= LEASE.lease_duration - TRY  # never before a's lease could have run out
    assert lease(cluster)["holderIdentity"] == "b"
    assert watch.stop() == []
    # a comes back: it sees b renewing, and follows
    cluster.state.tokens.add(a.token)
    time.sleep(LEASE.lease_duration + 0.5)
    assert b.leads and not a.leads


def test_a_crashed_leader_is_replaced_after_the_lease_and_a_released_lease_at_once(
    cluster: FakeCluster, candidate: Callable[[str], Candidate]
) -> None:
    a, b = candidate("a"), candidate("b")
    a.elector.start()
    assert cluster.wait(lambda: a.leads, 5, interval=0.01)
    b.elector.start()
    time.sleep(0.3)
    crashed = time.monotonic()
    a.elector.stop(release=False)  # a crash: the Lease still names a
    assert cluster.wait(lambda: b.leads, 5, interval=0.01)
    took = time.monotonic() - crashed
    assert LEASE.lease_duration - TRY <= took < LEASE.lease_duration + 2 * TRY + 0.5, took
    assert lease(cluster)["holderIdentity"] == "b"

    c = candidate("c")
    c.elector.start()
    time.sleep(0.3)
    released = time.monotonic()
    b.elector.stop(release=True)  # a clean stop: the holder is emptied
    assert lease(cluster)["holderIdentity"] == ""
    assert cluster.wait(lambda: c.leads, 5, interval=0.01)
    assert time.monotonic() - released < LEASE.lease_duration - TRY  # no need to wait for the lease
    spec = lease(cluster)
    assert spec["holderIdentity"] == "c" and spec["leaseTransitions"] == 2
