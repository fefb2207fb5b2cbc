"""RFC 6902 JSON patches: recorded as noe edits, applied, and diffed (the tests' oracle).

The policy knows each edit it makes, so it records them as operations
(:class:`Edits`) instead of copying the object and diffing afterwards: the
request path never deep-copies or compares a whole pod. :func:`make_patch`
(jsonpatch's diff) stays as the oracle the property tests check the recorded
operations against. Keys containing ``/`` (``kubernetes.io/arch``) are escaped
as ``~1``, as RFC 6901 requires.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, cast

import jsonpatch

from noe_core.errors import InvalidObject

Operation: TypeAlias = dict[str, Any]
Path: TypeAlias = Sequence[str | int]


def pointer(base: str, path: Path) -> str:
    """The JSON pointer of ``path`` below ``base`` (RFC 6901 escaping of ``~`` and ``/``)."""
    return base + "".join(map(_step, path))


@functools.lru_cache(maxsize=1024)
def _step(part: str | int) -> str:
    """One escaped step (``kubernetes.io/arch`` → ``/kubernetes.io~1arch``); the same few recur in every patch."""
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


class Edits:
    """A small JSON document that records every change made to it as RFC 6902 operations.

    ``doc`` is the caller's own working value of the part of the object being
    edited (for a pod: its placement fields, not the whole spec); ``base`` is
    where that part sits in the object the operations apply to. ``present``
    says whether the part exists there: when it does not, the first edit adds
    it whole. Operations are relative to the state the earlier ones left, as
    RFC 6902 applies them in order.

    Nothing is copied up front, and nothing but ``doc`` itself is changed in
    place: ``doc``'s members may be the object as sent, and an operation holds
    the value it added as it is. An edit copies (shallowly) each container on its
    path that this document has not made itself (path copying), so neither the
    object as sent nor a recorded operation ever changes.
    """

    def __init__(self, doc: dict[str, Any], base: str = "", *, present: bool | None = True) -> None:
        self.doc = doc
        self.base = base
        self.present = present
        """``True``: exists; ``False``: absent (add it); ``None``: JSON null (replace it)."""
        self.ops: list[Operation] = []
        self._owned: dict[int, Any] = {id(doc): doc}
        """The containers this document made (by id, kept alive so no id is reused): the only ones it changes."""

    def get(self, path: Path) -> Any:
        """The value at ``path``, or ``None`` when any step of it is missing or of another type (read only)."""
        node: Any = self.doc
        for part in path:
            if node is None:
                return None
            if type(node) is dict or isinstance(node, Mapping):  # the exact type first: the ABC check is slow
                if not isinstance(part, str):
                    return None
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return None
        return node

    def _writable(self, parent: Any, key: str | int, child: Any) -> Any:
        """``parent[key]``, replaced by a shallow copy of its own unless this document made it."""
        if id(child) in self._owned:
            return child
        copy: Any = dict(child) if isinstance(child, Mapping) else list(child)
        parent[key] = copy
        self._owned[id(copy)] = copy
        return copy

    def set(self, path: Path, value: Any) -> None:
        """Set the member at ``path``, creating the objects above it in one operation.

        Integer steps index array elements that exist (a node-selector term);
        string steps name object members, created when missing or null.
        """
        self._materialise_root()
        node: Any = self.doc
        for depth, part in enumerate(path[:-1]):
            if isinstance(part, int):
                node = self._writable(node, part, node[part])
                continue
            child = node.get(part)
            if isinstance(path[depth + 1], int) or isinstance(child, dict):
                node = self._writable(node, part, child)
                continue
            nested: Any = value
            for key in reversed(path[depth + 1 :]):
                nested = {key: nested}
            self._emit("replace" if part in node else "add", path[: depth + 1], nested)
            node[part] = nested
            return
        key = path[-1]
        self._emit("replace" if key in node else "add", path, value)
        node[key] = value

    def append(self, path: Path, value: Any) -> None:
        """Append ``value`` to the array at ``path``, creating the array (and what holds it) when missing."""
        if not isinstance(self.get(path), list):
            self.set(path, [value])
            return
        node: Any = self.doc
        for part in path:
            node = self._writable(node, part, node[part])
        self._emit("add", [*path, len(node)], value)
        node.append(value)

    def _materialise_root(self) -> None:
        """An absent (or null) part becomes an empty object first; the edits then fill it."""
        if self.present:
            return
        self.ops.append({"op": "add" if self.present is False else "replace", "path": self.base, "value": {}})
        self.present = True

    def _emit(self, op: str, path: Path, value: Any) -> None:
        self.ops.append({"op": op, "path": pointer(self.base, path), "value": value})

    def operations(self) -> list[Operation]:
        """The recorded operations, in order."""
        return list(self.ops)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_json(value: Any) -> Any:
    """A copy of a small decoded-JSON value, cheaper than ``copy.deepcopy``.

    Operations record copies, so later edits of the working values do not change them.
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    if kind in _SCALARS:  # decoded JSON is nearly all dicts, lists and these: no ABC check for them
        return value
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: copy_json(item) for key, item in value.items()}
    return value


def make_patch(original: Mapping[str, Any], mutated: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The operations that turn ``original`` into ``mutated`` (empty when they are equal)."""
    if original == mutated:
        return []
    return cast(list[dict[str, Any]], list(jsonpatch.make_patch(original, mutated).patch))


def apply_patch(document: Mapping[str, Any], patch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Apply ``patch`` to a copy of ``document``; neither is changed.

    jsonpatch inserts an operation's value into the document as it is, so a
    later operation adding into that value would change the patch itself; it is
    applied to a copy of the operations.
    """
    try:
        result = jsonpatch.apply_patch(document, [copy_json(dict(op)) for op in patch], in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise InvalidObject(f"patch does not apply: {exc}") from exc
    return cast(dict[str, Any], result)
