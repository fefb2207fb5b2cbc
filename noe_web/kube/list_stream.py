"""A Kubernetes list answer read item by item as its bytes arrive, never whole.

A list of 150,000 pods is about 700 MiB of JSON, and an API server that serves
a list from its watch cache may ignore ``limit`` and send it in one answer.
Reading it with ``json.loads`` would hold the text and every decoded pod at
once, and the pods of a page live long enough to be promoted to the garbage
collector's oldest generation, which then scans the informer's whole cache
again and again. Here each item is decoded alone, handed to the caller and
dropped, so what is held is one item and one network chunk.

The list's other fields (``metadata``: ``resourceVersion``, ``continue``) are
returned whole, wherever they come in the object. One hostile item nested too
deep for ``json`` is cut as :func:`noe_core.safe_load.load_json_cut` cuts it,
so the items around it are still read. Text that is not a JSON object with an
``items`` array raises ``ValueError``.

With a :class:`~noe_web.kube.list_schema.ListSchema`, an answer up to
:data:`WHOLE_PAGE` bytes (a page) is decoded whole by it instead, only as far as
the fields the caller keeps; a longer answer, or one the schema cannot take, is
read item by item as above.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from noe_core.util.safe_load import load_json_cut

if TYPE_CHECKING:
    from noe_web.kube.list_schema import ListSchema

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_KEEP = 1 << 16
"""Consumed text is dropped from the buffer once it is longer than this."""
WHOLE_PAGE = 32 << 20
"""The longest answer a schema decodes whole: a page of 500 large pods is a few MiB; a whole cluster's
list (a watch cache that ignores ``limit``) is read item by item, never held."""


class _Text:
    """The answer's text, decoded from UTF-8 chunk by chunk, with a read position."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.ended = False

    def more(self) -> bool:
        """Read the next chunk; ``False`` at the end of the answer."""
        if self.ended:
            return False
        if self.pos > _KEEP:
            self.buf, self.pos = self.buf[self.pos :], 0
        for chunk in self._chunks:
            if chunk:
                self.buf += self._utf8.decode(chunk)
                return True
        self.buf += self._utf8.decode(b"", final=True)
        self.ended = True
        return False

    def skip_space(self) -> None:
        while True:
            match = _SPACE.match(self.buf, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buf) or not self.more():
                return

    def expect(self, chars: str) -> str:
        self.skip_space()
        if self.pos >= len(self.buf) or self.buf[self.pos] not in chars:
            found = self.buf[self.pos : self.pos + 20] if self.pos < len(self.buf) else "the end"
            raise ValueError(f"a Kubernetes list: expected one of {chars!r}, found {found!r}")
        char = self.buf[self.pos]
        self.pos += 1
        return char

    def value(self) -> Any:
        """The next JSON value whole (more chunks read until it is complete)."""
        self.skip_space()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self.more():
                    continue
                raise ValueError("a Kubernetes list: the answer ends inside a value") from None
            except RecursionError:
                return self._hostile()
            if end == len(self.buf) and self.more():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value

    def _hostile(self) -> Any:
        """A value nested deeper than ``json`` reads: found by its brackets, then cut and read."""
        while True:
            depth = 0
            for token in _TOKENS.finditer(self.buf, self.pos):
                char = token.group()[0]
                if char in "[{":
                    depth += 1
                elif char in "]}":
                    depth -= 1
                    if depth == 0:
                        try:
                            value = load_json_cut(self.buf[self.pos : token.end()])
                        except ValueError:
                            break  # a string cut by the chunk's end looked like a bracket: read on
                        self.pos = token.end()
                        return value
            if not self.more():
                raise ValueError("a Kubernetes list: the answer ends inside a value")


def read_list(
    chunks: Iterable[bytes],
    on_item: Callable[[Any], None],
    *,
    schema: ListSchema | None = None,
    whole_up_to: int = WHOLE_PAGE,
) -> dict[str, Any]:
    """Call ``on_item`` with each element of the answer's ``items``, in order; the other fields, whole.

    With ``schema``, an answer of at most ``whole_up_to`` bytes is decoded by it (items as far as it
    reads them; of the other fields, ``metadata``, ``kind`` and ``apiVersion``).
    """
    if schema is not None:
        read, chunks = _by_schema(chunks, on_item, schema, whole_up_to)
        if read is not None:
            return read
    text = _Text(chunks)
    rest: dict[str, Any] = {}
    text.expect("{")
    text.skip_space()
    if text.buf[text.pos : text.pos + 1] == "}":
        text.pos += 1
        return rest
    while True:
        key = text.value()
        if not isinstance(key, str):
            raise ValueError("a Kubernetes list: a key is not a string")
        text.expect(":")
        if key == "items":
            _items(text, on_item)
        else:
            rest[key] = text.value()
        if text.expect(",}") == "}":
            return rest


def _by_schema(
    chunks: Iterable[bytes], on_item: Callable[[Any], None], schema: ListSchema, whole_up_to: int
) -> tuple[dict[str, Any] | None, Iterable[bytes]]:
    """The answer decoded whole by ``schema`` (its other fields; the items handed on), or ``None`` and the
    chunks to read item by item: those of an answer longer than ``whole_up_to``, or one the schema cannot take."""
    stream = iter(chunks)
    held: list[bytes] = []
    size = 0
    for chunk in stream:
        held.append(chunk)
        size += len(chunk)
        if size > whole_up_to:
            return None, itertools.chain(held, stream)  # too long to hold: item by item, from its start
    data = b"".join(held)
    del held
    decoded = schema.decode(data)
    if decoded is None:
        return None, (data[i : i + _KEEP] for i in range(0, len(data), _KEEP))
    rest, items = decoded
    for item in items:
        on_item(item)
    return rest, ()


def _items(text: _Text, on_item: Callable[[Any], None]) -> None:
    text.skip_space()
    if text.buf[text.pos : text.pos + 1] == "n":
        text.value()  # null: no item
        return
    text.expect("[")
    text.skip_space()
    if text.buf[text.pos : text.pos + 1] == "]":
        text.pos += 1
        return
    while True:
        on_item(text.value())
        if text.expect(",]") == "]":
            return
