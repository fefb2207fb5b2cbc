"""``noe serve`` with many Namespaces and policies: memory and warm p99, against 10 Namespaces and none.

Run: ``python bench/bench_webhook_namespaces.py [NAMESPACES] [POLICIES] [REQUESTS] [CODE]`` (default
10000 1000 10000; CODE: the checkout ``noe serve`` runs from, for a "before" figure). Two ``noe serve``
processes (2 workers each, ``--image-platforms``, no registry) are started against the stand-in API
(tests/support/fake_cluster.py), one after the other:

* ``baseline`` — a cluster with 10 Namespaces and no placement policy;
* ``cluster``  — NAMESPACES Namespaces (labelled, as bench/bench_policies.py labels them) and
  POLICIES policies (a tenth cluster-wide, the rest namespaced).

Each is sent REQUESTS admissions twice, one at a time, cycling through every Namespace of its
cluster (so the per-namespace caches, 4,096 entries, are cycled past, not one warm entry); the
second pass is measured. Printed: the master's and workers' resident memory together after the
second pass, the p50 and p99 latency of the second pass, and each figure of ``cluster`` as a ratio
to ``baseline``, both measured in this run.

Figures on the 2-core machine (10,000 Namespaces, 1,000 policies, 10,000 requests; one run each)::

    BEFORE (4521330)                      rss MiB   p50 ms   p99 ms
    baseline: 10 namespaces, 0 policies     157.1     0.87     2.18
    10000 namespaces, 1000 policies        296.8     1.24     2.87
    ratio                                  1.89x    1.42x    1.32x

    AFTER (this branch: Namespaces from the watch cache, policies consistent, lists item by item)
    baseline: 10 namespaces, 0 policies     157.4     0.85     2.06
    10000 namespaces, 1000 policies        307.0     1.21     3.61
    ratio                                  1.95x    1.43x    1.75x

How noe lists does not change what the webhook holds per Namespace; the ~140 MiB the cluster adds
(over three processes) and the p99 are the next thing to work on (issue #30), and the p99 of one
sequential run moves by tens of percent between runs here.

    AFTER issue #30 (one copy of a Namespace's labels, interned; the merge remembered per matched set,
    not per Namespace; cluster policies found from the few with a namespaceSelector; 5,000 requests)
    baseline: 10 namespaces, 0 policies     159.3     0.97     1.84
    10000 namespaces, 1000 policies        188.8     0.98     1.90
    ratio                                  1.19x    1.01x    1.03x

The memory was the merge cache: 4,096 merged settings, one per Namespace, where a few distinct
policy sets exist (the namespace matters to a merge only when it is strict).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_admit import IMAGES, PLATFORMS  # noqa: E402
from bench.bench_policies import policy_docs  # noqa: E402
from noe_core import testing  # noqa: E402
from tests.support.certs import make_ca  # noqa: E402
from tests.support.fake_cluster import FakeCluster, start_fake_cluster  # noqa: E402
from tests.support.noe_serve import NoeProcess, start_noe  # noqa: E402

TOKEN = "bench-webhook-token"
PLURAL = {"ClusterPlacementPolicy": "clusterplacementpolicies", "PlacementPolicy": "placementpolicies"}


def populate(cluster: FakeCluster, namespaces: int, policies: int) -> list[str]:
    """The cluster's Namespaces and policies; the Namespaces' names."""
    docs = policy_docs(policies) if policies else []
    names = []
    for doc in docs:
        if doc["kind"] == "Namespace":
            names.append(doc["metadata"]["name"])
            cluster.add("namespaces", doc)
        else:
            cluster.add(PLURAL[doc["kind"]], doc)
    for index in range(namespaces - len(names)):
        name = f"ns-{index:05d}"
        names.append(name)
        cluster.add("namespaces", testing.namespace(name, {"tier": f"t{index % 7}", "team": f"team-{index % 300}"}))
    return names


def rss_kib(pid: int) -> int:
    """The resident memory of ``pid`` and its children (gunicorn's master and workers)."""
    total = 0
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        pids += [int(child) for child in (task / "children").read_text().split()]
    for one in pids:
        for line in Path(f"/proc/{one}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def one_side(namespaces: int, policies: int, count: int, work: Path, code: Path) -> dict[str, float]:
    with start_fake_cluster(make_ca("bench webhook CA", work), tokens=(TOKEN,)) as cluster:
        names = populate(cluster, namespaces, policies)
        kubeconfig = cluster.api.write_kubeconfig(work / "kubeconfig", token=TOKEN)
        (work / "platforms.json").write_text(json.dumps(PLATFORMS))
        args = ["--kubeconfig", str(kubeconfig), "--image-platforms", str(work / "platforms.json")]
        args += ["--workers", "2", "--threads", "4"]
        noe = start_noe(work, args, None, timeout=120, code=code)
        try:
            wait_ready(noe)
            reviews = [
                json.dumps(
                    testing.admission_review(
                        testing.pod(images=IMAGES[:2], namespace=name, labels={"app": "web", "team": name}),
                        uid=f"bench-{index}",
                    )
                ).encode()
                for index, name in enumerate(names[i % len(names)] for i in range(count))
            ]
            with noe.session() as session:
                post_all(session, noe, reviews)  # warm: imports, TLS, every namespace's caches
                latencies = post_all(session, noe, reviews)
            rss = rss_kib(noe.proc.pid)
        finally:
            noe.stop()
    latencies.sort()
    return {
        "rss": rss / 1024,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def wait_ready(noe: NoeProcess) -> None:
    end = time.monotonic() + 120
    with noe.session() as session:
        while time.monotonic() < end:
            with session.get(noe.url + "/readyz", timeout=5) as resp:
                if resp.status_code == 200:
                    return
            time.sleep(0.2)
    raise SystemExit(f"noe serve never ready:\n{noe.output()[-3000:]}")


def post_all(session: requests.Session, noe: NoeProcess, reviews: list[bytes]) -> list[float]:
    latencies = []
    headers = {"Content-Type": "application/json"}
    for body in reviews:
        started = time.perf_counter()
        with session.post(noe.url + "/mutate", data=body, headers=headers, timeout=10) as resp:
            answer: dict[str, Any] = resp.json()
        latencies.append(time.perf_counter() - started)
        assert answer["response"]["allowed"], answer
    return latencies


def main() -> None:
    namespaces = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    policies = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    code = Path(sys.argv[4]) if len(sys.argv) > 4 else ROOT
    with tempfile.TemporaryDirectory(prefix="noe-bench-webhook-") as tmp:
        (Path(tmp) / "base").mkdir()
        (Path(tmp) / "big").mkdir()
        base = one_side(10, 0, count, Path(tmp) / "base", code)
        big = one_side(namespaces, policies, count, Path(tmp) / "big", code)
    print(f"{'':34}{'rss MiB':>10} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'baseline: 10 namespaces, 0 policies':34}{base['rss']:10.1f} {base['p50']:8.2f} {base['p99']:8.2f}")
    label = f"{namespaces} namespaces, {policies} policies"
    print(f"{label:34}{big['rss']:10.1f} {big['p50']:8.2f} {big['p99']:8.2f}")
    ratios = [big[k] / base[k] for k in ("rss", "p50", "p99")]
    print(f"{'ratio':34}{ratios[0]:9.2f}x {ratios[1]:7.2f}x {ratios[2]:7.2f}x")


if __name__ == "__main__":
    main()
