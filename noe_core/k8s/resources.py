"""A pod's CPU and memory requests as the scheduler counts them.

kube-scheduler (``k8s.io/component-helpers`` ``resource.PodRequests``) reserves, per
resource, the larger of:

* the sum of the app containers' requests, plus every sidecar (an init container
  with ``restartPolicy: Always``), which keeps running beside them;
* the largest init container's request, each counted with the sidecars started
  before it;

then adds ``spec.overhead``. A pod-level ``spec.resources.requests`` entry, when
set, replaces the containers' figure for that resource. A container with a limit
and no request gets the limit, as the API server defaults it. Without sidecars
this is "the larger of the sum of containers and the largest init container".
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from noe_core.k8s.quantity import millis, parse_quantity, units
from noe_core.util.fields import array, mapping

RESOURCES = ("cpu", "memory")


@dataclass(frozen=True)
class PodRequests:
    """Effective requests of one pod: CPU in millicores, memory in bytes (both rounded up)."""

    cpu_millis: int = 0
    memory_bytes: int = 0

    def __add__(self, other: PodRequests) -> PodRequests:
        return PodRequests(self.cpu_millis + other.cpu_millis, self.memory_bytes + other.memory_bytes)


_Amounts = dict[str, Decimal]


def cores(cpu_millis: int) -> float | int:
    """Millicores as cores for JSON: ``1500`` → ``1.5``, ``2000`` → ``2``."""
    return cpu_millis // 1000 if cpu_millis % 1000 == 0 else cpu_millis / 1000


def _amounts(resources: object, path: str) -> _Amounts:
    """``requests`` of a ``resources`` block, falling back to ``limits`` per resource."""
    block = mapping(resources, path)
    requests = mapping(block.get("requests"), f"{path}.requests")
    limits = mapping(block.get("limits"), f"{path}.limits")
    out: _Amounts = {}
    for name in RESOURCES:
        if name in requests:
            out[name] = parse_quantity(requests[name], f"{path}.requests.{name}")
        elif name in limits:
            out[name] = parse_quantity(limits[name], f"{path}.limits.{name}")
    return out


def _add(total: _Amounts, more: _Amounts) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Decimal(0)) + amount


def _keep_max(total: _Amounts, other: _Amounts) -> None:
    for name, amount in other.items():
        if amount > total.get(name, Decimal(0)):
            total[name] = amount


def _containers(spec: Mapping[str, Any], field: str, path: str) -> list[Mapping[str, Any]]:
    items = array(spec.get(field), f"{path}.{field}")
    return [mapping(item, f"{path}.{field}[{index}]") for index, item in enumerate(items)]


def pod_requests(spec: Mapping[str, Any], path: str = "spec") -> PodRequests:
    """The effective requests of a pod with pod spec ``spec``; raises :class:`InvalidObject` on bad quantities."""
    total: _Amounts = {}
    for index, container in enumerate(_containers(spec, "containers", path)):
        _add(total, _amounts(container.get("resources"), f"{path}.containers[{index}].resources"))
    sidecars: _Amounts = {}
    largest_init: _Amounts = {}
    for index, container in enumerate(_containers(spec, "initContainers", path)):
        own = _amounts(container.get("resources"), f"{path}.initContainers[{index}].resources")
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _keep_max(largest_init, sidecars)
        else:
            while_running = dict(own)
            _add(while_running, sidecars)
            _keep_max(largest_init, while_running)
    _keep_max(total, largest_init)
    pod_level = _amounts(
        {"requests": mapping(spec.get("resources"), f"{path}.resources").get("requests")}, f"{path}.resources"
    )
    total.update(pod_level)
    overhead = mapping(spec.get("overhead"), f"{path}.overhead")
    _add(
        total,
        {name: parse_quantity(overhead[name], f"{path}.overhead.{name}") for name in RESOURCES if name in overhead},
    )
    return PodRequests(millis(total.get("cpu", Decimal(0))), units(total.get("memory", Decimal(0))))
