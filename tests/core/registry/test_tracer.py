"""``noe_core.registry.tracer``: the null tracer records nothing; an outgoing request's attributes hold no secret."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from noe_core.registry.tracer import NULL_SPAN, NULL_TRACER, request_attributes


def test_the_null_tracer_hands_out_one_shared_span_that_records_nothing() -> None:
    with NULL_TRACER.span("registry GET", {"server.address": "r"}, client=True) as span:
        span.set("http.response.status_code", 200)
        span.fail("500", "boom")
    assert span is NULL_SPAN and NULL_TRACER.span("other") is NULL_SPAN
    assert vars(NULL_SPAN) == {}  # nothing was kept


def test_an_exception_leaves_a_null_span_untouched() -> None:
    with pytest.raises(KeyError), NULL_TRACER.span("image lookup"):
        raise KeyError("x")


@pytest.mark.parametrize(
    ("url", "host", "port", "full"),
    [
        ("https://registry.corp/v2/app/manifests/1", "registry.corp", 443, "https://registry.corp/v2/app/manifests/1"),
        ("http://127.0.0.1:5000/v2/_catalog", "127.0.0.1", 5000, "http://127.0.0.1:5000/v2/_catalog"),
        ("http://registry.corp/v2/", "registry.corp", 80, "http://registry.corp/v2/"),
        ("https://[::1]:5443/v2/", "::1", 5443, "https://[::1]:5443/v2/"),
        # The query (blob storage signs redirects there; token requests carry scope and service) and user info.
        (
            "https://bob:hunter2@blobs.corp/data/sha256?X-Amz-Signature=abc&X-Amz-Credential=k",
            "blobs.corp",
            443,
            "https://blobs.corp/data/sha256",
        ),
        (
            "https://auth.corp/token?scope=repository:app:pull&service=r#frag",
            "auth.corp",
            443,
            "https://auth.corp/token",
        ),
    ],
)
def test_request_attributes_name_the_host_port_and_path_only(url: str, host: str, port: int, full: str) -> None:
    attributes = request_attributes("GET", urlsplit(url))
    assert attributes == {
        "http.request.method": "GET",
        "server.address": host,
        "server.port": port,
        "url.full": full,
    }
    assert not [v for v in attributes.values() if isinstance(v, str) and ("hunter2" in v or "Signature" in v)]


def test_a_hostile_port_is_not_an_error_here() -> None:
    attributes = request_attributes("GET", urlsplit("https://evil.example:99999/v2/"))
    assert attributes["server.address"] == "evil.example" and attributes["server.port"] == 443
