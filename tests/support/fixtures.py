"""pytest fixtures that run real registry servers (loaded by tests/conftest.py).

Session-scoped, each started once on first use and stopped at the end of the session:

    registry               anonymous, plain HTTP
    pushed_images          dict shape -> PushedImage, every shape of tests.support.images on `registry`

Function-scoped:

    unique_repo            a fresh repository name for this test ("t/<test-name>-<hex>")
    make_repo              make_repo(prefix="t/") -> another fresh name (e.g. make_repo("public/"))
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.support.images import PushedImage, push_all_shapes
from tests.support.registry_server import RegistryServer, start_registry


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """Anonymous registry over plain HTTP."""
    with start_registry(tmp_path_factory.mktemp("registry-anon")) as reg:
        yield reg


@pytest.fixture(scope="session")
def pushed_images(registry: RegistryServer) -> dict[str, PushedImage]:
    """Every image shape, pushed once to `registry` in repositories named after the shape (tag v1)."""
    return push_all_shapes(registry)


@pytest.fixture
def make_repo(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Fresh repository names: ``make_repo("public/")`` -> ``public/<test-name>-<hex>``."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40] or "repo"

    def make(prefix: str = "t/") -> str:
        return f"{prefix}{stem}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def unique_repo(make_repo: Callable[..., str]) -> str:
    """A repository name no other test uses."""
    return make_repo()
