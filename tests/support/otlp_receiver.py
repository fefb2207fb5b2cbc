"""A small OTLP/HTTP trace receiver, standing in for an OpenTelemetry Collector.

    with start_otlp_receiver() as otlp:
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.endpoint}
        ...
        spans = otlp.wait_for(lambda spans: any(s.name == "admission" for s in spans))

``POST /v1/traces`` with an ``application/x-protobuf`` body (gzip or not) is
decoded with the protocol's own classes (``opentelemetry-proto``'s
``ExportTraceServiceRequest``) into :class:`ReceivedSpan` values and answered
with an empty ``ExportTraceServiceResponse``, as a collector does; anything
else is a 400 or 404 and counted in :attr:`OtlpReceiver.refused`. Every span
keeps its resource attributes, so a test can tell the workers apart. Listens on
127.0.0.1 only.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

KINDS = {
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, as a test reads it (ids as lower-case hex, as in a ``traceparent``)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, Any]
    error: bool
    status_message: str
    start_ns: int
    end_ns: int
    resource: dict[str, Any] = field(default_factory=dict)
    event_texts: tuple[str, ...] = ()
    """Every event's name and attribute values: where a leaked secret could also hide."""

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    def texts(self) -> list[str]:
        """Every string this span carries: name, attribute values, status message, events, resource."""
        values = [self.name, self.status_message, *self.event_texts]
        values += [str(v) for v in self.attributes.values()] + [str(v) for v in self.resource.values()]
        return values


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                events = tuple(
                    text
                    for event in span.events
                    for text in (event.name, *(str(v) for v in _attributes(event.attributes).values()))
                )
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=KINDS.get(span.kind, "unspecified"),
                        attributes=_attributes(span.attributes),
                        error=span.status.code == Status.STATUS_CODE_ERROR,
                        status_message=span.status.message,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        resource=resource,
                        event_texts=events,
                    )
                )
    return spans


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _reply(self, status: int, body: bytes, content_type: str = "application/x-protobuf") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        receiver = self.server.receiver
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/traces":
            receiver.note_refused()
            self._reply(404, b"not found", "text/plain")
            return
        try:
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-protobuf":
                raise ValueError("not application/x-protobuf")
            spans = decode(body)
        except Exception as exc:  # a malformed export is the exporter's bug: say so, keep serving
            receiver.note_refused()
            self._reply(400, str(exc).encode(), "text/plain")
            return
        receiver.add(spans, dict(self.headers.items()))
        self._reply(200, ExportTraceServiceResponse().SerializeToString())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: OtlpReceiver


class OtlpReceiver:
    """What the receiver got: spans, the headers of each export, refused requests."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._cond = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self.exports: list[dict[str, str]] = []
        self.refused = 0

    @property
    def endpoint(self) -> str:
        """For ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full URL, ``/v1/traces`` included)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    @property
    def base_endpoint(self) -> str:
        """For ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, spans: list[ReceivedSpan], headers: dict[str, str]) -> None:
        with self._cond:
            self._spans.extend(spans)
            self.exports.append(headers)
            self._cond.notify_all()

    def note_refused(self) -> None:
        with self._cond:
            self.refused += 1

    def spans(self) -> list[ReceivedSpan]:
        with self._cond:
            return list(self._spans)

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 15.0) -> list[ReceivedSpan]:
        """The spans received once ``done(spans)`` holds; raises AssertionError (with what came) after ``timeout``."""
        end = time.monotonic() + timeout
        with self._cond:
            while not done(list(self._spans)):
                left = end - time.monotonic()
                if left <= 0:
                    names = sorted({s.name for s in self._spans})
                    raise AssertionError(f"spans not received within {timeout}s; got {len(self._spans)}: {names}")
                self._cond.wait(min(left, 0.2))
            return list(self._spans)


@contextmanager
def start_otlp_receiver() -> Iterator[OtlpReceiver]:
    server = _Server(("127.0.0.1", 0), _Handler)
    receiver = OtlpReceiver(server)
    server.receiver = receiver
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
