"""The standard ``OTEL_*`` variables → :class:`TracingConfig`: whether admissions are traced, and where to.

noe has no tracing flag: the OpenTelemetry SDK's own variables configure it, as
for any other service. Tracing is **on** when an exporter is configured — an
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or an
``OTEL_TRACES_EXPORTER`` other than ``none`` — and the ``tracing`` extra is
installed; **off** otherwise, and always with ``OTEL_SDK_DISABLED=true``. (The
SDK's own default exporter is ``otlp`` to localhost; a webhook that was given no
endpoint exports nothing instead.) ``otlp`` means OTLP over HTTP/protobuf unless
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL`` says
``grpc`` (which needs ``opentelemetry-exporter-otlp-proto-grpc``); other names are
the SDK's ``opentelemetry_traces_exporter`` entry points (``console``…).

Everything else — endpoint, headers, timeout, compression, certificates, sampler
(``OTEL_TRACES_SAMPLER``, ``_ARG``), service name and resource attributes,
propagators, batch sizes and delays (``OTEL_BSP_*``) — is read by the SDK itself,
in each worker.

Read once in the master (:func:`read_tracing`): tracing asked for but not
installed, or an exporter that is not, is one warning at start-up and tracing
off — the webhook keeps answering. The start-up line says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from noe_core.util.comma_list import parse_comma_list
from noe_web.tracing.hooks import NO_TRACING, WebhookTracing

EXTRA = "pip install 'noe-webhook[tracing]'"
OTLP_EXPORTERS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
"""``otlp`` by protocol, as the SDK's entry points name them."""
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


@dataclass(frozen=True)
class TracingConfig:
    """Which span exporters each worker starts (``()``: tracing off, and why)."""

    exporters: tuple[str, ...] = ()
    """Entry-point names in ``opentelemetry_traces_exporter`` (``otlp_proto_http``, ``console``…)."""
    off_because: str = ""
    problem: str = ""
    """Tracing was asked for and cannot be had: the warning to log once."""
    endpoint: str = ""
    sampler: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.exporters)

    def describe(self) -> dict[str, Any]:
        """For the start-up line: exporters, endpoint (scheme, host, port, path), sampler; never a header."""
        if not self.enabled:
            return {"enabled": False, "off_because": self.off_because}
        return {
            "enabled": True,
            "exporters": list(self.exporters),
            "endpoint": self.endpoint or None,
            "sampler": self.sampler or "parentbased_always_on",
        }


TRACING_OFF = TracingConfig(off_because="not configured")


def read_tracing(environ: Mapping[str, str]) -> TracingConfig:
    """What ``environ``'s ``OTEL_*`` variables ask for, checked against what is installed."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return TracingConfig(off_because="OTEL_SDK_DISABLED=true")
    endpoint = next((environ[name] for name in _ENDPOINTS if environ.get(name, "").strip()), "")
    named = parse_comma_list(environ.get("OTEL_TRACES_EXPORTER", "").lower())
    if not named and not endpoint:
        return TracingConfig(off_because="no exporter configured (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER)")
    names = [name for name in named or ("otlp",) if name != "none"]
    if not names:
        return TracingConfig(off_because="OTEL_TRACES_EXPORTER=none")
    exporters: list[str] = []
    for name in names:
        if name != "otlp":
            exporters.append(name)
            continue
        protocol = next((environ[p].strip() for p in _PROTOCOLS if environ.get(p, "").strip()), "http/protobuf")
        if protocol not in OTLP_EXPORTERS:
            return _unavailable(f"OTLP protocol {protocol!r} is not one of {', '.join(OTLP_EXPORTERS)}")
        exporters.append(OTLP_EXPORTERS[protocol])
    try:
        from noe_web.tracing.otel import exporter_classes  # noqa: PLC0415 - only when tracing is asked for
    except ImportError:
        return _unavailable(f"the tracing extra is not installed ({EXTRA})")
    try:
        exporter_classes(exporters)
    except LookupError as exc:
        return _unavailable(str(exc))
    return TracingConfig(
        tuple(exporters), endpoint=_safe_url(endpoint), sampler=environ.get("OTEL_TRACES_SAMPLER", "").strip()
    )


def open_tracing(config: TracingConfig) -> WebhookTracing:
    """This worker's tracing: :data:`NO_TRACING` when off; else a provider and its export thread (after the fork)."""
    if not config.enabled:
        return NO_TRACING
    from noe_web.tracing.otel import OtelTracing  # noqa: PLC0415

    return OtelTracing.start(config.exporters)


def _unavailable(why: str) -> TracingConfig:
    message = f"OTEL_* variables ask for traces, but {why}: admissions are not traced"
    return TracingConfig(off_because=why, problem=message)


def _safe_url(text: str) -> str:
    """An endpoint as scheme://host:port/path: no user information, no query."""
    if not text:
        return ""
    parts = urlsplit(text.strip())
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"
