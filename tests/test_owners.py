"""Top owners from owner references, and from the controllers' naming rules when parents are unknown."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core.errors import InvalidObject
from noe_core.owners import Owners, Workload


def pod(
    name: str,
    owner: tuple[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    namespace: str = "shop",
    controller: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": controller}]
    return {"kind": "Pod", "metadata": meta}


def obj(kind: str, name: str, owner: tuple[str, str] | None = None, namespace: str = "shop") -> dict[str, Any]:
    return pod(name, owner, namespace=namespace) | {"kind": kind}


def test_replicaset_with_template_hash_is_a_deployment() -> None:
    p = pod("web-6d4cf56db6-x2x7k", ("ReplicaSet", "web-6d4cf56db6"), labels={"pod-template-hash": "6d4cf56db6"})
    assert Owners().top_owner(p) == Workload("shop", "Deployment", "web")


def test_replicaset_without_matching_hash_stays_a_replicaset() -> None:
    p = pod("rs-abc", ("ReplicaSet", "standalone"), labels={"pod-template-hash": "zzz"})
    assert Owners().top_owner(p) == Workload("shop", "ReplicaSet", "standalone")


def test_cronjob_job_by_name() -> None:
    assert Owners().top_owner(pod("backup-28458840-abcde", ("Job", "backup-28458840"))) == Workload(
        "shop", "CronJob", "backup"
    )
    assert Owners().top_owner(pod("migrate-x", ("Job", "migrate-v2"))) == Workload("shop", "Job", "migrate-v2")


def test_known_parents_win_over_naming_rules() -> None:
    owners = Owners.from_objects(
        [
            obj("ReplicaSet", "web-6d4cf56db6", ("Rollout", "web")),
            obj("Job", "backup-28458840"),  # a Job someone named like a CronJob's
            obj("Job", "nightly-1", ("CronJob", "nightly")),
            obj("Service", "ignored"),
        ]
    )
    hashed = {"pod-template-hash": "6d4cf56db6"}
    assert owners.top_owner(pod("a", ("ReplicaSet", "web-6d4cf56db6"), labels=hashed)) == Workload(
        "shop", "Rollout", "web"
    )
    assert owners.top_owner(pod("b", ("Job", "backup-28458840"))) == Workload("shop", "Job", "backup-28458840")
    assert owners.top_owner(pod("c", ("Job", "nightly-1"))) == Workload("shop", "CronJob", "nightly")


def test_bare_static_and_direct_controllers() -> None:
    assert Owners().top_owner(pod("debug")) == Workload("shop", "Pod", "debug")
    assert Owners().top_owner(pod("kube-apiserver-n1", ("Node", "n1"))) == Workload("shop", "Pod", "kube-apiserver-n1")
    assert Owners().top_owner(pod("db-0", ("StatefulSet", "db"))) == Workload("shop", "StatefulSet", "db")
    assert Owners().top_owner(pod("agent-x", ("DaemonSet", "agent"))) == Workload("shop", "DaemonSet", "agent")


def test_the_controller_reference_is_chosen_over_others() -> None:
    p = pod("x", ("ConfigMap", "cm"), controller=False)
    p["metadata"]["ownerReferences"].append({"kind": "StatefulSet", "name": "db", "controller": True})
    assert Owners().top_owner(p) == Workload("shop", "StatefulSet", "db")


def test_missing_namespace_reads_as_default_and_bad_shapes_are_named() -> None:
    p = pod("x")
    del p["metadata"]["namespace"]
    assert Owners().top_owner(p).namespace == "default"
    with pytest.raises(InvalidObject, match=r"no metadata\.name"):
        Owners().top_owner({"metadata": {}})
    with pytest.raises(InvalidObject, match="ownerReferences must be a list"):
        Owners().top_owner({"metadata": {"name": "x", "ownerReferences": {}}})
    with pytest.raises(InvalidObject, match=r"ownerReferences\[0\] needs a kind"):
        Owners().top_owner({"metadata": {"name": "x", "ownerReferences": [{"name": "y"}]}})
