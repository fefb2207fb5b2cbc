"""Failures that cannot recover within an admission fail in one attempt; temporary ones are retried."""

from __future__ import annotations

import socket
import time

import pytest

from noe_core.errors import RegistryError
from noe_core.registry.observer import CountingObserver
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline

SETTINGS = RegistrySettings(insecure_registries=("127.0.0.1:*",), negative_cache_ttl=0)


def _attempts(observer: CountingObserver) -> int:
    return sum(n for (_, _, status), n in observer.requests.items() if status == 0)


def test_unknown_host_fails_in_one_attempt_well_within_the_deadline() -> None:
    observer = CountingObserver()
    with make_session(SETTINGS) as session, Resolver(session, settings=SETTINGS, observer=observer) as resolver:
        start = time.monotonic()
        with pytest.raises(RegistryError) as caught:
            resolver.resolve("no-such-registry.invalid/app:v1", deadline=Deadline.after(5))
        elapsed = time.monotonic() - start
    assert _attempts(observer) == 1
    assert "host name not found" in str(caught.value)
    assert not caught.value.temporary
    assert elapsed < 2.5, elapsed


def test_connection_refused_fails_in_one_attempt() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port now: every connection is refused.
    observer = CountingObserver()
    with (
        make_session(SETTINGS) as session,
        Resolver(session, settings=SETTINGS, observer=observer) as resolver,
        pytest.raises(RegistryError) as caught,
    ):
        resolver.resolve(f"127.0.0.1:{port}/app:v1", deadline=Deadline.after(5))
    assert "connection refused" in str(caught.value)
    assert not caught.value.temporary
    # https first, then (insecure host) nothing more: a refused connection is not a TLS failure.
    assert _attempts(observer) == 1
