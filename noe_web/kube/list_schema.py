"""A list page or watch event decoded straight into the fields a cache keeps (msgspec), the rest skipped unbuilt.

Why: the controller keeps about a tenth of each pod it lists. Decoding a page
of 500 pods with ``json`` builds every dict, list and string of every pod only
for the pod view to copy the few it keeps and drop the rest; that decoding is
the largest single cost of the controller's first reconcile. msgspec, given the
shape of the kept fields as ``TypedDict`` s, builds only those and skips the
others in C: a page of realistic pods decodes in about a third of ``json``'s
time (bench/bench_controller.py). A streaming list (the initial events of a
watch) and the watch after it carry the same objects one line each: an event
with an item is decoded the same way; a bookmark or an error is decoded whole.

The schema only selects: every value it keeps is typed ``Any`` below the
objects and arrays it walks through, so the view that reads the result makes
exactly the checks it makes of a fully decoded item, and gives the same answer
(tests/web/kube/test_list_schema.py). A page the schema cannot take — a field
of another type than the schema walks (an object where an array was expected),
JSON that ``msgspec`` refuses but ``json`` reads (NaN, integers beyond 64
bits), an item nested too deep — is read again by the item-by-item reader of
:mod:`noe_web.kube.list_stream`, so what is listed never depends on which
decoder read it.

msgspec is compiled, and only the ``web`` extra installs it: without it
:func:`list_schema` gives ``None`` and every list is read item by item.
"""

from __future__ import annotations

from typing import Any, TypedDict

try:
    import msgspec
except ModuleNotFoundError as exc:  # not the web extra: lists are read item by item
    if exc.name != "msgspec":
        raise
    msgspec = None  # type: ignore[assignment]


ITEM_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})
"""The watch events whose object is one of the list's items."""


class ListSchema:
    """Decodes a whole list answer into its other fields and its items, and a watch event into its type and
    item, each item only as far as its schema."""

    def __init__(self, item: type[Any]) -> None:
        assert msgspec is not None
        # the functional form: the item's type is only known here
        list_answer = TypedDict(  # noqa: UP013
            "list_answer",
            {"apiVersion": Any, "kind": Any, "metadata": Any, "items": list[item] | None},  # type: ignore[valid-type]
            total=False,
        )
        self._decoder = msgspec.json.Decoder(list_answer)
        watch_event = TypedDict(  # noqa: UP013
            "watch_event",
            {"type": Any, "object": item | None},  # type: ignore[valid-type]
            total=False,
        )
        self._events = msgspec.json.Decoder(watch_event)

    def decode(self, data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """(the list's other fields, its items); ``None`` when this page must be read item by item instead."""
        try:
            answer: dict[str, Any] = dict(self._decoder.decode(data))
        except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError are ValueErrors
            return None
        items = answer.pop("items", None)
        return answer, items or []

    def decode_event(self, line: bytes) -> dict[str, Any] | None:
        """A watch event whose object is an item (``ADDED``, ``MODIFIED``, ``DELETED``), decoded as far as the
        schema reads; ``None`` for any other (a ``BOOKMARK``'s annotations, an ``ERROR``'s Status are
        not an item's fields) or one it cannot take: the caller decodes those whole."""
        try:
            event: dict[str, Any] = dict(self._events.decode(line))
        except (ValueError, RecursionError):
            return None
        return event if event.get("type") in ITEM_EVENTS and isinstance(event.get("object"), dict) else None


def list_schema(item: type[Any]) -> ListSchema | None:
    """A :class:`ListSchema` of ``item`` (a ``TypedDict``), or ``None`` without msgspec."""
    return None if msgspec is None else ListSchema(item)
