"""What the controller keeps of a Pod or a Node, and the questions it asks of them.

A watch cache of a large cluster must not hold every pod's full spec and
status: :func:`slim_pod` keeps the fields the controller reads (name, owner,
labels — placement policies select pods by them, as the webhook matched them —,
images of containers and image volumes, pull secrets, node, gates, phase,
readiness, container states with their messages cut short, ``deletionTimestamp``
(a terminating pod is never evicted); with ``keep_requests``, what the
PolicyReports need to count requests)
and :func:`slim_node` keeps a node's name, platform, readiness, cordon and taints (a Pending pod's
placement fields and ``PodScheduled`` condition are kept too: whether any node is left for it). Gated pods are
read again in full before the controller edits them.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from noe_core.image.node_platform import ARCH_LABEL, OS_LABEL, NodePlatform
from noe_core.image.platform import normalize_architecture, normalize_os
from noe_core.placement.gate import SCHEDULING_GATE, gates_of
from noe_core.placement.node_fit import NodeFacts
from noe_core.report.why import PodState

EXEC_FORMAT_ERROR = "exec format error"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_REPEATED = frozenset({"namespace", "creationTimestamp", "deletionTimestamp"})
"""Metadata strings many pods share (a namespace; the second a Deployment's replicas were created in)."""
MAX_MESSAGE = 512


def _short(value: Any) -> str:
    return value[:MAX_MESSAGE] if isinstance(value, str) else ""


def _state(state: Any) -> tuple[dict[str, Any], Hashable]:
    """A container state as kept (its reason and message cut short), and a key of it for :class:`SharedParts`."""
    out: dict[str, Any] = {}
    if not isinstance(state, dict):
        return out, ()
    key: tuple[Hashable, ...] = ()
    for phase in ("waiting", "terminated"):
        part = state.get(phase)
        if isinstance(part, dict):
            reason, message = _short(part.get("reason")), _short(part.get("message"))
            out[phase] = {"reason": reason, "message": message}
            key += (phase, reason, message)
    if isinstance(state.get("running"), dict):
        out["running"] = {}
        key += ("running",)
    return out, key


def _containers(
    spec: Mapping[str, Any], key: str, keep_requests: bool = False
) -> tuple[list[dict[str, Any]], Hashable | None]:
    """The containers as kept, and a cheap key of them for :class:`SharedParts` (``None``: hash them whole)."""
    items = spec.get(key)
    if not isinstance(items, list):
        return [], ()
    out: list[dict[str, Any]] = []
    for c in items:
        if not isinstance(c, dict):
            continue
        kept: dict[str, Any] = {"name": str(c.get("name") or ""), "image": str(c.get("image") or "")}
        if keep_requests:
            kept.update((k, c[k]) for k in ("resources", "restartPolicy") if k in c)
        out.append(kept)
    return out, None if keep_requests else tuple((c["name"], c["image"]) for c in out)


def _image_volumes(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The image volumes (``volumes[].image.reference``): the kubelet pulls them for the node's platform too."""
    items = spec.get("volumes")
    if not isinstance(items, list):
        return []
    out = []
    for volume in items:
        source = volume.get("image") if isinstance(volume, dict) else None
        if isinstance(source, dict) and isinstance(source.get("reference"), str):
            out.append({"name": str(volume.get("name") or ""), "image": {"reference": source["reference"]}})
    return out


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in for decoded JSON, equal exactly when the values are equal (bools apart from ints)."""
    kind = type(value)
    if kind is dict:
        return ("d", tuple((k, _frozen(v)) for k, v in value.items()))
    if kind is list:
        return ("l", tuple(_frozen(v) for v in value))
    return (kind.__name__, value)


class SharedParts:
    """Equal parts of many pods kept once: the labels, owner, containers and statuses of one workload's pods,
    and the strings they repeat (namespace, node, image, timestamps).

    A large cluster's pods are mostly replicas: what sets one apart from its siblings is its name, uid and
    resourceVersion. Parts are found by a hash of their content and compared whole, so no second copy of
    a part is kept as its key. An explicit cache, bounded: past ``limit`` parts it starts again (parts
    already handed out stay shared by the pods that hold them). The parts are never edited: the controller
    only reads pods.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self._parts: dict[int, list[Any]] = {}
        self._count = 0
        self._limit = limit

    def part(self, value: Any, key: Hashable | None = None) -> Any:
        """``value``, or an equal part already kept; ``key``: a cheaper stand-in of its content to hash
        (equal values give equal keys; by default :func:`_frozen`)."""
        try:
            digest = hash(_frozen(value) if key is None else key)
        except TypeError:  # the cheap key holds a list or an object (a field of another type than the API's)
            digest = hash(_frozen(value))
        kept = self._parts.get(digest)
        if kept is None:
            if self._count >= self._limit:
                self._parts.clear()
                self._count = 0
            self._parts[digest] = [value]
        else:
            for found in kept:
                if found == value and type(found) is type(value):
                    return found
            kept.append(value)
        self._count += 1
        return value

    def __len__(self) -> int:
        return self._count


def _list(value: Any) -> list[Any]:
    """An array as the API gives it; nothing for anything else (a field of another type is not read)."""
    return value if type(value) is list else []


def _count(value: Any) -> int:
    """A count as the API gives it (an integer), 0 for anything else."""
    return value if type(value) is int else 0


def _text(value: Any) -> Any:
    """A string many pods repeat (a namespace, a node, a timestamp), stored once."""
    return sys.intern(value) if type(value) is str else value


def _placement(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The fields kube-scheduler filters nodes by: nodeSelector, required node affinity, tolerations."""
    out: dict[str, Any] = {}
    if isinstance(spec.get("nodeSelector"), dict) and spec["nodeSelector"]:
        out["nodeSelector"] = spec["nodeSelector"]
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node_affinity.get(REQUIRED) if isinstance(node_affinity, dict) else None
    if isinstance(required, dict):
        out["affinity"] = {"nodeAffinity": {REQUIRED: required}}
    if isinstance(spec.get("tolerations"), list) and spec["tolerations"]:
        out["tolerations"] = spec["tolerations"]
    return out


def slim_pod(pod: dict[str, Any], *, keep_requests: bool = False, shared: SharedParts | None = None) -> dict[str, Any]:
    """The fields of a Pod the controller reads, in the Pod's own shape (so ``read_workload`` takes it).

    ``keep_requests`` also keeps the containers' resources, sidecar restart policies and the
    pod's overhead and resources: what :func:`noe_core.k8s.resources.pod_requests` reads. ``shared``
    keeps the parts pods repeat once (:class:`SharedParts`): the controller's cache of every pod.
    """
    share = (shared if shared is not None else SharedParts()).part
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)
    owners = [
        {k: o.get(k) for k in ("apiVersion", "kind", "name", "uid", "controller")}
        for o in _list(meta.get("ownerReferences"))
        if isinstance(o, dict) and o.get("controller") is True
    ]
    bound = bool(spec.get("nodeName"))
    out_meta: dict[str, Any] = {
        k: _text(meta[k]) if k in _REPEATED else meta[k]
        for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")
        if k in meta
    }
    if not bound and "resourceVersion" in meta:  # a gated pod's patch tests it; a bound pod is never patched
        out_meta["resourceVersion"] = meta["resourceVersion"]
    if owners:
        out_meta["ownerReferences"] = share(owners, tuple(tuple(o.values()) for o in owners))
    labels = meta.get("labels")
    if isinstance(labels, dict) and labels:
        # every label: placement policies select pods by them (podSelector), as the webhook matched them
        kept = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
        out_meta["labels"] = share(kept, tuple(kept.items()))
    out_spec: dict[str, Any] = {"containers": share(*_containers(spec, "containers", keep_requests))}
    init, init_key = _containers(spec, "initContainers", keep_requests)
    if init:
        out_spec["initContainers"] = share(init, init_key)
    if volumes := _image_volumes(spec):
        out_spec["volumes"] = share(volumes)
    if spec.get("nodeName"):
        out_spec["nodeName"] = _text(spec["nodeName"])
    for key in (
        "imagePullSecrets",
        "schedulingGates",
        *(("overhead", "resources") if keep_requests else ()),
    ):
        if spec.get(key):
            out_spec[key] = share(spec[key])
    conditions = [
        {"type": "Ready", "status": c.get("status")}
        for c in _list(status.get("conditions"))
        if isinstance(c, dict) and c.get("type") == "Ready"
    ]
    if not bound:
        # a Pending pod: what the scheduler said, and what it filters nodes by (NoMatchingNode); a bound
        # pod's copy would cost every pod of a large cluster for nothing
        out_spec.update(_placement(spec))
        conditions += [
            {k: c.get(k) for k in ("type", "status", "reason", "message") if isinstance(c.get(k), str)}
            for c in _list(status.get("conditions"))
            if isinstance(c, dict) and c.get("type") == "PodScheduled"
        ]
    statuses = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in _list(status.get(key)):
            if isinstance(cs, dict):
                statuses.append(
                    {
                        "name": str(cs.get("name") or ""),
                        "image": str(cs.get("image") or ""),
                        "imageID": str(cs.get("imageID") or ""),
                        "restartCount": _count(cs.get("restartCount")),
                        "state": share(*_state(cs.get("state"))),
                        "lastState": share(*_state(cs.get("lastState"))),
                    }
                )
    # the kept states are shared parts already: their identity stands for their content in the key
    statuses_key = tuple((c["name"], c["image"], c["imageID"], c["restartCount"], id(c["state"]), id(c["lastState"]))
                         for c in statuses)  # fmt: skip
    out_status: dict[str, Any] = {
        "conditions": share(conditions, tuple(tuple(c.items()) for c in conditions)),
        "containerStatuses": share(statuses, statuses_key),
    }
    if isinstance(status.get("phase"), str):
        out_status["phase"] = _text(status["phase"])
    ready = any(c["status"] == "True" for c in conditions if c["type"] == "Ready")
    if isinstance(status.get("startTime"), str) and not ready:
        # how long a pod has not been Ready (a rollout's failing pods): a Ready pod's start is never read
        out_status["startTime"] = _text(status["startTime"])
    # whole spec and status parts too: a workload's Ready replicas on one node differ in neither
    spec_part = share(out_spec, tuple((k, _identity(v)) for k, v in out_spec.items()))
    status_part = share(out_status, tuple((k, _identity(v)) for k, v in out_status.items()))
    return {"metadata": out_meta, "spec": spec_part, "status": status_part}


def _identity(value: Any) -> Hashable:
    """A kept value's stand-in in a key: a shared part by identity, a string or number as itself."""
    return id(value) if isinstance(value, list | dict) else value


def slim_node(node: dict[str, Any]) -> dict[str, Any]:
    meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    assert isinstance(labels, dict)
    info = (node.get("status") or {}).get("nodeInfo") or {}
    platform = NodePlatform.from_labels({str(k): str(v) for k, v in labels.items()})
    return {
        "metadata": {"name": meta.get("name", "")},
        "arch": str(labels.get(ARCH_LABEL) or info.get("architecture") or ""),
        "os": str(labels.get(OS_LABEL) or info.get("operatingSystem") or ""),
        "build": platform.windows_build,
        "level": platform.level,
        # readiness, cordon and taints: whether a Pending pod noe placed has any node left (NoMatchingNode)
        "facts": NodeFacts.from_node(node),
    }


def node_platform(node: Mapping[str, Any]) -> NodePlatform:
    """The platform of a node as :func:`slim_node` keeps it (what the misplaced-pod test reads)."""
    arch, _ = normalize_architecture(str(node.get("arch", "")))
    level = node.get("level", 1)
    return NodePlatform(
        normalize_os(str(node.get("os", ""))), arch, str(node.get("build", "")), level if isinstance(level, int) else 1
    )


def is_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod["status"]["conditions"])


def unschedulable_because(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's message when it found no node for the pod (``PodScheduled=False``, reason
    ``Unschedulable``), else ``None``: only then can noe's own terms be what keeps it Pending."""
    return PodState.from_pod(pod).unschedulable


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """Marked for deletion (``metadata.deletionTimestamp``): it is going already, and stays listed until it is gone.

    Evicting it again is pointless; after a failover the new leader would otherwise do exactly that.
    """
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Carries noe's scheduling gate and is not bound yet."""
    return not pod["spec"].get("nodeName") and SCHEDULING_GATE in gates_of(pod["spec"])


@dataclass(frozen=True)
class ContainerState:
    name: str
    image: str
    image_id: str
    restart_count: int
    crash_looping: bool
    says_exec_format_error: bool


def containers(pod: Mapping[str, Any]) -> Iterator[ContainerState]:
    """Each container's state: crash-looping, and whether a current or last state message says it."""
    return container_states(pod["status"]["containerStatuses"])


def container_states(statuses: list[dict[str, Any]]) -> Iterator[ContainerState]:
    """:func:`containers` of a pod's kept ``containerStatuses`` (a part its replicas share)."""
    for cs in statuses:
        texts = [
            part.get("message", "")
            for state in (cs["state"], cs["lastState"])
            for part in state.values()
            if isinstance(part, dict)
        ]
        waiting = cs["state"].get("waiting") or {}
        yield ContainerState(
            cs["name"],
            cs["image"],
            cs["imageID"],
            cs["restartCount"],
            crash_looping=waiting.get("reason") == "CrashLoopBackOff",
            says_exec_format_error=any(EXEC_FORMAT_ERROR in text.lower() for text in texts),
        )
