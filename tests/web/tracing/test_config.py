"""``noe_web.tracing.config``: which ``OTEL_*`` settings turn tracing on, and what is reported when it cannot be."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from noe_web.tracing.config import TRACING_OFF, open_tracing, read_tracing
from noe_web.tracing.hooks import NO_TRACING

ENDPOINT = "http://collector.observability:4318"


@pytest.mark.parametrize(
    ("environ", "because"),
    [
        ({}, "no exporter configured"),
        ({"OTEL_SERVICE_NAME": "noe", "OTEL_TRACES_SAMPLER": "always_on"}, "no exporter configured"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, "no exporter configured"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, "OTEL_TRACES_EXPORTER=none"),
        ({"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, "OTEL_SDK_DISABLED=true"),
    ],
)
def test_off_without_an_exporter_or_when_disabled(environ: dict[str, str], because: str) -> None:
    config = read_tracing(environ)
    assert not config.enabled and because in config.off_because and not config.problem
    assert open_tracing(config) is NO_TRACING
    assert config.describe() == {"enabled": False, "off_because": config.off_because}


@pytest.mark.parametrize(
    ("environ", "exporters"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, ("otlp_proto_http",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT + "/v1/traces"}, ("otlp_proto_http",)),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp_proto_http",)),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        (
            {"OTEL_TRACES_EXPORTER": "Console, otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT},
            ("console", "otlp_proto_http"),
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            ("otlp_proto_http",),
        ),
    ],
)
def test_on_with_the_exporters_the_variables_name(environ: dict[str, str], exporters: tuple[str, ...]) -> None:
    config = read_tracing(environ)
    assert config.enabled and config.exporters == exporters and not config.problem


def test_the_start_up_line_shows_the_endpoint_without_credentials_or_query() -> None:
    config = read_tracing(
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:s3cret@collector.corp:4318/v1/traces?token=t0k",
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer h3ader",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        }
    )
    described = config.describe()
    assert described == {
        "enabled": True,
        "exporters": ["otlp_proto_http"],
        "endpoint": "https://collector.corp:4318/v1/traces",
        "sampler": "parentbased_traceidratio",
    }
    assert not [s for s in ("s3cret", "t0k", "h3ader") if s in repr(config)]


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "'http/json'"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "opentelemetry-exporter-otlp-proto-grpc",
        ),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "'zipkin' is not installed"),
    ],
)
def test_an_exporter_that_cannot_be_had_is_one_problem_and_tracing_off(environ: dict[str, str], problem: str) -> None:
    config = read_tracing(environ)
    assert not config.enabled and problem in config.problem and "admissions are not traced" in config.problem
    assert open_tracing(config) is NO_TRACING


def test_off_imports_no_opentelemetry_module() -> None:
    """The price of tracing off: not even an import (a fresh interpreter, the serve path's own calls)."""
    code = textwrap.dedent(
        """
        import sys
        from noe_web.tracing.config import open_tracing, read_tracing
        from noe_web.webhook.admission import AdmissionService
        tracing = open_tracing(read_tracing({"OTEL_SERVICE_NAME": "noe"}))
        with tracing.admission({"HTTP_TRACEPARENT": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) as span:
            span.set("http.response.status_code", 200)
        tracing.shutdown()
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_default_is_off() -> None:
    assert not TRACING_OFF.enabled and open_tracing(TRACING_OFF) is NO_TRACING
