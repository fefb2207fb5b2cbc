"""Registry request durations, measured on the registry client's own session against a real registry."""

from __future__ import annotations

import pytest

from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from noe_web.metrics import Metrics
from noe_web.webhook.admission import ObserverTee
from tests.support.images import PushedImage
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.registry


def test_every_answered_registry_request_is_timed(
    registry: RegistryServer, pushed_images: dict[str, PushedImage]
) -> None:
    metrics = Metrics()
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",))
    session = make_session(settings)
    metrics.instrument_session(session)  # as noe serve wires it
    resolver = Resolver(session, settings=settings, observer=ObserverTee(metrics))
    try:
        image = next(iter(pushed_images.values()))
        resolver.resolve(image.reference, deadline=Deadline.after(10))
    finally:
        session.close()
    host = image.reference.split("/", 1)[0]
    sample = metrics.registry.get_sample_value
    # status 0: no answer (the https attempt an insecure registry refuses); those have no duration
    answered = sum(
        s.value
        for f in metrics.registry.collect()
        for s in f.samples
        if s.name == "noe_registry_requests_total" and s.labels["registry"] == host and s.labels["status"] != "0"
    )
    timed = sum(
        s.value
        for f in metrics.registry.collect()
        for s in f.samples
        if s.name == "noe_registry_request_duration_seconds_count" and s.labels["registry"] == host
    )
    assert answered >= 1
    assert timed == answered  # every request the registry answered, none twice
    total = sample("noe_registry_request_duration_seconds_sum", {"registry": host, "method": "GET"}) or 0.0
    assert 0 < total < 10
