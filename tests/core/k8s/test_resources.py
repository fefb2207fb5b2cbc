"""A pod's effective requests: sum of containers vs largest init container, sidecars, overhead."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core.errors import InvalidObject
from noe_core.k8s.resources import PodRequests, pod_requests


def c(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    limits: dict[str, str] | None = None,
    restart: str | None = None,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    out: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": requests}}
    if limits:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


def test_sum_of_containers() -> None:
    spec = {"containers": [c("100m", "64Mi"), c("0.5", "512M")]}
    assert pod_requests(spec) == PodRequests(600, 64 * 2**20 + 512_000_000)


def test_largest_init_container_wins_per_resource() -> None:
    spec = {"containers": [c("100m", "1Gi")], "initContainers": [c("2", "10Mi"), c("1", "20Mi")]}
    assert pod_requests(spec) == PodRequests(2000, 2**30)


def test_sidecars_run_beside_the_app_and_under_later_init_containers() -> None:
    spec = {
        "containers": [c("1", "100Mi")],
        "initContainers": [c("500m", "50Mi", restart="Always"), c("1200m", "10Mi")],
    }
    # app + sidecar = 1.5 cpu, 150Mi; the later init container runs with the sidecar: 1.7 cpu, 60Mi
    assert pod_requests(spec) == PodRequests(1700, 150 * 2**20)


def test_limits_stand_in_for_missing_requests_and_overhead_is_added() -> None:
    spec = {"containers": [c(limits={"cpu": "250m", "memory": "1Gi"})], "overhead": {"cpu": "10m"}}
    assert pod_requests(spec) == PodRequests(260, 2**30)


def test_pod_level_requests_replace_the_containers_sum() -> None:
    spec = {"containers": [c("1", "1Gi")], "resources": {"requests": {"cpu": "3"}}}
    assert pod_requests(spec) == PodRequests(3000, 2**30)


def test_no_requests_is_zero() -> None:
    assert pod_requests({"containers": [{"name": "a", "image": "x"}]}) == PodRequests()


def test_bad_quantity_names_its_path() -> None:
    with pytest.raises(InvalidObject, match=r"spec.initContainers\[0\].resources.requests.memory"):
        pod_requests({"initContainers": [c("1", "lots")]})
    with pytest.raises(InvalidObject, match="containers must be an array"):
        pod_requests({"containers": {"a": 1}})
