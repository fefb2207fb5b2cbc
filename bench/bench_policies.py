"""Admission cost with 0, 10 and 1,000 placement policies in the cluster, as ratios to the 0-policy case.

Run: ``python bench/bench_policies.py [ROUNDS]``. The policies are spread as a platform team and its
teams would write them: cluster policies (a tenth of them select namespaces by label, some select pods)
and namespaced policies spread over 100 namespaces; the admitted pods cycle through those namespaces,
so the per-namespace-labels index is exercised, not one warm entry. For each policy count it prints:

* ``review``  — :meth:`noe_web.webhook.admission.AdmissionService.review` of a 3-container pod whose
  images are declared (no registry), with the policies as an admission reads them (``Policies``, the
  value the webhook's watch serves);
* ``merge``   — :meth:`noe_core.policies.merge.Policies.settings_for` alone: which policies match and
  the merged settings;

each the median over 7 rounds of the median of ROUNDS calls, and each ``review`` as a ratio to the
0-policy ``review`` of the same round (the median of the 7 ratios), so a shared machine's load weighs
on both sides alike.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_admit import IMAGES, PLATFORMS  # the same pod as the admission bench
from noe_core import testing
from noe_core.image.declared import StaticPlatforms
from noe_core.policies.merge import Policies
from noe_core.policies.settings import PolicySettings
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService

NAMESPACES = [f"team-{i:03d}" for i in range(100)]
ARCHES = ["arm64", "amd64"]


def policy_docs(count: int) -> list[dict[str, Any]]:
    """``count`` policies: a tenth cluster-wide (a tenth of those by namespace label), the rest namespaced."""
    docs: list[dict[str, Any]] = []
    cluster = max(1, count // 10) if count else 0
    for i in range(cluster):
        spec: dict[str, Any] = {
            "priority": i % 5,
            "preferredArchitectures": [{"architecture": ARCHES[i % 2], "weight": 10 + i % 90}],
        }
        if i % 10 == 0:
            spec["namespaceSelector"] = {"matchLabels": {"tier": f"t{i % 7}"}}
        if i % 4 == 1:
            spec["podSelector"] = {"matchLabels": {"app": "web"}}
        docs.append(testing.cluster_policy(f"cluster-{i:04d}", spec))
    for i in range(count - cluster):
        spec = {"priority": i % 3, "matchNodeLabels": ["team"]}
        if i % 3 == 0:
            spec["podSelector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
        if i % 5 == 0:
            spec["schedulableArchitectures"] = ["amd64", "arm64"]
        docs.append(testing.placement_policy(f"team-policy-{i:04d}", NAMESPACES[i % len(NAMESPACES)], spec))
    namespaces = [testing.namespace(name, {"tier": f"t{n % 7}", "team": name}) for n, name in enumerate(NAMESPACES)]
    return [*docs, *namespaces]


def reviews() -> list[dict[str, Any]]:
    out = []
    for name in NAMESPACES:
        pod = testing.pod(
            images=IMAGES[:2], init_images=IMAGES[2:], namespace=name, labels={"app": "web", "team": name}
        )
        out.append(json.loads(json.dumps(testing.admission_review(pod, uid=f"bench-{name}"))))
    return out


def _median_us(fn: Callable[[int], Any], rounds: int) -> float:
    samples = []
    for index in range(rounds):
        start = time.perf_counter_ns()
        fn(index)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    logging.getLogger("noe").setLevel(logging.INFO)
    logging.getLogger("noe").addHandler(logging.NullHandler())
    logging.getLogger("noe").propagate = False
    static = StaticPlatforms.from_mapping(PLATFORMS)
    base = PolicySettings()
    docs = reviews()
    cases: dict[int, tuple[AdmissionService, Policies]] = {}
    for count in (0, 10, 1000):
        policies = testing.policies(*policy_docs(count))
        assert len(policies.policy_set) == count
        cases[count] = (AdmissionService(policy=base, metrics=Metrics(), static=static, policies=policies), policies)
    applied = cases[1000][0].review(docs[3])
    assert applied["response"]["allowed"] and "patch" in applied["response"], applied

    times: dict[str, list[float]] = {f"{kind}-{n}": [] for kind in ("review", "merge") for n in cases}
    for _ in range(7):
        for count, (service, policies) in cases.items():
            times[f"review-{count}"].append(_median_us(lambda i, s=service: s.review(docs[i % len(docs)]), rounds))
            times[f"merge-{count}"].append(
                _median_us(
                    lambda i, p=policies: p.settings_for(
                        base, namespace=NAMESPACES[i % len(NAMESPACES)], pod_labels={"app": "web"}
                    ),
                    rounds,
                )
            )
    zero = times["review-0"]
    print(
        f"3-container pod, declared platforms, pods cycling over {len(NAMESPACES)} namespaces, "
        f"medians of {rounds} calls, 7 rounds"
    )
    for count in cases:
        review = statistics.median(times[f"review-{count}"])
        merge = statistics.median(times[f"merge-{count}"])
        ratio = statistics.median(t / z for t, z in zip(times[f"review-{count}"], zero, strict=True))
        matched = len(cases[count][1].settings_for(base, namespace=NAMESPACES[3], pod_labels={"app": "web"}).applied)
        print(
            f"{count:5d} policies ({matched:2d} match a pod)  review {review:8.1f} us  x{ratio:.2f} of 0 policies"
            f"   merge {merge:7.1f} us"
        )


if __name__ == "__main__":
    main()
