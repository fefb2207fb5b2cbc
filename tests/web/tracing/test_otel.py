"""``noe_web.tracing.otel``: spans through the real OpenTelemetry SDK, read back from its in-memory exporter."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import propagate
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from noe_core.errors import RegistryError
from noe_web.tracing.otel import OtelTracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture
def exported() -> Iterator[tuple[OtelTracing, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing = OtelTracing(provider, propagate.get_global_textmap())
    yield tracing, memory
    tracing.shutdown()


def by_name(memory: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in memory.get_finished_spans()}


def test_the_admission_continues_the_traceparent_and_its_children_follow_across_threads(
    exported: tuple[OtelTracing, InMemorySpanExporter],
) -> None:
    tracing, memory = exported
    environ = {"REQUEST_METHOD": "POST", "HTTP_TRACEPARENT": f"00-{TRACE_ID}-{PARENT}-01"}
    with tracing.admission(environ):
        # A lookup thread runs in a copy of the admission's context, as the lookup service submits it.
        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(_lookup, tracing), name="noe-lookup_0")
        worker.start()
        worker.join()
    spans = by_name(memory)
    admission, lookup, exchange = spans["admission"], spans["image lookup"], spans["registry GET"]
    assert admission.kind == SpanKind.SERVER and format(admission.context.trace_id, "032x") == TRACE_ID
    assert admission.parent is not None and format(admission.parent.span_id, "016x") == PARENT
    assert lookup.parent is not None and lookup.parent.span_id == admission.context.span_id
    assert exchange.parent is not None and exchange.parent.span_id == lookup.context.span_id
    assert exchange.kind == SpanKind.CLIENT and lookup.attributes["thread.name"] == "noe-lookup_0"


def _lookup(tracing: OtelTracing) -> None:
    with tracing.span("image lookup", {"noe.image": "app:1"}), tracing.span("registry GET", client=True) as span:
        span.set("http.response.status_code", 200)


def test_only_noes_own_error_messages_reach_a_span(exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    """Other exceptions may quote anything (a header, a URL with its query): their type only."""
    tracing, memory = exported
    with pytest.raises(RegistryError), tracing.span("image lookup"):
        raise RegistryError("registry r.corp: HTTP 404 for app", registry="r.corp")
    with pytest.raises(ValueError, match="hunter2"), tracing.span("registry token"):
        raise ValueError("Authorization: Basic hunter2")
    spans = by_name(memory)
    lookup, token = spans["image lookup"], spans["registry token"]
    assert lookup.status.status_code == StatusCode.ERROR and lookup.attributes["error.type"] == "RegistryError"
    assert lookup.status.description == "registry r.corp: HTTP 404 for app"
    assert token.status.status_code == StatusCode.ERROR and token.attributes["error.type"] == "ValueError"
    assert token.status.description is None and not token.events  # no exception event, no traceback


def test_a_span_marked_failed_keeps_its_kind_and_message(exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    tracing, memory = exported
    with tracing.span("kubernetes GET", client=True) as span:
        span.set("http.response.status_code", 403)
        span.fail("403")
    (got,) = memory.get_finished_spans()
    assert got.attributes["error.type"] == "403" and got.status.status_code == StatusCode.ERROR
