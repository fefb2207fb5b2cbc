"""A list page decoded by a schema: the same items (as far as the schema reads) and metadata as item by item,
and every page the schema cannot take read item by item instead."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import pytest

from noe_core.util.safe_load import TooComplex, check_depth
from noe_web.kube import list_schema as list_schema_module
from noe_web.kube.list_schema import ListSchema, list_schema
from noe_web.kube.list_stream import read_list


class Part(TypedDict, total=False):
    n: Any
    keep: Any


class Item(TypedDict, total=False):
    n: Any
    part: Part | None


ITEMS = list_schema(Item)
assert ITEMS is not None, "msgspec is installed with the test extras"


class Counting(ListSchema):
    """A schema that counts the pages it was given."""

    def __init__(self) -> None:
        super().__init__(Item)
        self.pages = 0
        self.taken = 0

    def decode(self, data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        self.pages += 1
        decoded = super().decode(data)
        self.taken += decoded is not None
        return decoded


def read(data: bytes, schema: ListSchema | None, whole_up_to: int = 1 << 20) -> tuple[dict[str, Any], list[Any]]:
    items: list[Any] = []
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    rest = read_list(chunks, items.append, schema=schema, whole_up_to=whole_up_to)
    return rest, items


PAGE = {
    "kind": "PodList",
    "apiVersion": "v1",
    "metadata": {"resourceVersion": "4711", "continue": "eyJ2IjoxfQ=="},
    "items": [
        {"n": i, "drop": {"deep": [1, 2, {"x": "y"}]}, "part": {"n": "w\u00e9b \u2603", "keep": [i], "other": 1}}
        for i in range(50)
    ],
}


def test_a_page_is_decoded_by_the_schema_only_as_far_as_it_reads() -> None:
    schema = Counting()
    rest, items = read(json.dumps(PAGE, ensure_ascii=False).encode(), schema)
    assert (schema.pages, schema.taken) == (1, 1)
    assert items == [{"n": i, "part": {"n": "w\u00e9b \u2603", "keep": [i]}} for i in range(50)]
    assert rest == {"kind": "PodList", "apiVersion": "v1", "metadata": PAGE["metadata"]}


@pytest.mark.parametrize(
    ("odd", "taken"),
    [
        ('{"n": 1, "part": [1, 2]}', 0),  # an array where the schema walks an object
        ('{"n": NaN}', 0),  # JSON's NaN: the standard library reads it, msgspec does not
        ('"a string item"', 0),
        ('{"n": 123456789012345678901234567890, "part": null}', 1),  # beyond 64 bits, and null: both read
    ],
)
def test_a_page_the_schema_cannot_take_is_read_item_by_item(odd: str, taken: int) -> None:
    data = '{"metadata": {"resourceVersion": "3"}, "items": [{"n": 0}, ' + odd + ', {"n": 2}]}'
    schema = Counting()
    rest, items = read(data.encode(), schema)
    assert (schema.pages, schema.taken) == (1, taken)
    assert (rest, items) == read(data.encode(), None)
    assert items[0] == {"n": 0} and items[-1] == {"n": 2}


def test_an_item_nested_too_deep_is_cut_as_item_by_item() -> None:
    hostile = "[" * 100_000 + "]" * 100_000
    data = '{"metadata": {}, "items": [{"n": 1}, {"n": 2, "part": {"keep": ' + hostile + '}}, {"n": 3}]}'
    schema = Counting()
    _, items = read(data.encode(), schema)
    assert (schema.pages, schema.taken) == (1, 0)
    assert [item["n"] for item in items] == [1, 2, 3]
    with pytest.raises(TooComplex):
        check_depth(items[1])


def test_an_answer_longer_than_a_page_is_never_held_whole() -> None:
    data = json.dumps(PAGE).encode()
    schema = Counting()
    rest, items = read(data, schema, whole_up_to=len(data) // 3)
    assert schema.pages == 0  # read item by item from its first byte
    assert (rest, items) == read(data, None)


@pytest.mark.parametrize("body", [b'{"items": null, "metadata": {}}', b'{"items": [], "metadata": {}}', b"{}"])
def test_an_empty_page_has_no_items(body: bytes) -> None:
    schema = Counting()
    assert read(body, schema)[1] == []
    assert schema.taken == 1


@pytest.mark.parametrize("body", [b"", b"[]", b'{"items": [{"a": 1}', b'{"items": {"a": 1}}'])
def test_what_is_not_a_list_object_still_raises_value_error(body: bytes) -> None:
    with pytest.raises(ValueError, match="Kubernetes list"):
        read(body, Counting())


def test_without_msgspec_there_is_no_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(list_schema_module, "msgspec", None)
    assert list_schema(Item) is None


def test_a_watch_event_with_an_item_is_decoded_as_far_as_the_schema_reads() -> None:
    assert ITEMS is not None
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        line = json.dumps({"type": kind, "object": {"n": 1, "drop": [1], "part": {"keep": 2, "other": 3}}}).encode()
        assert ITEMS.decode_event(line) == {"type": kind, "object": {"n": 1, "part": {"keep": 2}}}


@pytest.mark.parametrize(
    "line",
    [
        b'{"type": "BOOKMARK", "object": {"n": 1, "metadata": {"annotations": {"k8s.io/initial-events-end": "true"}}}}',
        b'{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}',
        b'{"type": "ADDED", "object": {"n": 1, "part": [1]}}',  # of another type than the schema walks
        b'{"type": "ADDED", "object": null}',
        b'{"object": {"n": 1}}',
        b'{"type": "ADDED", "object": {"n": NaN}}',
        b"not json",
    ],
)
def test_any_other_watch_line_is_left_to_be_decoded_whole(line: bytes) -> None:
    assert ITEMS is not None
    assert ITEMS.decode_event(line) is None
