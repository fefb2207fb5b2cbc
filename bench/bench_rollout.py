"""A rollout's rollback on a simulated 1,000-pod workload (the rollout issue's closing figure).

Run: ``python bench/bench_rollout.py [PODS] [PERCENT]``. The HTTPS stand-in API
(tests/support/fake_cluster.py) and ``noe controller`` (the command's own ``start``,
through a kubeconfig, short leases) run in this process; images are declared by the
policy's ``imagePlatforms`` (no registry). One Deployment of PODS pods, PERCENT of them
in the cohort (label ``arch.noe.adevinta.com/rollout=arm64``, on an arm64 node), the rest
control, all Ready. Two scenarios, each on a fresh cluster and controller:

* ``exec``  — one cohort pod reports ``exec format error``;
* ``crash`` — the cohort starts crash-looping (a bad arm64 build): its pods turn
  ``CrashLoopBackOff`` one every 10 ms, as their kubelets report them.

For each it prints the time from the first failing cohort pod to the rollback recorded in
the policy's ``status.rollout.rolledBack``, to the last cohort pod evicted, and the API
requests the controller made meanwhile (watches and the Lease excepted), by verb and path
kind. ``floor`` is a bare client evicting the same number of pods one after the other
(the Eviction API's own cost here); ``evicted`` is also given as a ratio to it.
"""

from __future__ import annotations

import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noe_core import testing  # noqa: E402
from noe_core.policies.rollout import ROLLOUT_LABEL  # noqa: E402
from noe_web.kube.client import KubeClient  # noqa: E402
from noe_web.kube.config import load_kubeconfig  # noqa: E402
from tests.support.certs import make_ca  # noqa: E402
from tests.support.controller import start_controller  # noqa: E402
from tests.support.fake_cluster import FakeCluster, owned_by, ready, start_fake_cluster  # noqa: E402

TOKEN = "bench-rollout"
IMAGE = "registry.bench/shop/web:1.0"
HASH = "7c9f8d6b5"


def web_pod(index: int, cohort: bool, *, state: str = "ok") -> dict[str, Any]:
    container: dict[str, Any] = {"running": {"startedAt": "2026-12-01T00:00:00Z"}}
    restarts = 0
    if state != "ok":
        message = "exec /app/web: exec format error" if state == "exec" else "back-off 5m0s restarting failed container"
        container, restarts = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}, 3
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{HASH}-{index:05d}",
            "namespace": "shop",
            "labels": {"app": "web", "pod-template-hash": HASH, ROLLOUT_LABEL: "arm64" if cohort else "control"},
            "ownerReferences": owned_by("ReplicaSet", f"web-{HASH}"),
        },
        "spec": {"nodeName": "arm-1" if cohort else "amd-1", "containers": [{"name": "web", "image": IMAGE}]},
        "status": {
            **ready(state == "ok"),
            "startTime": "2026-12-01T00:00:00Z",
            "containerStatuses": [
                {
                    "name": "web",
                    "image": IMAGE,
                    "imageID": f"registry.bench/shop/web@sha256:{'e' * 64}",
                    "restartCount": restarts,
                    "state": container,
                    "lastState": {},
                }
            ],
        },
    }


def populate(cluster: FakeCluster, pods: int, percent: int) -> list[int]:
    cluster.add("nodes", testing.node("arm-1", "arm64"))
    cluster.add("nodes", testing.node("amd-1", "amd64"))
    spec = {
        "rollout": {"architecture": "arm64", "percent": percent},
        "imagePlatforms": [{"image": IMAGE, "platforms": ["linux/amd64", "linux/arm64"]}],
    }
    cluster.add("clusterplacementpolicies", testing.cluster_policy("move-to-arm", spec))
    cohort = [i for i in range(pods) if i * 100 < pods * percent]
    for index in range(pods):
        cluster.add("pods", web_pod(index, index in cohort))
    return cohort


