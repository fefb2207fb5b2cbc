"""A list answer read item by item: the same items and metadata as ``json.loads``, however the bytes arrive."""

from __future__ import annotations

import json
from typing import Any

import pytest

from noe_core.util.safe_load import MAX_DEPTH, TooComplex, check_depth
from noe_web.kube.list_stream import read_list


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def read(data: bytes, size: int) -> tuple[dict[str, Any], list[Any]]:
    items: list[Any] = []
    rest = read_list(chunked(data, size), items.append)
    return rest, items


POD_LIST = {
    "kind": "PodList",
    "apiVersion": "v1",
    "metadata": {"resourceVersion": "4711", "continue": "eyJ2IjoxfQ==", "remainingItemCount": 1234567},
    "items": [
        {
            "metadata": {"name": f"p-{i}", "labels": {"app": "w\u00e9b \u2603", "n": str(i)}},
            "spec": {"x": [1, 2.5, None]},
        }
        for i in range(50)
    ],
}


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1 << 16])
def test_items_and_metadata_are_those_json_loads_reads_whatever_the_chunks(size: int) -> None:
    data = json.dumps(POD_LIST, ensure_ascii=False).encode()  # multi-byte characters cut across chunks too
    rest, items = read(data, size)
    assert items == POD_LIST["items"]
    assert rest == {k: v for k, v in POD_LIST.items() if k != "items"}


def test_metadata_after_the_items_and_spaces_anywhere_are_read_too() -> None:
    data = b' { "items" : [ {"a": 1} , {"b": 2} ] ,\n "metadata" : {"resourceVersion": "9"}, "count": 12345 } '
    rest, items = read(data, 3)
    assert items == [{"a": 1}, {"b": 2}]
    assert rest == {"metadata": {"resourceVersion": "9"}, "count": 12345}  # a number cut by a chunk is whole


@pytest.mark.parametrize("body", [b'{"items": null, "metadata": {}}', b'{"items": [], "metadata": {}}', b"{}"])
def test_an_empty_list_has_no_items(body: bytes) -> None:
    assert read(body, 4)[1] == []


def test_one_item_nested_too_deep_is_cut_and_the_others_are_read() -> None:
    hostile = "[" * 100_000 + "]" * 100_000
    data = '{"metadata": {"resourceVersion": "3"}, "items": [{"n": 1}, {"n": 2, "spec": ' + hostile + '}, {"n": 3}]}'
    rest, items = read(data.encode(), 4096)
    assert [item["n"] for item in items] == [1, 2, 3]
    assert rest == {"metadata": {"resourceVersion": "3"}}
    with pytest.raises(TooComplex):
        check_depth(items[1])  # whoever reads the hostile one refuses it
    assert MAX_DEPTH < 100_000


@pytest.mark.parametrize(
    "body", [b"", b"[]", b'{"items": [{"a": 1}', b'{"items": [{"a": 1} {"b": 2}]}', b'{"items": {"a": 1}}', b"{1: 2}"]
)
def test_what_is_not_a_list_object_raises_value_error(body: bytes) -> None:
    with pytest.raises(ValueError, match="Kubernetes list"):
        read(body, 5)
