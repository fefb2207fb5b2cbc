"""Locating the pod spec and its images, and rejecting malformed shapes with a precise path."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.review import parse_admission_review
from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import read_object_meta
from noe_core.k8s.workload import (
    MAX_DEPTH,
    check_nesting,
    pull_secret_names,
    read_workload,
)


def test_images_of_pod_in_order_deduplicated_empty_ignored() -> None:
    pod = testing.pod(images=["a:1", "", "b:1", "a:1"], init_images=["init:1", "b:1"])
    assert read_workload(pod, "Pod").images == ("a:1", "b:1", "init:1")


def test_images_of_daemonset_template() -> None:
    ds = testing.daemonset(images=["agent:1"], init_images=["setup:1"])
    assert read_workload(ds, "DaemonSet").images == ("agent:1", "setup:1")


def test_missing_image_is_ignored_and_ephemeral_containers_are_not_read() -> None:
    pod = testing.pod(images=["a"])
    pod["spec"]["containers"].append({"name": "noimage"})
    pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    assert read_workload(pod, "Pod").images == ("a",)


def test_pod_without_spec_has_no_images() -> None:
    assert read_workload({"metadata": {}}, "Pod").images == ()


def test_the_spec_read_is_the_objects_own_not_a_copy() -> None:
    pod = testing.pod()
    assert read_workload(pod, "Pod").spec is pod["spec"]
    ds = testing.daemonset()
    assert read_workload(ds, "DaemonSet").spec is ds["spec"]["template"]["spec"]


def test_metadata_read_by_the_caller_is_not_read_again() -> None:
    pod = testing.pod(labels={"a": "1"})
    meta = read_object_meta(pod)
    workload = read_workload(pod, "Pod", meta=meta)
    assert workload.meta is meta and workload.pod_meta is meta
    ds = testing.daemonset(labels={"b": "2"})
    ds["metadata"]["labels"] = {"owner": "ds"}
    own = read_object_meta(ds)
    placed = read_workload(ds, "DaemonSet", meta=own)
    assert placed.meta is own and placed.pod_meta.labels == {"b": "2"} == placed.labels


def test_labels() -> None:
    assert read_workload(testing.pod(labels={"a": "1"}), "Pod").labels == {"a": "1"}
    assert read_workload(testing.daemonset(labels={"b": "2"}), "DaemonSet").labels == {"b": "2"}
    assert read_workload({"spec": {}}, "Pod").labels == {}


def _with(path: list[str | int], value: Any, kind: str = "Pod") -> dict[str, Any]:
    obj: dict[str, Any] = testing.pod(images=["a", "b"]) if kind == "Pod" else testing.daemonset(images=["a"])
    target: Any = obj
    for step in path[:-1]:
        if isinstance(target, dict) and step not in target:
            target[step] = {}
        target = target[step]
    target[path[-1]] = value
    return obj


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["spec", "containers", 1, "image"], 3, r"spec.containers\[1\].image must be a string, not a number"),
        (["spec", "containers"], {"a": 1}, "spec.containers must be an array"),
        (["spec", "containers", 0], "nginx", r"spec.containers\[0\] must be an object"),
        (["spec", "initContainers"], "x", "spec.initContainers must be an array"),
        (["spec", "nodeSelector"], ["a"], "spec.nodeSelector must be an object"),
        (["spec", "nodeSelector"], {"a": 1}, r"spec.nodeSelector\['a'\] must be a string"),
        (["spec", "nodeName"], 5, "spec.nodeName must be a string"),
        (["spec", "tolerations"], {"key": "a"}, "spec.tolerations must be an array"),
        (["spec", "tolerations"], [{"key": 1}], r"spec.tolerations\[0\].key must be a string"),
        (["spec", "affinity"], [], "spec.affinity must be an object"),
        (["spec", "affinity", "nodeAffinity"], "x", "spec.affinity.nodeAffinity must be an object"),
        (
            ["spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"],
            {"nodeSelectorTerms": {}},
            "nodeSelectorTerms must be an array",
        ),
        (
            ["spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"],
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}]},
            r"nodeSelectorTerms\[0\].matchExpressions\[0\].values\[0\] must be a string",
        ),
        (
            ["spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"],
            {"nodeSelectorTerms": [{"matchExpressions": [{"operator": "Exists"}]}]},
            r"matchExpressions\[0\].key is missing",
        ),
        (
            ["spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"],
            [{"weight": "heavy", "preference": {}}],
            r"preferredDuringSchedulingIgnoredDuringExecution\[0\].weight must be an integer",
        ),
        (["metadata", "labels"], {"a": 1}, r"metadata.labels\['a'\] must be a string"),
        (["metadata"], "x", "metadata must be an object"),
        (["spec"], "x", "spec must be an object"),
    ],
)
def test_malformed_pod(path: list[str | int], value: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        read_workload(_with(path, value), "Pod")


def test_malformed_daemonset() -> None:
    with pytest.raises(InvalidObject, match=r"spec\.template is missing"):
        read_workload({"spec": {}}, "DaemonSet")
    with pytest.raises(InvalidObject, match=r"spec\.template is missing"):
        read_workload({"spec": {"template": None}}, "DaemonSet")
    with pytest.raises(InvalidObject, match=r"spec.template.spec.containers\[0\].image must be a string"):
        read_workload(_with(["spec", "template", "spec", "containers", 0, "image"], 1, "DaemonSet"), "DaemonSet")
    with pytest.raises(InvalidObject, match=r"spec\.template\.metadata\.labels"):
        read_workload(_with(["spec", "template", "metadata", "labels"], [], "DaemonSet"), "DaemonSet")


def test_not_an_object_and_unknown_kind() -> None:
    with pytest.raises(InvalidObject, match="must be an object, not an array"):
        read_workload([], "Pod")
    with pytest.raises(InvalidObject, match="noe handles Pod, DaemonSet"):
        read_workload({}, "Deployment")


def test_nulls_read_as_absent() -> None:
    pod = testing.pod(images=["a"])
    pod["spec"].update({"nodeSelector": None, "affinity": None, "tolerations": None, "initContainers": None})
    assert read_workload(pod, "Pod").images == ("a",)


def test_null_container_entries_read_as_empty() -> None:
    pod = testing.pod(images=["a"])
    pod["spec"]["containers"].append(None)
    pod["spec"]["initContainers"] = [None]
    assert read_workload(pod, "Pod").images == ("a",)


def _deep_list(depth: int) -> object:
    return json.loads("[" * depth + "]" * depth)


def test_objects_nested_past_the_limit_are_invalid() -> None:
    check_nesting(_deep_list(MAX_DEPTH))
    with pytest.raises(InvalidObject, match=f"nested more than {MAX_DEPTH} levels"):
        check_nesting(_deep_list(MAX_DEPTH + 1))
    with pytest.raises(InvalidObject, match="nested more than"):
        read_workload({"spec": {"containers": [], "x": _deep_list(900)}}, "Pod")


def test_many_image_pull_secrets_are_read_as_an_ordered_set_quickly() -> None:
    p = testing.pod(["arm:1"])
    p["spec"]["imagePullSecrets"] = [{"name": f"s{i % 60_000}"} for i in range(60_001)] + [None, {"name": 3}]
    started = time.monotonic()
    names = pull_secret_names(parse_admission_review(testing.admission_review(p)).obj["spec"]["imagePullSecrets"])
    assert time.monotonic() - started < 1.0  # was 14 s: a list membership test per name
    assert names == tuple(f"s{i}" for i in range(60_000))
    assert read_workload(p, "Pod").pull_secrets == names


def test_image_volumes_are_images_and_those_only_mounted_are_known() -> None:
    pod = testing.pod(images=["app:1"], init_images=["init:1"], volume_images=["model:1", "", "app:1", "model:1"])
    workload = read_workload(pod, "Pod")
    assert workload.images == ("app:1", "init:1", "model:1")  # rule 3: containers, init containers, image volumes
    assert workload.volume_images == {"model:1"}  # app:1 is also a container's image
    pod["spec"]["volumes"].append({"name": "cache", "emptyDir": {}})
    assert read_workload(pod, "Pod").images == ("app:1", "init:1", "model:1")
    ds = testing.daemonset(images=["agent:1"])
    ds["spec"]["template"]["spec"]["volumes"] = [{"name": "rules", "image": {"reference": "rules:2"}}]
    assert read_workload(ds, "DaemonSet").images == ("agent:1", "rules:2")


def test_ephemeral_containers_are_read_by_name() -> None:
    pod = testing.pod(images=["app:1"], debug_images=["busybox:1", "debug:2"])
    pod["spec"]["ephemeralContainers"].append({"name": "noimage"})
    assert read_workload(pod, "Pod").ephemeral == {"debugger-0": "busybox:1", "debugger-1": "debug:2"}
    assert read_workload(testing.pod(), "Pod").ephemeral == {}


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["spec", "volumes"], {"a": 1}, "spec.volumes must be an array"),
        (["spec", "volumes"], [{"name": "v", "image": "x"}], r"spec.volumes\[0\].image must be an object"),
        (["spec", "volumes"], [{"image": {"reference": 5}}], r"spec.volumes\[0\].image.reference must be a string"),
        (["spec", "ephemeralContainers"], [{"name": 1}], r"spec.ephemeralContainers\[0\].name must be a string"),
    ],
)
def test_malformed_volumes_and_ephemeral_containers(path: list[str | int], value: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        read_workload(_with(path, value), "Pod")
