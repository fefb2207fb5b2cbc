"""pytest fixtures that run real registry servers (loaded by tests/conftest.py).

Session-scoped, each started on first use and stopped at the end of the session:

    registry                anonymous, plain HTTP
    basic_registry          htpasswd Basic auth (bcrypt); users in ``basic_registry.users``
    basic_credentials       ("alice", password) for basic_registry
    token_server            the token service behind token_registry (public prefix ``public/``)
    token_registry          Bearer token auth; anonymous pull on ``public/*`` only
    token_credentials       ("bob", password): pull on every repository of token_registry
    test_ca                 the CA that signed tls_registry's certificate (tests.support.certs.CA)
    tls_registry            anonymous over HTTPS; ``tls_registry.ca_file``, ``tls_registry.cert_dir``

    pushed_images           every shape of tests.support.images.SHAPES on `registry`:
                            dict shape -> PushedImage, repository = shape name, tag ``v1``
    basic_pushed_images     the same on basic_registry
    tls_pushed_images       the same on tls_registry
    token_pushed_images     the same on token_registry under ``private/<shape>``
    token_public_images     the same on token_registry under ``public/<shape>``

Function-scoped:

    redis_server            Debian's redis-server with a password on 127.0.0.1 (tests.support.redis_server)
    unique_repo             a fresh repository name for this test ("t/<test-name>-<hex>")
    make_repo               make_repo(prefix="t/") -> another fresh name (e.g. make_repo("public/"))
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.support.certs import CA, make_ca
from tests.support.images import PushedImage, push_all_shapes
from tests.support.redis_server import RedisServer, start_redis
from tests.support.registry_server import RegistryServer, start_registry
from tests.support.token_server import TokenServer, start_token_server


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """Anonymous registry over plain HTTP."""
    with start_registry(tmp_path_factory.mktemp("registry-anon")) as reg:
        yield reg


@pytest.fixture(scope="session")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """Registry with htpasswd Basic auth: ``alice`` (used for pushes) and ``carol``, random passwords."""
    users = {"alice": secrets.token_urlsafe(12), "carol": secrets.token_urlsafe(12)}
    with start_registry(tmp_path_factory.mktemp("registry-basic"), auth="basic", htpasswd_users=users) as reg:
        yield reg


@pytest.fixture(scope="session")
def basic_credentials(basic_registry: RegistryServer) -> tuple[str, str]:
    return "alice", basic_registry.users["alice"]


@pytest.fixture(scope="session")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenServer]:
    """Token service: anonymous pull on ``public/*``; ``bob`` pulls everything; ``admin`` pushes."""
    with start_token_server(
        tmp_path_factory.mktemp("token-server"),
        users={"bob": secrets.token_urlsafe(12)},
        public_prefixes=("public/",),
    ) as ts:
        yield ts


@pytest.fixture(scope="session")
def token_credentials(token_server: TokenServer) -> tuple[str, str]:
    return "bob", token_server.users["bob"]


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory: pytest.TempPathFactory, token_server: TokenServer) -> Iterator[RegistryServer]:
    """Registry with Bearer token auth delegated to ``token_server``."""
    with start_registry(tmp_path_factory.mktemp("registry-token"), auth="token", token=token_server) as reg:
        yield reg


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    """A throw-away CA; ``test_ca.issue([...])`` signs more serving certificates."""
    return make_ca("noe test CA", tmp_path_factory.mktemp("test-ca"))


@pytest.fixture(scope="session")
def tls_registry(tmp_path_factory: pytest.TempPathFactory, test_ca: CA) -> Iterator[RegistryServer]:
    """Anonymous registry over HTTPS with a certificate for 127.0.0.1 and localhost signed by ``test_ca``."""
    pair = test_ca.issue(["127.0.0.1", "localhost"], name="tls-registry")
    with start_registry(tmp_path_factory.mktemp("registry-tls"), tls=pair) as reg:
        yield reg


@pytest.fixture(scope="session")
def pushed_images(registry: RegistryServer) -> dict[str, PushedImage]:
    """Every image shape, pushed once to ``registry`` in repositories named after the shape (tag v1)."""
    return push_all_shapes(registry)


@pytest.fixture(scope="session")
def basic_pushed_images(basic_registry: RegistryServer) -> dict[str, PushedImage]:
    return push_all_shapes(basic_registry)


@pytest.fixture(scope="session")
def tls_pushed_images(tls_registry: RegistryServer) -> dict[str, PushedImage]:
    return push_all_shapes(tls_registry)


@pytest.fixture(scope="session")
def token_pushed_images(token_registry: RegistryServer) -> dict[str, PushedImage]:
    """Every shape on ``token_registry`` under ``private/<shape>`` (needs ``token_credentials``)."""
    return push_all_shapes(token_registry, prefix="private/")


@pytest.fixture(scope="session")
def token_public_images(token_registry: RegistryServer) -> dict[str, PushedImage]:
    """Every shape on ``token_registry`` under ``public/<shape>`` (anonymous pull)."""
    return push_all_shapes(token_registry, prefix="public/")


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


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with start_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server
