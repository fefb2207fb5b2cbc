"""What the controller keeps of a pod: every field it reads, the parts replicas repeat kept once."""

from __future__ import annotations

import json
from typing import Any

from noe_core.k8s.workload import POD, read_workload
from noe_web.controller.podview import SharedParts, slim_pod
from tests.support.realistic_cluster import realistic_pods


def replicas(count: int) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(p)) for p in realistic_pods(count, 10)]


def test_replicas_share_their_labels_owner_containers_and_statuses() -> None:
    shared = SharedParts()
    pods = replicas(400)
    kept = [slim_pod(p, shared=shared) for p in pods]
    parts = {
        "labels": {id(k["metadata"]["labels"]) for k in kept},
        "owners": {id(k["metadata"]["ownerReferences"]) for k in kept},
        "containers": {id(k["spec"]["containers"]) for k in kept},
        "statuses": {id(k["status"]["containerStatuses"]) for k in kept},
    }
    owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in pods}
    assert len(parts["owners"]) == len(owners) < len(pods) / 10
    assert len(parts["containers"]) <= len(owners) and len(parts["statuses"]) < len(pods) / 4
    assert len(parts["labels"]) < len(pods)
    # shared, yet each pod reads exactly as it was: the values equal an unshared copy's
    assert kept == [slim_pod(p) for p in pods]
    for pod, view in zip(pods, kept, strict=True):
        assert read_workload(view, POD).labels == pod["metadata"]["labels"]
        assert (
            view["spec"]["nodeName"] is kept[0]["spec"]["nodeName"]
            or view["spec"]["nodeName"] != kept[0]["spec"]["nodeName"]
        )


def test_a_bound_ready_pod_keeps_no_resource_version_or_start_a_pending_one_does() -> None:
    pod = replicas(1)[0]
    view = slim_pod(pod)
    assert "resourceVersion" not in view["metadata"] and "startTime" not in view["status"]
    pending = json.loads(json.dumps(pod))
    del pending["spec"]["nodeName"]
    pending["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
    ]
    pending["spec"]["tolerations"] = [{"key": "arch", "operator": "Exists"}]
    view = slim_pod(pending)
    assert view["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    assert view["status"]["startTime"] == pod["status"]["startTime"]
    assert view["spec"]["tolerations"] == [{"key": "arch", "operator": "Exists"}]
    assert view["status"]["conditions"][-1]["reason"] == "Unschedulable"


def test_a_bool_and_an_int_are_never_the_same_part() -> None:
    shared = SharedParts()
    first = shared.part([{"controller": True}])
    assert shared.part([{"controller": 1}]) is not first
    assert shared.part([{"controller": True}]) is first
