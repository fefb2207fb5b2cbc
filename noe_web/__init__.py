"""The service around :mod:`noe_core`: the webhook, its process, the Kubernetes client, and the commands.

One folder per concern; a module imports Flask, gunicorn and prometheus_client
only where it uses them, so importing ``noe_web`` is cheap and sets nothing up.
``docs/architecture.md`` maps every module to its concept and says which
folder may import which.

* :mod:`.webhook` — the thin Flask app: AdmissionReview in, patch out, and one admission start to finish
* :mod:`.server` — the gunicorn process: application, the worker, request framing, TLS; no admission
* :mod:`.kube` — the Kubernetes API: configuration, client, errors, pull Secrets, Events, informers
* :mod:`.controller` — ``noe controller``, the safety net (no Flask)
* :mod:`.report` — ``noe report``: inventory, lookups, hints, table, CSV, HTML page
* :mod:`.commands` — the ``noe`` console script: ``serve`` (the composition root), ``certs``, ``cache``
* :mod:`.tracing` — OpenTelemetry tracing of admissions (the optional ``tracing`` extra)
* :mod:`.flags` — the flags ``serve``, ``controller``, ``report`` and ``cache`` share, declared once
* :mod:`.registry_cache` — the registry cache as every process opens it: bounds, the shared Redis level
* :mod:`.logs` — the one log schema
* :mod:`.json_codec` — JSON on the request path and in log lines (orjson)
* :mod:`.metrics` — the Prometheus metrics the webhook and the controller share
* :mod:`.__main__` — ``python -m noe_web``
"""
