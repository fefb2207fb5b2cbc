"""``noe controller`` on a stand-in cluster of 10,000 pods and 200 nodes.

Run: ``python bench/bench_controller.py [PODS] [NODES]``. The HTTPS stand-in API
(tests/support/fake_cluster.py) runs in this process; the controller runs as
``python -m noe_web controller`` in a child process, so its RSS is its own. Images
are answered by ``--image-platforms`` (no registry), so the figures are the
controller's. Prints:

* ``list``       — a bare paginated list of every pod (limit 500) with the same API client: the floor;
* ``first``      — from starting the process to the end of its first full reconcile (the log line
  ``reconciled``), and its ratio to ``list``;
* ``reconcile``  — the first full reconcile alone (every pod examined once), as the controller logs it;
* ``rss``        — the controller's resident memory after that reconcile, against the same controller on a
  cluster with the same nodes and no pod (the difference per pod is what the cache costs);
* ``requests``   — API requests (watches and the Lease excepted) during a second full reconcile of the
  unchanged cluster, triggered the way it happens in production: the Lease is taken away, then
  re-acquired; the target is zero;
* ``events``     — Events written by the first and by the second reconcile (1% of the pods are bare
  pods on a node their image does not support: one Warning each, once).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noe_core.testing import node  # noqa: E402
from noe_web.kube.client import KubeClient  # noqa: E402
from noe_web.kube.config import load_kubeconfig  # noqa: E402
from tests.support.certs import make_ca  # noqa: E402
from tests.support.controller import spawn_controller  # noqa: E402
from tests.support.fake_cluster import FakeCluster, owned_by, ready, start_fake_cluster  # noqa: E402

TOKEN = "bench-token"
IMAGES = 50


def populate(cluster: FakeCluster, pods: int, nodes: int) -> dict[str, list[str]]:
    platforms: dict[str, list[str]] = {}
    for index in range(IMAGES):
        image = f"registry.bench/team{index % 7}/app{index}:1.{index}"
        platforms[image] = ["linux/amd64"] if index % 5 == 0 else ["linux/amd64", "linux/arm64"]
    images = list(platforms)
    for index in range(nodes):
        cluster.add("nodes", node(f"node-{index:03d}", "amd64" if index % 2 == 0 else "arm64"))
    for index in range(pods):
        misplaced = index % 100 == 0  # 1%: a bare pod whose amd64-only image sits on an arm64 node
        image = images[0] if misplaced else images[index % IMAGES]
        node_index = index % nodes  # even nodes are amd64, odd ones arm64
        if misplaced:
            node_index |= 1
        elif platforms[image] == ["linux/amd64"]:
            node_index &= ~1
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pod-{index:05d}",
                "namespace": f"ns-{index % 40}",
                "labels": {"app": f"app-{index % 300}", "pod-template-hash": "5d8f9c7b6"},
                "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T00:00:00Z"},
                **({} if misplaced else {"ownerReferences": owned_by("ReplicaSet", f"rs-{index % 300}")}),
            },
            "spec": {
                "nodeName": f"node-{node_index:03d}",
                "containers": [
                    {
                        "name": "app",
                        "image": image,
                        "ports": [{"containerPort": 8080}],
                        "env": [{"name": f"VAR_{k}", "value": "x" * 40} for k in range(10)],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }
                ],
                "tolerations": [
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                ],
            },
            "status": {
                **ready(not misplaced),
                "containerStatuses": [
                    {
                        "name": "app",
                        "image": image,
                        "imageID": f"{image}@sha256:{'c' * 64}",
                        "restartCount": 0,
                        "ready": not misplaced,
                        "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}},
                    }
                ],
            },
        }
        cluster.add("pods", pod)
    return platforms


def wait_for_line(path: Path, event: str, count: int, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [
            json.loads(line)
            for line in path.read_text(errors="replace").splitlines()
            if line.startswith("{") and f'"event":"{event}"' in line
        ]
        if len(found) >= count:
            return found[count - 1]
        time.sleep(0.05)
    raise SystemExit(f"no {event!r} line #{count} within {timeout}s:\n{path.read_text()[-3000:]}")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def counted(cluster: FakeCluster, since: int) -> list[tuple[str, str]]:
    return [
        (r.method, r.path)
        for r in cluster.api.requests_snapshot()[since:]
        if "watch=1" not in r.path and "/leases" not in r.path
    ]


def spawn(kubeconfig: Path, platforms: Path, log: Path) -> subprocess.Popen[bytes]:
    return spawn_controller(kubeconfig, log, "--image-platforms", str(platforms))


def empty_cluster_rss(work: Path, nodes: int) -> int:
    """The controller's RSS on a cluster with the same nodes and no pod: what the pods add is the rest."""
    with start_fake_cluster(make_ca("bench empty CA", work / "empty"), tokens=(TOKEN,)) as cluster:
        platforms = populate(cluster, 0, nodes)
        (work / "empty" / "platforms.json").write_text(json.dumps(platforms))
        kubeconfig = cluster.api.write_kubeconfig(work / "empty" / "kubeconfig", token=TOKEN)
        log = work / "empty" / "controller.log"
        proc = spawn(kubeconfig, work / "empty" / "platforms.json", log)
        try:
            wait_for_line(log, "reconciled", 1, 120)
            return rss_kib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    pods = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    with tempfile.TemporaryDirectory(prefix="noe-bench-controller-") as tmp:
        work = Path(tmp)
        (work / "empty").mkdir()
        base_rss = empty_cluster_rss(work, nodes)
        ca = make_ca("bench kube CA", work)
        with start_fake_cluster(ca, tokens=(TOKEN,)) as cluster:
            cluster.state.bookmark_interval = 5.0
            platforms = populate(cluster, pods, nodes)
            (work / "platforms.json").write_text(json.dumps(platforms))
            kubeconfig = cluster.api.write_kubeconfig(work / "kubeconfig", token=TOKEN)

            client = KubeClient(load_kubeconfig(kubeconfig), timeout=60)
            started = time.monotonic()
            params = {"limit": "500"}
            listed = 0
            while True:
                page = client.call("GET", "/api/v1/pods", params=params, timeout=60)
                listed += len(page["items"])
                if not page["metadata"].get("continue"):
                    break
                params = {"limit": "500", "continue": page["metadata"]["continue"]}
            list_seconds = time.monotonic() - started
            client.close()
            assert listed == pods

            log = work / "controller.log"
            mark = len(cluster.api.requests_snapshot())
            started = time.monotonic()
            proc = spawn(kubeconfig, work / "platforms.json", log)
            try:
                first = wait_for_line(log, "reconciled", 1, 600)
                first_seconds = time.monotonic() - started
                rss = rss_kib(proc.pid)
                first_requests = counted(cluster, mark)
                misplaced = len(range(0, pods, 100))
                end = time.monotonic() + 120
                while len(cluster.events()) < misplaced and time.monotonic() < end:
                    time.sleep(0.1)  # the Events queue drains
                time.sleep(0.5)
                first_events = len(cluster.events())

                # take the Lease away (another holder renews it once), then let it expire
                mark = len(cluster.api.requests_snapshot())
                events_before = len(cluster.events())
                cluster.update(
                    "leases",
                    "noe",
                    "noe-controller",
                    lambda lease: lease["spec"].update(holderIdentity="bench-intruder"),
                )
                second = wait_for_line(log, "reconciled", 2, 120)
                if second["pods"] != pods:
                    raise SystemExit(f"the second reconcile saw {second['pods']} pods, not {pods}")
                time.sleep(1.0)
                second_requests = counted(cluster, mark)
                second_events = len(cluster.events()) - events_before
            finally:
                proc.terminate()
                proc.wait(30)

    lists = sum(1 for method, path in first_requests if path.startswith("/api/v1/pods?") and method == "GET")
    print(f"cluster        {pods} pods, {nodes} nodes, {IMAGES} images (--image-platforms)")
    print(f"list           {list_seconds:8.2f} s   paginated list of every pod, limit 500 (baseline)")
    print(
        f"first          {first_seconds:8.2f} s   start to end of first full reconcile "
        f"({first_seconds / list_seconds:.1f}x list); {lists} list pages"
    )
    print(f"reconcile      {first['seconds']:8.2f} s   the first full reconcile alone ({first['pods']} pods examined)")
    print(
        f"rss            {rss / 1024:8.1f} MiB controller process; {base_rss / 1024:.1f} MiB with no pod, so "
        f"{(rss - base_rss) * 1024 / pods:,.0f} bytes per pod ({rss / base_rss:.2f}x)"
    )
    print(
        f"requests       {len(second_requests):8d}     API requests during a second full reconcile of the "
        f"unchanged cluster (watches and Lease excepted; target 0)"
    )
    print(f"events         {first_events:8d}     written by the first reconcile; {second_events} by the second")
    if second_requests:
        print("  " + "\n  ".join(f"{m} {p}" for m, p in second_requests[:10]))


if __name__ == "__main__":
    main()
