"""The pods ``noe report`` reads: what it needs of each one (:class:`PodEntry`), read once by :func:`read_pod`.

A pod counts for its top owner (the workload), with its images, its pull
Secrets, its CPU and memory requests as kube-scheduler counts them, and its
rollout label; a pod that finished (phase ``Succeeded`` or ``Failed``) holds no
resources and is not ``active``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import read_object_meta
from noe_core.k8s.owners import Owners, TopOwner
from noe_core.k8s.resources import PodRequests, pod_requests
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.policies.rollout import ROLLOUT_LABEL

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class PodEntry:
    """What the report needs of one pod."""

    namespace: str
    name: str
    workload: TopOwner
    images: tuple[str, ...]
    requests: PodRequests
    active: bool
    pull_secrets: tuple[str, ...] = ()
    rollout: str = ""
    """Its ``arch.noe.adevinta.com/rollout`` label: the rollout's architecture (cohort), ``control``, or empty."""
    view: Workload | None = field(default=None, compare=False, repr=False)
    """The pod as read once: what the placement pipeline decides it by (its labels select its policies)."""


def read_pod(pod: Mapping[str, Any], owners: Owners) -> PodEntry:
    """Read a Pod as the API returns it; raises :class:`InvalidObject` naming the pod."""
    if not isinstance(pod, Mapping):
        raise InvalidObject(f"a Pod must be an object, not {type(pod).__name__}")
    try:
        meta = read_object_meta(pod)
    except InvalidObject as exc:
        raise InvalidObject(f"a Pod: {exc}") from None
    owner = owners.top_owner(meta)
    label = f"Pod {owner.namespace}/{meta.name}"
    try:
        view = read_workload(pod, POD, meta=meta)
        requests = pod_requests(view.spec)
    except InvalidObject as exc:
        raise InvalidObject(f"{label}: {exc}") from None
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return PodEntry(
        owner.namespace,
        meta.name,
        owner,
        view.images,
        requests,
        phase not in FINISHED_PHASES,
        view.pull_secrets,
        meta.labels.get(ROLLOUT_LABEL, ""),
        view,
    )
