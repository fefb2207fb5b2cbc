"""A page of pods decoded only as far as ``slim_pod`` reads gives the controller exactly the pod view a
fully decoded page gives, for realistic pods and for pods with any value at any field it reads."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_web.controller.pod_fields import POD_LIST
from noe_web.controller.podview import slim_pod
from noe_web.kube.list_stream import read_list
from tests.support.json_values import json_values
from tests.support.realistic_cluster import realistic_pods

assert POD_LIST is not None, "msgspec is installed with the test extras"

JSON_VALUES = json_values(max_text=12, max_size=3, max_leaves=12)
CONTAINER = ("name", "image", "resources", "restartPolicy")
STATE = ("state", "lastState")
PHASES = ("waiting", "terminated")
# every place slim_pod reads, and the objects and arrays on the way
PATHS: list[tuple[Any, ...]] = [
    ("metadata",),
    *(("metadata", k) for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")),
    ("metadata", "resourceVersion"),
    ("metadata", "labels"),
    ("metadata", "labels", "app"),
    ("metadata", "ownerReferences"),
    ("metadata", "ownerReferences", 0),
    *(("metadata", "ownerReferences", 0, k) for k in ("apiVersion", "kind", "name", "uid", "controller")),
    ("spec",),
    *(("spec", k) for k in ("containers", "initContainers", "volumes", "nodeName", "imagePullSecrets")),
    *(("spec", k) for k in ("schedulingGates", "overhead", "resources", "nodeSelector", "affinity", "tolerations")),
    ("spec", "containers", 0),
    *(("spec", "containers", 0, k) for k in CONTAINER),
    ("spec", "affinity", "nodeAffinity"),
    ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
    ("status",),
    *(("status", k) for k in ("conditions", "phase", "startTime", "containerStatuses", "initContainerStatuses")),
    ("status", "conditions", 0),
    *(("status", "conditions", 0, k) for k in ("type", "status", "reason", "message")),
    ("status", "containerStatuses", 0),
    *(("status", "containerStatuses", 0, k) for k in ("name", "image", "imageID", "restartCount", *STATE)),
    *(("status", "containerStatuses", 0, s, p) for s in STATE for p in ("waiting", "terminated", "running")),
    *(
        ("status", "containerStatuses", 0, "state", p, k)
        for p in ("waiting", "terminated")
        for k in ("reason", "message")
    ),
]
VOLUME = {"name": "model", "image": {"reference": "registry.example/model:v1", "pullPolicy": "IfNotPresent"}}


def page(pods: list[dict[str, Any]]) -> bytes:
    return json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": pods}).encode()


def views(data: bytes, *, schema: bool, keep_requests: bool) -> list[dict[str, Any]]:
    items: list[Any] = []
    read_list([data], items.append, schema=POD_LIST if schema else None)
    return [slim_pod(item, keep_requests=keep_requests) for item in items if isinstance(item, dict)]


def put(pod: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set the value at ``path`` where every step on the way exists with the right type; else leave the pod."""
    here: Any = pod
    for step in path[:-1]:
        if isinstance(step, int):
            if not (isinstance(here, list) and len(here) > step):
                return
        elif not (isinstance(here, dict) and step in here):
            return
        here = here[step]
    last = path[-1]
    if isinstance(last, int) and isinstance(here, list) and here:
        here[min(last, len(here) - 1)] = value
    elif isinstance(last, str) and isinstance(here, dict):
        here[last] = value


def a_pod() -> dict[str, Any]:
    pod = copy.deepcopy(list(realistic_pods(3, 3))[2])
    pod["spec"]["volumes"] = [*pod["spec"].get("volumes", []), VOLUME]
    return pod


@pytest.mark.parametrize("keep_requests", [False, True])
def test_realistic_pods_decoded_by_the_schema_are_viewed_as_decoded_whole(keep_requests: bool) -> None:
    pods = list(realistic_pods(300, 20))
    pods[7]["spec"].pop("nodeName", None)  # a Pending pod: its placement fields and PodScheduled are kept
    pods[8]["spec"]["volumes"] = [VOLUME]
    data = page(pods)
    assert POD_LIST.decode(data) is not None  # the schema read this page: the fast path is what is compared
    assert views(data, schema=True, keep_requests=keep_requests) == views(
        data, schema=False, keep_requests=keep_requests
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES), max_size=6),
    pending=st.booleans(),
    keep_requests=st.booleans(),
)
def test_any_value_at_any_field_read_gives_the_view_a_whole_decoding_gives(
    changes: list[tuple[tuple[Any, ...], Any]], pending: bool, keep_requests: bool
) -> None:
    pod = a_pod()
    if pending:
        pod["spec"].pop("nodeName", None)
    for path, value in changes:
        put(pod, path, value)
    data = page([a_pod(), pod])
    assert views(data, schema=True, keep_requests=keep_requests) == views(
        data, schema=False, keep_requests=keep_requests
    )
