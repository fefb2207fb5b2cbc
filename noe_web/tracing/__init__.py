"""OpenTelemetry tracing of admissions, optional (``pip install 'noe-webhook[tracing]'``).

The registry client and the Kubernetes client open their spans through
:class:`noe_core.registry.tracer.Tracer`, so ``noe_core`` never imports OpenTelemetry.

* :mod:`.config` — the standard ``OTEL_*`` variables → ``TracingConfig``, read once in the master
* :mod:`.hooks` — what the webhook asks of tracing (``WebhookTracing``) and ``NO_TRACING``, which does nothing
* :mod:`.otel` — the OpenTelemetry SDK behind it, one provider per worker (imported only when tracing is on)
"""
