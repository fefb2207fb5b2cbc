"""The one JSON field reader: types in, typed values or the caller's error out, with the field's path."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidObject, InvalidSettings, ManifestError
from noe_core.util import fields


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "a boolean"),
        (3, "a number"),
        (1.5, "a number"),
        ("x", "a string"),
        ([], "an array"),
        ({}, "an object"),
    ],
)
def test_json_type_names(value: object, name: str) -> None:
    assert fields.json_type(value) == name


def test_absent_values_read_as_empty() -> None:
    assert fields.mapping(None, "spec") == {}
    assert fields.array(None, "spec.containers") == []
    assert fields.string(None, "spec.nodeName") == ""
    assert fields.integer(None, "weight") is None
    assert fields.boolean(None, "dryRun") is None
    assert fields.string_map(None, "metadata.labels") == {}


@pytest.mark.parametrize(
    ("reader", "path"),
    [(fields.mapping, "request"), (fields.array, "items"), (fields.string, "request.uid")],
)
def test_required_absent_names_the_field(reader: object, path: str) -> None:
    with pytest.raises(InvalidObject, match=rf"^{path} is missing$"):
        reader(None, path, required=True)  # type: ignore[operator]


def test_wrong_types_name_the_field_and_the_type() -> None:
    with pytest.raises(InvalidObject, match=r"^spec must be an object, not an array$"):
        fields.mapping([], "spec")
    with pytest.raises(InvalidObject, match=r"^spec.containers must be an array, not a string$"):
        fields.array("x", "spec.containers")
    with pytest.raises(InvalidObject, match=r"^image must be a string, not a number$"):
        fields.string(5, "image")
    with pytest.raises(InvalidObject, match=r"^weight must be an integer, not a boolean$"):
        fields.integer(True, "weight")
    with pytest.raises(InvalidObject, match=r"^insecure must be a boolean, not a string$"):
        fields.boolean("false", "insecure")


def test_non_empty_string() -> None:
    assert fields.string("a", "name", non_empty=True) == "a"
    with pytest.raises(InvalidObject, match="name must be a non-empty string"):
        fields.string("", "name", non_empty=True)


def test_string_map() -> None:
    assert fields.string_map({"a": "1"}, "labels") == {"a": "1"}
    with pytest.raises(InvalidObject, match=r"labels\['a'\] must be a string, not a number"):
        fields.string_map({"a": 1}, "labels")
    with pytest.raises(InvalidObject, match=r"labels\['a'\] must be a string, not null"):
        fields.string_map({"a": None}, "labels")


@pytest.mark.parametrize("error", [InvalidObject, InvalidSettings, ManifestError])
def test_error_type_is_the_callers(error: type[Exception]) -> None:
    with pytest.raises(error):
        fields.string(1, "x", error=error)  # type: ignore[arg-type]
