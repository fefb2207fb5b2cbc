"""The webhook service: Flask app, gunicorn over TLS, Kubernetes API access, Events, metrics.

Modules import Flask, gunicorn and prometheus_client only where they are used,
so importing ``noe_web`` is cheap and sets nothing up.
"""
