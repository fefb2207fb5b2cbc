"""RFC 6902 patches: escaping, round trip, and errors as InvalidObject."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidObject
from noe_core.util.json_patch import apply_patch, make_patch


def test_equal_documents_give_an_empty_patch() -> None:
    assert make_patch({"a": [1]}, {"a": [1]}) == []


def test_slash_in_keys_is_escaped() -> None:
    original: dict[str, dict[str, str]] = {"spec": {}}
    mutated = {"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}}
    patch = make_patch(original, mutated)
    assert patch == [{"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/arch": "arm64"}}]
    deeper = make_patch(mutated, {"spec": {"nodeSelector": {"kubernetes.io/arch": "amd64"}}})
    assert deeper == [{"op": "replace", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "amd64"}]


def test_round_trip_and_input_untouched() -> None:
    original = {"spec": {"tolerations": [{"key": "a"}], "x~y": 1}}
    mutated = {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}], "x~y": 2}}
    patch = make_patch(original, mutated)
    assert apply_patch(original, patch) == mutated
    assert original == {"spec": {"tolerations": [{"key": "a"}], "x~y": 1}}


def test_patch_that_does_not_apply() -> None:
    with pytest.raises(InvalidObject, match="patch does not apply"):
        apply_patch({}, [{"op": "remove", "path": "/missing"}])


def test_applying_a_patch_changes_neither_the_document_nor_the_patch() -> None:
    document = {"spec": {}}
    patch = [
        {"op": "add", "path": "/spec/tolerations", "value": [{"key": "a"}]},
        {"op": "add", "path": "/spec/tolerations/1", "value": {"key": "b"}},
    ]
    first = apply_patch(document, patch)
    assert patch[0]["value"] == [{"key": "a"}]
    assert apply_patch(document, patch) == first == {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}
    assert document == {"spec": {}}
