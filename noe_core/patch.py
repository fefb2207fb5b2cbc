"""RFC 6902 JSON patches between the object the API server sent and the one noe wants.

The webhook answers with a patch rather than an object; computing it from the
two documents (instead of recording edits) keeps the policy free to build the
result however is clearest. Keys containing ``/`` (``kubernetes.io/arch``) are
escaped as ``~1`` by jsonpatch, as RFC 6901 requires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import jsonpatch

from noe_core.errors import InvalidObject


def make_patch(original: Mapping[str, Any], mutated: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The operations that turn ``original`` into ``mutated`` (empty when they are equal)."""
    if original == mutated:
        return []
    return cast(list[dict[str, Any]], list(jsonpatch.make_patch(original, mutated).patch))


def apply_patch(document: Mapping[str, Any], patch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Apply ``patch`` to a copy of ``document`` (tests and ``noe mutate`` check patches with it)."""
    try:
        result = jsonpatch.apply_patch(document, list(patch), in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise InvalidObject(f"patch does not apply: {exc}") from exc
    return cast(dict[str, Any], result)