def counted(cluster: FakeCluster, since: int) -> collections.Counter[str]:
    kinds: collections.Counter[str] = collections.Counter()
    for r in cluster.api.requests_snapshot()[since:]:
        if "watch=1" in r.path or "/leases" in r.path:
            continue
        path = r.path.split("?", 1)[0]
        what = "eviction" if path.endswith("/eviction") else "status" if path.endswith("/status") else "event"
        what = what if r.method != "GET" else "get " + path.rsplit("/", 1)[-1]
        kinds[f"{r.method} {what}" if r.method != "GET" else what] += 1
    return kinds


def rolled_back(cluster: FakeCluster) -> bool:
    policy = cluster.get("clusterplacementpolicies", "", "move-to-arm") or {}
    return bool(((policy.get("status") or {}).get("rollout") or {}).get("rolledBack"))


def scenario(name: str, pods: int, percent: int, work: Path) -> dict[str, Any]:
    ca = make_ca(f"bench rollout {name} CA", work / name)
    with start_fake_cluster(ca, tokens=(TOKEN,)) as cluster:
        cluster.state.bookmark_interval = 5.0
        cohort = populate(cluster, pods, percent)
        running = start_controller(cluster, work / name / "kubeconfig", TOKEN)
        try:
            cluster.wait(running.rollouts.primed.is_set, 120)
            cluster.wait(running.controller.idle.is_set, 60)
            since = len(cluster.api.requests_snapshot())
            started = time.monotonic()
            if name == "exec":
                cluster.update("pods", "shop", web_pod(cohort[0], True)["metadata"]["name"], _with(cohort[0], "exec"))
            else:
                for index in cohort:
                    cluster.update("pods", "shop", web_pod(index, True)["metadata"]["name"], _with(index, "crash"))
                    if rolled_back(cluster):
                        break
                    time.sleep(0.01)
            cluster.wait(lambda: rolled_back(cluster), 60, interval=0.005)
            recorded = time.monotonic() - started
            cluster.wait(lambda: len(cluster.state.evicted) == len(cohort), 300, interval=0.005)
            evicted = time.monotonic() - started
            requests = counted(cluster, since)
            return {
                "recorded": recorded,
                "evicted": evicted,
                "cohort": len(cohort),
                "evictions": len(cluster.state.evicted),
                "requests": requests,
            }
        finally:
            running.stop()


def _with(index: int, state: str) -> Any:
    def change(pod: dict[str, Any]) -> None:
        pod["status"] = web_pod(index, True, state=state)["status"]

    return change


def floor(count: int, work: Path) -> float:
    """A bare client evicting ``count`` pods one after the other: the Eviction API's own cost here."""
    ca = make_ca("bench rollout floor CA", work / "floor")
    with start_fake_cluster(ca, tokens=(TOKEN,)) as cluster:
        for index in range(count):
            cluster.add("pods", web_pod(index, True))
        client = KubeClient(load_kubeconfig(cluster.api.write_kubeconfig(work / "floor" / "kubeconfig", token=TOKEN)))
        started = time.monotonic()
        for index in range(count):
            name = web_pod(index, True)["metadata"]["name"]
            body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "shop"}}
            client.call("POST", f"/api/v1/namespaces/shop/pods/{name}/eviction", body=body)
        seconds = time.monotonic() - started
        client.close()
        return seconds


def main() -> None:
    pods = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    percent = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with tempfile.TemporaryDirectory(prefix="noe-bench-rollout-") as tmp:
        work = Path(tmp)
        for name in ("exec", "crash", "floor"):
            (work / name).mkdir()
        results = {name: scenario(name, pods, percent, work) for name in ("exec", "crash")}
        base = floor(results["exec"]["cohort"], work)
    print(f"workload: {pods} pods, {percent}% cohort ({results['exec']['cohort']} pods on arm64)")
    print(f"floor: {base * 1000:.0f} ms to evict {results['exec']['cohort']} pods one after the other")
    for name, r in results.items():
        total = sum(r["requests"].values())
        print(
            f"{name}: rollback recorded {r['recorded'] * 1000:.0f} ms after the first failing cohort pod; "
            f"{r['evictions']}/{r['cohort']} cohort pods evicted after {r['evicted'] * 1000:.0f} ms "
            f"({r['evicted'] / base:.1f}x floor); {total} API requests: {dict(sorted(r['requests'].items()))}"
        )


if __name__ == "__main__":
    main()
