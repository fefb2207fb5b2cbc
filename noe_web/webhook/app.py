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
* ``GET /readyz`` — ready to take admissions: not shutting down, and the
  placement policies listed (503 until the first list has answered); reports
  what is configured, still without touching a registry.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from noe_core.errors import InvalidObject
from noe_web import json_codec
from noe_web.webhook.admission import AdmissionService

log = logging.getLogger("noe.app")

DEFAULT_MAX_BODY = 3 * 1024 * 1024
DRAIN_FACTOR = 4

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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
    return Response(json_codec.dumps(body), status=status, mimetype="application/json")


def _log_refusal(status: int, reason: str, message: str, environ: dict[str, Any]) -> None:
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
                "method": environ.get("REQUEST_METHOD"),
                "path": environ.get("PATH_INFO"),
            }
        },
    )


@dataclass(frozen=True)
class Answer:
    """What ``POST /mutate`` answers: status, JSON body, and whether the connection must close after it."""

    status: int
    body: bytes
    close: bool = False

    def wsgi_headers(self) -> list[tuple[str, str]]:
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(self.body)))]
        if self.close:
            headers.append(("Connection", "close"))
        return headers

    def flask_response(self) -> Response:
        response = Response(self.body, status=self.status, mimetype="application/json")
        if self.close:
            response.headers["Connection"] = "close"
        return response


class _Unreadable(Exception):
    """The body could not be read as HTTP framed it (e.g. a malformed chunk size)."""


class MutateEndpoint:
    """``POST /mutate``, served from the WSGI environ in front of Flask; every other request goes to Flask.

    Why not a Flask view: Flask's request context, routing and Response objects
    measured ~50 us per request, about as much as placing the pod. The view Flask
    still has for ``/mutate`` routes (other methods get its JSON 405) and
    answers through :meth:`answer` too.
    """

    def __init__(self, services: Services, flask_app: WSGIApp) -> None:
        self.services = services
        self.flask_app = flask_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/mutate" or environ.get("REQUEST_METHOD") != "POST":
            return self.flask_app(environ, start_response)
        answer = self.answer(environ)
        start_response(_STATUS[answer.status], answer.wsgi_headers())
        return [answer.body]

    def answer(self, environ: dict[str, Any]) -> Answer:
        """Read the AdmissionReview in the request body and answer it (200), or say why not (400).

        In the admission's span (when tracing is on), child of the request's ``traceparent``.
        """
        with self.services.admission.tracing.admission(environ) as span:
            answer = self._answer(environ)
            span.set("http.response.status_code", answer.status)
            return answer

    def _answer(self, environ: dict[str, Any]) -> Answer:
        services, limit = self.services, self.services.max_body_bytes
        length = _content_length(environ)
        if length is None and "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            # No framing: the body is empty (RFC 9112 6.3), and bytes the client meant as one cannot be
            # told from a next request, so the connection ends with the answer.
            message = "the request body is empty (no Content-Length, not chunked): send an AdmissionReview"
            return bad_request(services, environ, "empty", message, close=True)
        if length is not None and length > limit:
            return too_large(services, environ, drain=length)
        try:
            body = _read_body(environ, limit + 1 if length is None else length)
        except _Unreadable as exc:
            message = f"the request body could not be read ({exc})"
            return bad_request(services, environ, "unreadable", message, close=True)
        if len(body) > limit:
            return too_large(services, environ)
        if not body:
            return bad_request(services, environ, "empty", "the request body is empty: send an AdmissionReview")
        try:
            doc = json_codec.loads(body)
        except (ValueError, RecursionError) as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            return bad_request(services, environ, "not_json", f"the request body is not JSON ({detail})")
        try:
            return Answer(200, json_codec.dumps(services.admission.review(doc)))
        except InvalidObject as exc:
            return bad_request(services, environ, "invalid", f"not a usable AdmissionReview: {exc}")


def bad_request(
    services: Services, environ: dict[str, Any], reason: str, message: str, *, close: bool = False
) -> Answer:
    """A refusal of a /mutate request (400), counted and logged."""
    services.admission.metrics.bad_requests.labels(reason).inc()
    _log_refusal(400, reason, message, environ)
    return Answer(400, json_codec.dumps({"code": 400, "reason": reason, "message": message}), close)


def too_large(services: Services, environ: dict[str, Any], drain: int = 0) -> Answer:
    """The refusal of a body over the limit; the connection stays open only if the body could be drained."""
    closing = not _drain(environ, drain, services.max_body_bytes)
    message = f"the request body is larger than {services.max_body_bytes} bytes; AdmissionReviews are smaller"
    return bad_request(services, environ, "too_large", message, close=closing)


_STATUS = {200: "200 OK", 400: "400 Bad Request"}


def _content_length(environ: dict[str, Any]) -> int | None:
    text = environ.get("CONTENT_LENGTH")
    return int(text) if text and text.isdigit() else None


def _drain(environ: dict[str, Any], length: int, limit: int) -> bool:
    """Read and discard a too-large body so the client, still sending it, gets the 400 instead of a reset.

    Only up to a few times the limit; past that the connection is closed.
    """
    if length <= 0 or length > DRAIN_FACTOR * limit:
        return False
    stream = environ.get("wsgi.input")
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


def _read_body(environ: dict[str, Any], most: int) -> bytes:
    """At most ``most`` bytes of the body (one more than the limit tells a body that is too large)."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    parts: list[bytes] = []
    size = 0
    try:
        while size < most:
            chunk = stream.read(most - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
    # the servers' body errors (a malformed chunk...) share no base class with werkzeug's or OSError
    except Exception as exc:
        raise _Unreadable(type(exc).__name__) from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


def create_app(services: Services) -> Flask:
    app = Flask("noe_web")
    app.config["MAX_CONTENT_LENGTH"] = services.max_body_bytes
    app.extensions["noe"] = services
    endpoint = MutateEndpoint(services, app.wsgi_app)
    app.wsgi_app = endpoint  # type: ignore[method-assign]

    @app.post("/mutate")
    def mutate() -> Response:
        return endpoint.answer(request.environ).flask_response()

    @app.get("/livez")
    @app.get("/healthz")
    def livez() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        if services.shutting_down:
            return _json(503, {"status": "shutting down"})
        if not services.admission.ready():
            return _json(503, {"status": "placement policies not listed yet"})
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
            return too_large(services, request.environ).flask_response()
        code = exc.code or 500
        reason = exc.name.lower().replace(" ", "_")
        message = exc.description or exc.name
        if 400 <= code < 500:
            _log_refusal(code, reason, message, request.environ)
        return _json(code, {"code": code, "reason": reason, "message": message})

    return app
