"""OpenTelemetry tracing of admissions, optional (``pip install 'noe-webhook[tracing]'``).

* :mod:`.config` — the standard ``OTEL_*`` variables → :class:`~.config.TracingConfig`
  (read once, in the master): on only when an exporter is configured and installed;
* :mod:`.hooks` — what the webhook asks of tracing (:class:`~.hooks.WebhookTracing`)
  and :data:`~.hooks.NO_TRACING`, the stand-in that does nothing when it is off;
* :mod:`.otel` — the OpenTelemetry SDK behind it, one provider per worker (imported
  only when tracing is on).

The registry client and the Kubernetes client open their spans through
:class:`noe_core.registry.tracer.Tracer`, so ``noe_core`` never imports OpenTelemetry.
"""
