"""The Flask application: parse HTTP, call the admission service, serialise.

``create_app(services)`` builds a new app around the given services, so every
test (and every gunicorn worker) has its own; nothing lives in module globals.

Endpoints:

* ``POST /mutate`` — an AdmissionReview (``admission.k8s.io/v1`` or
  ``v1beta1``) in, the answer in the same version out. A body that is not
  JSON, not an AdmissionReview or missing what noe needs gets a 400 with a
  one-line JSON message; one larger than ``max_body_bytes`` gets a 400 too
  (reason ``too_large``: the contract says every unparsable request is a 400). Never
  a 500 for input.
* ``GET /livez`` and ``/healthz`` — the process answers; never depends on a
  registry or the Kubernetes API.
* ``GET /readyz`` — ready to take admissions (not shutting down); reports what
  is configured, still without touching a registry.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from noe_core.errors import InvalidObject
from noe_web.admission_service import AdmissionService

log = logging.getLogger("noe.app")

DEFAULT_MAX_BODY = 3 * 1024 * 1024
DRAIN_FACTOR = 4


@dataclass
class Services:
    """What the app is built around."""

    admission: AdmissionService
    max_body_bytes: int = DEFAULT_MAX_BODY
    info: dict[str, Any] = field(default_factory=dict)
    shutting_down: bool = False

    def close(self) -> None:
        self.shutting_down = True
        self.admission.close()


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body, separators=(",", ":")) + "\n", status=status, mimetype="application/json")


def _log_refusal(status: int, reason: str, message: str) -> None:
    """One line per 4xx answer: status, reason and message, never the body."""
    log.warning(
        "request refused: %s",
        reason,
        extra={
            "fields": {
                "event": "refused",
                "status": status,
                "reason": reason,
                "message": message,
                "method": request.method,
                "path": request.path,
            }
        },
    )


def _bad_request(status: int, reason: str, message: str, services: Services) -> Response:
    services.admission.metrics.bad_requests.labels(reason).inc()
    _log_refusal(status, reason, message)
    return _json(status, {"code": status, "reason": reason, "message": message})


def _drain(length: int, limit: int) -> bool:
    """Read and discard a too-large body so the client, still sending it, gets the 400 instead of a reset.

    Only up to a few times the limit; past that the connection is closed.
    """
    if length <= 0 or length > DRAIN_FACTOR * limit:
        return False
    stream = request.environ.get("wsgi.input")
    if stream is None:
        return False
    left = length
    try:
        while left > 0:
            chunk = stream.read(min(left, 64 * 1024))
            if not chunk:
                return False
            left -= len(chunk)
    except OSError:  # the serving worker already discarded it, or the client went away
        return False
    return True


class _Unreadable(Exception):
    """The body could not be read as HTTP framed it (e.g. a malformed chunk size)."""


def _read_body(limit: int) -> bytes | None:
    """At most ``limit`` bytes of the body; None when there are more (a chunked body has no length up front)."""
    stream = request.environ.get("wsgi.input")
    if stream is None:
        return b""
    parts: list[bytes] = []
    size = 0
    try:
        while size <= limit:
            chunk = stream.read(min(64 * 1024, limit + 1 - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
    # gunicorn's parse errors (InvalidChunkSize...) share no base class with werkzeug's or OSError
    except Exception as exc:
        raise _Unreadable(type(exc).__name__) from exc
    return None if size > limit else b"".join(parts)


def create_app(services: Services) -> Flask:
    app = Flask("noe_web")
    app.config["MAX_CONTENT_LENGTH"] = services.max_body_bytes
    app.extensions["noe"] = services

    @app.post("/mutate")
    def mutate() -> Response:
        length = request.content_length
        if length is not None and length > services.max_body_bytes:
            return _too_large(drain=length)
        try:
            body = _read_body(services.max_body_bytes)
        except _Unreadable as exc:
            response = _bad_request(400, "unreadable", f"the request body could not be read ({exc})", services)
            response.headers["Connection"] = "close"
            return response
        if body is None:
            return _too_large()
        if not body:
            return _bad_request(400, "empty", "the request body is empty: send an AdmissionReview", services)
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            return _bad_request(400, "not_json", f"the request body is not JSON ({detail})", services)
        try:
            answer = services.admission.review(doc)
        except InvalidObject as exc:
            return _bad_request(400, "invalid", f"not a usable AdmissionReview: {exc}", services)
        return _json(200, answer)

    def _too_large(drain: int = 0) -> Response:
        closing = not _drain(drain, services.max_body_bytes)
        response = _bad_request(
            400,
            "too_large",
            f"the request body is larger than {services.max_body_bytes} bytes; AdmissionReviews are smaller",
            services,
        )
        if closing:
            response.headers["Connection"] = "close"
        return response

    @app.get("/livez")
    @app.get("/healthz")
    def livez() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        if services.shutting_down:
            return _json(503, {"status": "shutting down"})
        events = services.admission.events
        return _json(
            200,
            {
                "status": "ready",
                **services.info,
                "events_pending": events.pending() if events is not None else None,
            },
        )

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        if exc.code == 413:
            return _too_large()
        code = exc.code or 500
        reason = exc.name.lower().replace(" ", "_")
        message = exc.description or exc.name
        if 400 <= code < 500:
            _log_refusal(code, reason, message)
        return _json(code, {"code": code, "reason": reason, "message": message})

    return app
