"""Admissions traced with the OpenTelemetry SDK: one provider per worker, batched export, flushed at exit.

Imported only when tracing is on (:func:`noe_web.tracing.config.open_tracing`).
Each gunicorn worker builds its own :class:`OtelTracing` after the fork: a
``TracerProvider`` (sampler, resource and limits from ``OTEL_*``, ``service.name``
``noe-webhook`` unless ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` name
one) and a ``BatchSpanProcessor`` per exporter, whose thread sends spans off the
request path. The provider is not made global: nothing else in the process
traces through it by accident.

The spans (docs in README.md, "Tracing"):

* ``admission`` (SERVER) — one ``POST /mutate``, child of the request's W3C
  ``traceparent`` (the API server sends one); the admission's uid, kind,
  namespace, operation, decision and registry counts;
* ``image lookup`` — one per image the registry client resolves, on a lookup
  thread, yet a child of its admission (lookups run in a copy of its context);
* ``registry token`` — one token request to a registry's token server;
* ``registry GET`` / ``HEAD`` / ``POST`` (CLIENT) — one HTTP exchange each, token
  servers' included: method, host, port, URL without query, status, bytes;
* ``kubernetes GET`` / ``POST`` (CLIENT) — one Kubernetes API call each (pull
  Secrets, Events: an Event written later still belongs to its admission).

An exception leaving a span marks it failed with its type, and the message of
noe's own errors (written never to hold a credential); exceptions' tracebacks are
not recorded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter, TextMapPropagator
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from noe_core.admission.admitting import Admission
from noe_core.errors import NoeError
from noe_core.registry.tracer import Attributes, AttributeValue
from noe_core.util.installed_version import installed_version
from noe_web.kube.errors import KubeError
from noe_web.tracing.hooks import Counts

log = logging.getLogger("noe.tracing")

EXPORTER_GROUP = "opentelemetry_traces_exporter"
SERVICE = "noe-webhook"
FLUSH_TIMEOUT = 5.0
"""How long a stopping worker waits for its last spans to be exported (gunicorn's graceful stop waits longer)."""
_TRUSTED_MESSAGES = (NoeError, KubeError)
"""Errors whose messages are written to name hosts, paths and statuses, never a secret."""


def exporter_classes(names: Sequence[str]) -> list[type[SpanExporter]]:
    """The span exporter classes named (entry points of the SDK and the exporters installed).

    Raises :class:`LookupError` naming what to install.
    """
    classes: list[type[SpanExporter]] = []
    for name in names:
        found = list(entry_points(group=EXPORTER_GROUP, name=name))
        if not found:
            package = "opentelemetry-exporter-otlp-proto-grpc" if name == "otlp_proto_grpc" else "its package"
            raise LookupError(f"span exporter {name!r} is not installed ({package})")
        try:
            loaded = found[0].load()
        except ImportError as exc:
            raise LookupError(f"span exporter {name!r} does not load ({exc})") from None
        classes.append(loaded)
    return classes


class _EnvironGetter(Getter[Mapping[str, Any]]):
    """W3C headers (``traceparent``, ``tracestate``, ``baggage``…) from a WSGI environ."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        value = carrier.get("HTTP_" + key.upper().replace("-", "_"))
        return [value] if isinstance(value, str) else None

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return [k[5:].lower().replace("_", "-") for k in carrier if k.startswith("HTTP_")]


_ENVIRON = _EnvironGetter()


class _Span:
    """A :class:`noe_core.registry.tracer.Span` over an OpenTelemetry span."""

    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def fail(self, kind: str, message: str = "") -> None:
        self._span.set_attribute("error.type", kind)
        self._span.set_status(Status(StatusCode.ERROR, message or None))


class OtelTracing:
    """Spans of one worker's admissions, exported by its own provider; thread-safe."""

    def __init__(self, provider: TracerProvider, propagator: TextMapPropagator) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("noe_web", installed_version())
        self._propagator = propagator

    @classmethod
    def start(cls, exporters: Sequence[str]) -> OtelTracing:
        """A provider exporting through ``exporters`` (configured from ``OTEL_*``); starts the export threads."""
        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
        if SERVICE_VERSION not in resource.attributes:
            resource = resource.merge(Resource({SERVICE_VERSION: installed_version()}))
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        for exporter in exporter_classes(exporters):
            provider.add_span_processor(BatchSpanProcessor(exporter()))
        return cls(provider, propagate.get_global_textmap())

    # -- noe_core.registry.tracer.Tracer ----------------------------------------------------------
    @contextmanager
    def span(self, name: str, attributes: Attributes | None = None, *, client: bool = False) -> Iterator[_Span]:
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        with self._started(name, kind, attributes or {}, None) as span:
            yield span

    # -- the webhook's ---------------------------------------------------------------------
    @contextmanager
    def admission(self, environ: Mapping[str, Any]) -> Iterator[_Span]:
        parent = self._propagator.extract(environ, getter=_ENVIRON)
        attributes = {"http.request.method": str(environ.get("REQUEST_METHOD", "")), "url.path": "/mutate"}
        with self._started("admission", SpanKind.SERVER, attributes, parent) as span:
            yield span

    def admitted(self, admission: Admission, counts: Counts) -> None:
        span = trace.get_current_span()
        if not span.is_recording():
            return
        request = admission.request
        span.set_attributes(
            {
                "noe.admission.uid": request.uid,
                "noe.admission.kind": request.kind,
                "noe.admission.operation": request.operation,
                "k8s.namespace.name": request.namespace,
                "noe.admission.dry_run": request.dry_run,
                "noe.admission.decision": admission.label,
                "noe.admission.images": len(admission.images),
                "noe.cache.hits": counts.cache_hits,
                "noe.cache.misses": counts.cache_misses,
                "noe.lookups.coalesced": counts.coalesced,
                "noe.registry.requests": counts.registry_requests,
            }
        )

    def shutdown(self) -> None:
        """Export what is buffered, waiting at most :data:`FLUSH_TIMEOUT` (a collector that is away must not hold
        the worker past gunicorn's graceful stop)."""
        flush = threading.Thread(target=self._provider.shutdown, name="noe-trace-flush", daemon=True)
        flush.start()
        flush.join(FLUSH_TIMEOUT)
        if flush.is_alive():
            log.warning("spans not exported within %gs of the worker's exit are lost", FLUSH_TIMEOUT)

    # -- internals ---------------------------------------------------------------------------
    @contextmanager
    def _started(self, name: str, kind: SpanKind, attributes: Attributes, parent: Any) -> Iterator[_Span]:
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes={**attributes, "thread.name": threading.current_thread().name},
            record_exception=False,
            set_status_on_exception=False,
        ) as otel_span:
            span = _Span(otel_span)
            try:
                yield span
            except BaseException as exc:
                span.fail(type(exc).__name__, str(exc) if isinstance(exc, _TRUSTED_MESSAGES) else "")
                raise
