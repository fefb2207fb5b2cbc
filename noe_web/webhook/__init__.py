"""The webhook proper, the thin Flask app: parse HTTP, call :func:`noe_core.admission.admitting.admit`, serialise.

Nothing here knows gunicorn (:mod:`noe_web.server`) or how the process is configured
(:mod:`noe_web.commands.serve`).

* :mod:`.app` — ``create_app(services)``: ``/mutate``, ``/livez``, ``/healthz``, ``/readyz``
* :mod:`.admission` — one admission: lookups within the deadline, Events, metrics, the log line
"""
