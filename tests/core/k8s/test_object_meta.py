"""An object's metadata read once: typed fields, annotations as far as noe reads them, and the one owner rule."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core import testing
from noe_core.errors import InvalidObject
from noe_core.k8s.object_meta import ObjectMeta, OwnerRef, owner_reference, read_object_meta


def test_the_fields_later_steps_need_are_read_with_their_types() -> None:
    pod = testing.pod(labels={"app": "web"}, name="")
    pod["apiVersion"] = "v1"
    pod["metadata"].update(
        generateName="web-7d4b9c-",
        uid="u-1",
        annotations={"a": "1", "b": {"not": "a string"}},
        ownerReferences=[
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "2", "controller": True}
        ],
    )
    meta = read_object_meta(pod)
    assert (meta.name, meta.generate_name, meta.namespace, meta.uid) == ("", "web-7d4b9c-", "default", "u-1")
    assert meta.labels == {"app": "web"} and meta.annotations == {"a": "1"}
    assert meta.owner == OwnerRef("ReplicaSet", "web-7d4b9c", "apps/v1", "2", controller=True)
    assert meta.api_version == "v1" and meta.raw is pod["metadata"] and meta.state is True


def test_absent_and_null_metadata_read_as_empty_and_say_so() -> None:
    assert read_object_meta({}) == ObjectMeta(state=False)
    assert read_object_meta({"metadata": None}).state is None


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("x", r"request\.object\.metadata must be an object, not a string"),
        ({"name": 3}, r"request\.object\.metadata\.name must be a string"),
        ({"generateName": []}, r"metadata\.generateName must be a string"),
        ({"namespace": 1}, r"metadata\.namespace must be a string"),
        ({"uid": False}, r"metadata\.uid must be a string"),
        ({"labels": {"a": 1}}, r"metadata\.labels\['a'\] must be a string"),
        ({"ownerReferences": {}}, r"metadata\.ownerReferences must be a list"),
        ({"ownerReferences": [{"name": "y"}]}, r"ownerReferences\[0\] needs a kind and a name"),
        ({"ownerReferences": [{"kind": "A", "name": "b", "uid": 5}]}, r"ownerReferences\[0\]\.uid must be a string"),
    ],
)
def test_wrong_types_are_named(metadata: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        read_object_meta({"metadata": metadata}, "request.object")


def test_the_owner_rule_is_the_controller_else_the_first() -> None:
    cm = {"kind": "ConfigMap", "name": "cm"}
    rs = {"kind": "ReplicaSet", "name": "web-1", "controller": True}
    assert owner_reference([cm, rs]) == OwnerRef("ReplicaSet", "web-1")
    assert owner_reference([cm]) == OwnerRef("ConfigMap", "cm", controller=False)
    assert owner_reference([]) is None and owner_reference(None) is None
    assert owner_reference([{"kind": "", "name": "x", "controller": True}]) is None
