"""The pods ``noe report`` reads (noe_core.report.pods): one entry per pod, errors naming the pod."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core.errors import InvalidObject
from noe_core.k8s.owners import Owners
from noe_core.policies.rollout import ROLLOUT_LABEL
from noe_core.report.pods import read_pod


def pod(name: str, images: list[str], cpu: str = "1", *, phase: str = "Running") -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": cpu, "memory": "1Mi"}}}
        for i, image in enumerate(images)
    ]
    meta = {"name": name, "namespace": "ns"}
    return {"metadata": meta, "spec": {"containers": containers}, "status": {"phase": phase}}


def test_read_pod_names_the_pod() -> None:
    bad = pod("p", ["multi"], "lots")
    with pytest.raises(InvalidObject, match=r"^Pod ns/p: spec\.containers\[0\]\.resources\.requests\.cpu"):
        read_pod(bad, Owners())
    entry = read_pod(
        pod("q", ["multi"])
        | {"spec": {"containers": [{"image": "multi"}], "imagePullSecrets": [{"name": "r"}, {"name": "r"}, {}]}},
        Owners(),
    )
    assert entry.pull_secrets == ("r",)


@pytest.mark.parametrize(
    ("phase", "active"), [("Running", True), ("Pending", True), ("Succeeded", False), ("Failed", False)]
)
def test_a_finished_pod_is_not_active(phase: str, active: bool) -> None:
    entry = read_pod(pod("p", ["app:1"], phase=phase), Owners())
    assert entry.active is active and entry.images == ("app:1",) and entry.requests.cpu_millis == 1000


def test_the_rollout_label_is_kept_and_the_pod_counts_for_its_top_owner() -> None:
    doc = pod("web-7d9f-abcde", ["app:1"])
    doc["metadata"]["labels"] = {ROLLOUT_LABEL: "arm64", "pod-template-hash": "7d9f"}
    doc["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web-7d9f", "controller": True}]
    entry = read_pod(doc, Owners())
    assert entry.rollout == "arm64" and (entry.namespace, entry.name) == ("ns", "web-7d9f-abcde")
    assert (entry.workload.kind, entry.workload.name) == ("Deployment", "web")
