"""The service around :mod:`noe_core`: the webhook, its process, the Kubernetes client, and the commands.

One folder per concern; a module imports Flask, gunicorn and prometheus_client
only where it uses them, so importing ``noe_web`` is cheap and sets nothing up:

* :mod:`noe_web.webhook` — the thin Flask app: AdmissionReview in, patch out
  (``app``), and one admission start to finish (``admission``);
* :mod:`noe_web.server` — the gunicorn process: application, the worker that
  reads slow clients in its event loop, request framing, TLS;
* :mod:`noe_web.kube` — the Kubernetes API: configuration, client, errors,
  ``exec`` plugins, pull Secrets, Events;
* :mod:`noe_web.controller` — ``noe controller``, the safety net (no Flask);
* :mod:`noe_web.report` — ``noe report``: inventory, lookups, table, HTML page;
* :mod:`noe_web.commands` — the ``noe`` console script and ``serve`` (the
  composition root), ``certs``, ``cache``, the Go Noe's command line;
* :mod:`noe_web.tracing` — OpenTelemetry tracing of admissions (the optional
  ``tracing`` extra), configured by the standard ``OTEL_*`` variables;
* :mod:`noe_web.logs` — the one log schema; :mod:`noe_web.metrics` — the
  Prometheus metrics the webhook and the controller share.

``docs/architecture.md`` maps every module to its concept.
"""
