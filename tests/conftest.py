"""Test-suite wiring: the registry fixtures live in tests/support/fixtures.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# `pytest` run as a console script (tox) does not put the checkout on sys.path, and
# tests/ is not a package: make `tests.support` importable either way.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["tests.support.fixtures", "tests.support.image_release"]

# Fixtures that start the real registry server (Debian docker-registry) or serve it.
# A test that uses one, directly or through another fixture, is a `registry` test
# whether or not its module says so, so `tox -e unit` (-m "not registry ...") never
# needs docker-registry, skopeo or root.
REGISTRY_FIXTURES = frozenset({"registry", "basic_registry", "token_server", "token_registry", "tls_registry"})


REDIS_FIXTURES = frozenset({"redis_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if REGISTRY_FIXTURES & fixtures:
            item.add_marker(pytest.mark.registry)
        if REDIS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.redis)
