"""JSON and YAML from outside, parsed with bounded nesting and bounded alias expansion.

AdmissionReviews, pull Secrets, docker configs, platforms files,
kubeconfigs, credential-provider answers and registry bodies are written by
someone else. ``json.loads`` raises ``RecursionError`` (not ``ValueError``)
on a document nested tens of thousands deep, a structure a few hundred deep
still breaks later recursive code (``copy.deepcopy``, printing), and a YAML
"billion laughs" document (aliases of aliases) expands to billions of nodes.
These loaders refuse all three with :class:`TooComplex`, which is both a
``ValueError`` and a ``yaml.YAMLError``, so a caller's existing "not valid
JSON/YAML" handling covers it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

MAX_DEPTH = 100
"""Deepest nesting of objects and arrays accepted. Kubernetes objects and configs stay far below it (a Pod
is about 15 levels deep); much deeper input would exhaust Python's recursion limit when copied or serialised."""
MAX_YAML_NODES = 100_000
"""Most nodes a YAML document may have once its aliases are expanded."""


class TooComplex(yaml.YAMLError, ValueError):
    """A document nested too deep, or whose aliases expand too far."""


def load_json(data: str | bytes) -> Any:
    """``json.loads`` that refuses documents nested deeper than :data:`MAX_DEPTH`."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise TooComplex(f"nested deeper than {MAX_DEPTH} levels") from None
    check_depth(doc)
    return doc


def load_json_cut(data: str | bytes) -> Any:
    """JSON that may hold one hostile object among good ones (a Kubernetes list or watch event).

    ``json.loads`` when it can; a document too deep for it has every array or
    object that opens deeper than :data:`MAX_DEPTH` replaced by arrays nested
    :data:`MAX_DEPTH` + 1 deep first, so the rest is read and the hostile part
    still nests deeper than the limit below any object that holds it: whoever
    reads that object refuses it with :func:`check_depth`, the others go on.
    Raises ``ValueError`` for text that is not JSON.
    """
    try:
        return json.loads(data)
    except RecursionError:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(_cut_deeper_than(text, MAX_DEPTH))


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _cut_deeper_than(text: str, limit: int) -> str:
    """``text`` with each array or object that opens below ``limit`` levels replaced by ``limit + 1`` nested
    arrays (still too deep for every object above it, no longer too deep for ``json.loads``)."""
    nested = "[" * (limit + 1) + "]" * (limit + 1)
    parts: list[str] = []
    depth, kept_to, cut_from = 0, 0, -1
    for token in _JSON_TOKENS.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            if depth == limit + 1 and cut_from < 0:
                cut_from = token.start()
        elif char in "]}":
            if depth == limit + 1 and cut_from >= 0:
                parts.append(text[kept_to:cut_from])
                parts.append(nested)
                kept_to, cut_from = token.end(), -1
            depth -= 1
    parts.append(text[kept_to:])
    return "".join(parts)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def check_depth(doc: object, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooComplex` when objects/arrays in ``doc`` nest deeper than ``limit``.

    The one depth check: loaders run it on what they parsed, and the admission
    path on the object it was handed (as :class:`~noe_core.errors.InvalidObject`).
    Written for speed: it visits every value of every admitted object once. It
    recurses, but never deeper than ``limit`` + 1 frames: it stops there.
    """
    if not _within(doc, 1, limit):
        raise TooComplex(f"nested deeper than {limit} levels")


def _within(value: object, depth: int, limit: int) -> bool:
    kind = type(value)
    if kind is dict:
        children: Iterable[object] = value.values()  # type: ignore[attr-defined]
    elif kind is list:
        children = value  # type: ignore[assignment]
    elif kind in _SCALARS:
        return True
    elif isinstance(value, Mapping):
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return True
    if depth > limit:
        return False
    deeper = depth + 1
    for child in children:  # noqa: SIM110 - a loop, not all(): a generator frame per container costs more
        if type(child) not in _SCALARS and not _within(child, deeper, limit):
            return False
    return True


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts nesting while composing and expanded size before constructing."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise TooComplex(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_size(root: yaml.Node) -> int:
    """Nodes once every alias is expanded, memoised per node (aliases share node objects)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in sizes:
            continue
        if not ready and id(node) in open_nodes:
            raise TooComplex("a YAML alias refers to a node that contains it")
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if ready or not children:
            size = 1 + sum(sizes.get(id(child), 0) for child in children)
            if size > MAX_YAML_NODES:
                raise TooComplex(f"YAML aliases expand to more than {MAX_YAML_NODES} nodes")
            sizes[id(node)] = size
            open_nodes.discard(id(node))
            continue
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def load_yaml_all(text: str | bytes) -> list[Any]:
    """Every document of a YAML stream (``yaml.safe_load_all``), each bounded in depth and expansion."""
    loader = _BoundedLoader(text)
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _expanded_size(node)
            doc = loader.construct_document(node)
            check_depth(doc)  # aliases of aliases nest deeper than the text does
            docs.append(doc)
        return docs
    except RecursionError:
        raise TooComplex(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def load_yaml(text: str | bytes) -> Any:
    """One YAML document (``yaml.safe_load``): None for an empty stream, bounded like :func:`load_yaml_all`."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        doc = loader.construct_document(node)
        check_depth(doc)
        return doc
    except RecursionError:
        raise TooComplex(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
