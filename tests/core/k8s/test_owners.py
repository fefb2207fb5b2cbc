"""Top owners from owner references, and from the controllers' naming rules when parents are unknown."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import read_object_meta
from noe_core.k8s.owners import Owners, TopOwner


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


def top(owners: Owners, pod: dict[str, Any]) -> TopOwner:
    """The top owner of ``pod``, its metadata read as ``noe report`` reads it."""
    return owners.top_owner(read_object_meta(pod))


def obj(kind: str, name: str, owner: tuple[str, str] | None = None, namespace: str = "shop") -> dict[str, Any]:
    return pod(name, owner, namespace=namespace) | {"kind": kind}


def test_replicaset_with_template_hash_is_a_deployment() -> None:
    p = pod("web-6d4cf56db6-x2x7k", ("ReplicaSet", "web-6d4cf56db6"), labels={"pod-template-hash": "6d4cf56db6"})
    assert top(Owners(), p) == TopOwner("shop", "Deployment", "web")


def test_replicaset_without_matching_hash_stays_a_replicaset() -> None:
    p = pod("rs-abc", ("ReplicaSet", "standalone"), labels={"pod-template-hash": "zzz"})
    assert top(Owners(), p) == TopOwner("shop", "ReplicaSet", "standalone")


def test_cronjob_job_by_name() -> None:
    assert top(Owners(), pod("backup-28458840-abcde", ("Job", "backup-28458840"))) == TopOwner(
        "shop", "CronJob", "backup"
    )
    assert top(Owners(), pod("migrate-x", ("Job", "migrate-v2"))) == TopOwner("shop", "Job", "migrate-v2")


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
    assert top(owners, pod("a", ("ReplicaSet", "web-6d4cf56db6"), labels=hashed)) == TopOwner("shop", "Rollout", "web")
    assert top(owners, pod("b", ("Job", "backup-28458840"))) == TopOwner("shop", "Job", "backup-28458840")
    assert top(owners, pod("c", ("Job", "nightly-1"))) == TopOwner("shop", "CronJob", "nightly")


def test_bare_static_and_direct_controllers() -> None:
    assert top(Owners(), pod("debug")) == TopOwner("shop", "Pod", "debug")
    assert top(Owners(), pod("kube-apiserver-n1", ("Node", "n1"))) == TopOwner("shop", "Pod", "kube-apiserver-n1")
    assert top(Owners(), pod("db-0", ("StatefulSet", "db"))) == TopOwner("shop", "StatefulSet", "db")
    assert top(Owners(), pod("agent-x", ("DaemonSet", "agent"))) == TopOwner("shop", "DaemonSet", "agent")


def test_the_controller_reference_is_chosen_over_others() -> None:
    p = pod("x", ("ConfigMap", "cm"), controller=False)
    p["metadata"]["ownerReferences"].append({"kind": "StatefulSet", "name": "db", "controller": True})
    assert top(Owners(), p) == TopOwner("shop", "StatefulSet", "db")


def test_missing_namespace_reads_as_default_and_bad_shapes_are_named() -> None:
    p = pod("x")
    del p["metadata"]["namespace"]
    assert top(Owners(), p).namespace == "default"
    with pytest.raises(InvalidObject, match=r"no metadata\.name"):
        top(Owners(), {"metadata": {}})
    with pytest.raises(InvalidObject, match="ownerReferences must be a list"):
        top(Owners(), {"metadata": {"name": "x", "ownerReferences": {}}})
    with pytest.raises(InvalidObject, match=r"ownerReferences\[0\] needs a kind"):
        top(Owners(), {"metadata": {"name": "x", "ownerReferences": [{"name": "y"}]}})
