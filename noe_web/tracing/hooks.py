"""What the webhook asks of tracing, and :data:`NO_TRACING`, its stand-in when tracing is off.

The admission's own span wraps each ``POST /mutate`` (:meth:`WebhookTracing.admission`,
continuing the caller's W3C ``traceparent``); the admission fills in what it decided
(:meth:`WebhookTracing.admitted`); the worker flushes what is not exported yet when
it stops (:meth:`WebhookTracing.shutdown`). Every other span is the
:class:`~noe_core.registry.tracer.Tracer`'s. Off, each of these is one method call that
returns at once: no OpenTelemetry module is imported and no thread is started.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from noe_core.admission.admitting import Admission
from noe_core.registry.tracer import NULL_SPAN, NullSpan, NullTracer, Span, Tracer


class Counts(Protocol):
    """An admission's registry counts (``noe_web.webhook.admission.AdmissionStats``)."""

    cache_hits: int
    cache_misses: int
    coalesced: int
    registry_requests: int


class WebhookTracing(Tracer, Protocol):
    def admission(self, environ: Mapping[str, Any]) -> AbstractContextManager[Span]:
        """The span of one ``POST /mutate``, current for the ``with`` block, child of the request's ``traceparent``."""

    def admitted(self, admission: Admission, counts: Counts) -> None:
        """Describe the current admission span: uid, kind, namespace, operation, decision, counts."""

    def shutdown(self) -> None:
        """Export what is still buffered (within a bound) and stop: the worker is exiting."""


class NoTracing(NullTracer):
    """Tracing off: nothing is recorded, imported or started."""

    def admission(self, environ: Mapping[str, Any]) -> NullSpan:
        return NULL_SPAN

    def admitted(self, admission: Admission, counts: Counts) -> None:
        pass

    def shutdown(self) -> None:
        pass


NO_TRACING = NoTracing()
