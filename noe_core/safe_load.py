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
from collections.abc import Iterable
from typing import Any

import yaml

MAX_DEPTH = 100
"""Deepest nesting accepted; Kubernetes objects and configs stay far below it."""
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


def check_depth(doc: Any, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooComplex` when lists/dicts in ``doc`` nest deeper than ``limit`` (iterative)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            raise TooComplex(f"nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


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
