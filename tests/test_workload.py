"""Locating the pod spec and its images, and rejecting malformed shapes with a precise path."""

from __future__ import annotations

import time
from typing import Any

import pytest

from noe_core import testing
from noe_core.admission import parse_admission_review
from noe_core.errors import InvalidObject
from noe_core.workload import (
    MAX_DEPTH,
    check_depth,
    check_workload,
    images_of,
    pod_labels,
    pod_spec,
    pull_secret_names,
    read_workload,
)


def test_images_of_pod_in_order_deduplicated_empty_ignored() -> None:
    pod = testing.pod(images=["a:1", "", "b:1", "a:1"], init_images=["init:1", "b:1"])
    assert images_of(pod, "Pod") == ["a:1", "b:1", "init:1"]


def test_images_of_daemonset_template() -> None:
    ds = testing.daemonset(images=["agent:1"], init_images=["setup:1"])
    assert images_of(ds, "DaemonSet") == ["agent:1", "setup:1"]


def test_missing_image_is_ignored_and_ephemeral_containers_are_not_read() -> None:
    pod = testing.pod(images=["a"])
    pod["spec"]["containers"].append({"name": "noimage"})
    pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    assert images_of(pod, "Pod") == ["a"]


def test_pod_without_spec_has_no_images() -> None:
    assert images_of({"metadata": {}}, "Pod") == []


def test_pod_spec_returns_the_object_itself_for_editing() -> None:
    pod = testing.pod()
    pod_spec(pod, "Pod")["nodeSelector"] = {"a": "b"}
    assert pod["spec"]["nodeSelector"] == {"a": "b"}
    ds = testing.daemonset()
    pod_spec(ds, "DaemonSet")["x"] = 1
    assert ds["spec"]["template"]["spec"]["x"] == 1


def test_labels() -> None:
    assert pod_labels(testing.pod(labels={"a": "1"}), "Pod") == {"a": "1"}
    assert pod_labels(testing.daemonset(labels={"b": "2"}), "DaemonSet") == {"b": "2"}
    assert pod_labels({"spec": {}}, "Pod") == {}


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
        images_of(_with(path, value), "Pod")


def test_malformed_daemonset() -> None:
    with pytest.raises(InvalidObject, match=r"spec\.template is missing"):
        images_of({"spec": {}}, "DaemonSet")
    with pytest.raises(InvalidObject, match=r"spec\.template is missing"):
        images_of({"spec": {"template": None}}, "DaemonSet")
    with pytest.raises(InvalidObject, match=r"spec.template.spec.containers\[0\].image must be a string"):
        images_of(_with(["spec", "template", "spec", "containers", 0, "image"], 1, "DaemonSet"), "DaemonSet")
    with pytest.raises(InvalidObject, match=r"spec\.template\.metadata\.labels"):
        images_of(_with(["spec", "template", "metadata", "labels"], [], "DaemonSet"), "DaemonSet")


def test_not_an_object_and_unknown_kind() -> None:
    with pytest.raises(InvalidObject, match="must be an object, not an array"):
        check_workload([], "Pod")
    with pytest.raises(InvalidObject, match="noe handles Pod, DaemonSet"):
        images_of({}, "Deployment")


def test_nulls_read_as_absent() -> None:
    pod = testing.pod(images=["a"])
    pod["spec"].update({"nodeSelector": None, "affinity": None, "tolerations": None, "initContainers": None})
    assert images_of(pod, "Pod") == ["a"]


def test_null_container_entries_read_as_empty() -> None:
    pod = testing.pod(images=["a"])
    pod["spec"]["containers"].append(None)
    pod["spec"]["initContainers"] = [None]
    assert images_of(pod, "Pod") == ["a"]


def _nested(depth: int) -> object:
    value: object = []
    for level in range(depth - 1):
        value = [value] if level % 2 else {"k": value}
    return value


def test_check_depth_accepts_the_limit_and_rejects_one_more() -> None:
    check_depth(_nested(MAX_DEPTH))
    check_depth({"a": "x" * 10, "b": [1, 2, {"c": None}]})
    with pytest.raises(InvalidObject, match=f"nested more than {MAX_DEPTH} levels"):
        check_depth(_nested(MAX_DEPTH + 1))
    with pytest.raises(InvalidObject, match="nested more than"):
        check_workload({"spec": {"containers": [], "x": _nested(5000)}}, "Pod")


def test_many_image_pull_secrets_are_read_as_an_ordered_set_quickly() -> None:
    p = testing.pod(["arm:1"])
    p["spec"]["imagePullSecrets"] = [{"name": f"s{i % 60_000}"} for i in range(60_001)] + [None, {"name": 3}]
    started = time.monotonic()
    names = pull_secret_names(parse_admission_review(testing.admission_review(p)).obj["spec"]["imagePullSecrets"])
    assert time.monotonic() - started < 1.0  # was 14 s: a list membership test per name
    assert names == tuple(f"s{i}" for i in range(60_000))
    assert read_workload(p, "Pod").pull_secrets == names
