"""Where the registry client says what it is doing, for tracing, without a tracing library.

``noe_core`` opens a span through a :class:`Tracer` around each image lookup,
token request and registry HTTP exchange; the web layer implements it with
OpenTelemetry (``noe_web.tracing``), and everything else gets
:data:`NULL_TRACER`, which does nothing and costs a method call. Like the
:class:`~noe_core.registry.observer.RegistryObserver`, a tracer must be thread-safe and
must never raise; a span is entered and left on one thread.

A span's parent is whatever span is current in the calling context
(``contextvars``): lookups run in a copy of their admission's context, so their
spans are its children whatever thread runs them.

Attribute values come from fixed words, hosts, paths without their query,
repository names, image references, counts and status codes only: never a
credential, a token, an ``Authorization`` header or a Secret's content.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol
from urllib.parse import SplitResult

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue]


class Span(Protocol):
    """The span a ``with`` block is in: facts learnt on the way, and whether it failed."""

    def set(self, key: str, value: AttributeValue) -> None:
        """One attribute (OpenTelemetry's semantic conventions where one exists)."""

    def fail(self, kind: str, message: str = "") -> None:
        """Mark the span failed: ``kind`` is a short word or status code, ``message`` says why."""


class Tracer(Protocol):
    def span(
        self, name: str, attributes: Attributes | None = None, *, client: bool = False
    ) -> AbstractContextManager[Span]:
        """A child of the current span for the ``with`` block; ``client`` marks one outgoing request.

        An exception leaving the block marks the span failed with its type (and the
        message of a :class:`~noe_core.errors.NoeError`, written to hold no secret).
        """


class NullSpan:
    """Records nothing; its own context manager, so a disabled span allocates nothing."""

    def set(self, key: str, value: AttributeValue) -> None:
        pass

    def fail(self, kind: str, message: str = "") -> None:
        pass

    def __enter__(self) -> NullSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


NULL_SPAN = NullSpan()


class NullTracer:
    """Tracing off: every span is :data:`NULL_SPAN`."""

    def span(self, name: str, attributes: Attributes | None = None, *, client: bool = False) -> NullSpan:
        return NULL_SPAN


NULL_TRACER = NullTracer()


def request_attributes(method: str, url: SplitResult) -> dict[str, AttributeValue]:
    """An outgoing HTTP request's attributes (OpenTelemetry's HTTP client conventions).

    ``url.full`` is scheme, host, port and path only: never the query (blob storage
    signs its redirects there) nor user information.
    """
    host = url.hostname or ""
    try:
        explicit = url.port
    except ValueError:  # a hostile redirect's port: the request itself fails and says so
        explicit = None
    authority = f"[{host}]" if ":" in host else host
    if explicit is not None:
        authority += f":{explicit}"
    return {
        "http.request.method": method,
        "server.address": host,
        "server.port": explicit or (443 if url.scheme == "https" else 80),
        "url.full": f"{url.scheme}://{authority}{url.path}",
    }
