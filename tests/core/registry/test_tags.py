"""Tag lists (noe_core.registry.tags): real pagination from distribution, real auth, and hostile registries."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from noe_core.credentials.keychain import Credential, StaticKeychain
from noe_core.errors import AuthError, NoeError, RegistryError
from noe_core.name.reference import parse_reference
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings, parse_registry_proxies
from noe_core.registry.tags import MAX_PAGE_BYTES, list_tags
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from tests.support.images import add_tags, push_oci_single
from tests.support.paging_proxy import start_paging_proxy
from tests.support.registry_server import RegistryServer
from tests.support.scripted_server import ScriptedServer, start_scripted_server

INSECURE = RegistrySettings(insecure_registries=("127.0.0.1:*",))


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with make_session(INSECURE) as s:
        yield s


def resolver(session: requests.Session, settings: RegistrySettings = INSECURE) -> Resolver:
    return Resolver(session, settings=settings)


# ------------------------------------------------------------------ the real registry


@pytest.mark.registry
def test_pages_follow_the_link_header(registry: RegistryServer, unique_repo: str, session: requests.Session) -> None:
    """Distribution 3's paging (tests/support/paging_proxy.py) over the real registry's tags and auth."""
    image = push_oci_single(registry, unique_repo, "1.0.0")
    tags = ["1.0.0", "1.0.1", "1.1.0", "2.0.0", "latest", "nightly", "v3", "0.9"]
    add_tags(registry, image, tags[1:])
    with start_paging_proxy(registry) as proxy:
        mark = registry.mark()
        ref = parse_reference(f"{proxy.host}/{unique_repo}:1.0.0")
        listed = list_tags(resolver(session), ref, deadline=Deadline.after(10), page_size=3)
        assert listed.tags == tuple(sorted(tags))
        assert listed.complete and listed.pages == 3 and listed.repository == f"{proxy.host}/{unique_repo}"
        pages = [urlsplit(path) for path in proxy.tag_pages]
    assert all(page.path == f"/v2/{unique_repo}/tags/list" for page in pages)
    queries = [parse_qs(page.query) for page in pages]
    assert [q["n"] for q in queries] == [["3"]] * 3
    # the Link carries the last tag of each page; the walk passes it on
    assert "last" not in queries[0] and queries[1]["last"] == ["1.0.1"] and queries[2]["last"] == ["latest"]
    # each page was the real registry's answer: three tag-list GETs reached it, nothing else
    assert [(e.method, urlsplit(e.path).path) for e in registry.requests_since(mark)] == [
        ("GET", f"/v2/{unique_repo}/tags/list")
    ] * 3


@pytest.mark.registry
def test_debians_registry_answers_every_tag_on_one_page(
    registry: RegistryServer, unique_repo: str, session: requests.Session
) -> None:
    """Distribution 2.8 ignores n: the whole list in one answer, no Link, is read as one complete page."""
    image = push_oci_single(registry, unique_repo, "1.0.0")
    add_tags(registry, image, [f"1.0.{i}" for i in range(1, 8)])
    listed = list_tags(resolver(session), parse_reference(image.reference), deadline=Deadline.after(10), page_size=3)
    assert len(listed.tags) == 8 and listed.pages == 1 and listed.complete


@pytest.mark.registry
def test_one_page_when_the_list_fits(registry: RegistryServer, unique_repo: str, session: requests.Session) -> None:
    image = push_oci_single(registry, unique_repo, "1.0.0")
    mark = registry.mark()
    listed = list_tags(resolver(session), parse_reference(image.reference), deadline=Deadline.after(10))
    assert listed.tags == ("1.0.0",) and listed.pages == 1 and listed.complete
    assert registry.count(since=mark) == 1


@pytest.mark.registry
def test_private_tags_with_the_credentials_an_image_lookup_presents(
    token_registry: RegistryServer,
    token_credentials: tuple[str, str],
    make_repo: Callable[..., str],
    session: requests.Session,
) -> None:
    image = push_oci_single(token_registry, make_repo("private/"), "1.0.0")
    add_tags(token_registry, image, ["1.0.1"])
    ref = parse_reference(image.reference)
    with pytest.raises(AuthError, match="refused access"):
        list_tags(resolver(session), ref, deadline=Deadline.after(10))
    keychain = StaticKeychain([(token_registry.host, Credential(*token_credentials, "pod secret"))])
    listed = list_tags(resolver(session), ref, deadline=Deadline.after(10), keychain=keychain)
    assert sorted(listed.tags) == ["1.0.0", "1.0.1"]
    # the node's keychain is presented too, as for image lookups
    node = Resolver(session, settings=INSECURE, keychain=keychain)
    assert sorted(list_tags(node, ref, deadline=Deadline.after(10)).tags) == ["1.0.0", "1.0.1"]


@pytest.mark.registry
def test_tags_are_listed_on_the_mirror(registry: RegistryServer, unique_repo: str, session: requests.Session) -> None:
    image = push_oci_single(registry, f"mirror/{unique_repo}", "1.0.0")
    settings = RegistrySettings(
        insecure_registries=("127.0.0.1:*",),
        registry_proxies=parse_registry_proxies(f"upstream.example={registry.host}/mirror"),
    )
    listed = list_tags(
        resolver(session, settings),
        parse_reference(f"upstream.example/{unique_repo}:1.0.0"),
        deadline=Deadline.after(10),
    )
    assert listed.tags == ("1.0.0",) and image.tag == "1.0.0"


@pytest.mark.registry
def test_a_repository_the_registry_does_not_know(
    registry: RegistryServer, unique_repo: str, session: requests.Session
) -> None:
    with pytest.raises(RegistryError, match="HTTP 404"):
        list_tags(resolver(session), parse_reference(f"{registry.host}/{unique_repo}:1"), deadline=Deadline.after(10))


# ------------------------------------------------------------------ hostile registries


def tag_page(tags: list[str], link: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json"}
    if link is not None:
        headers["Link"] = link
    return 200, headers, json.dumps({"name": "x/y", "tags": tags}).encode()


def walk(server: ScriptedServer, session: requests.Session, **kwargs: int) -> object:
    ref = parse_reference(f"{server.host}/x/y:1.0.0")
    return list_tags(resolver(session), ref, deadline=Deadline.after(10), **kwargs)


def tag_requests(server: ScriptedServer) -> list[str]:
    return [s.path for s in server.seen if s.path.startswith("/v2/x/y/tags/list")]


def test_a_link_that_loops_is_an_error_not_a_hang(session: requests.Session) -> None:
    with start_scripted_server() as server:

        def answer(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
            return tag_page(["1.0.0", "1.0.1"], '</v2/x/y/tags/list?last=1.0.1&n=100>; rel="next"')

        server.routes["/v2/x/y/tags/list"] = answer
        with pytest.raises(RegistryError, match="its pagination loops"):
            walk(server, session)
        assert len(tag_requests(server)) == 2  # the first page, then the one that repeats itself


def test_endless_fresh_pages_stop_at_the_page_limit(session: requests.Session) -> None:
    with start_scripted_server() as server:
        count = iter(range(10**6))

        def answer(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
            n = next(count)
            return tag_page([f"0.0.{n}"], f'</v2/x/y/tags/list?last=0.0.{n}&n=100>; rel="next"')

        server.routes["/v2/x/y/tags/list"] = answer
        listed = walk(server, session, max_pages=7)
        assert listed.complete is False and listed.pages == 7  # type: ignore[attr-defined]
        assert len(tag_requests(server)) == 7


def test_a_huge_list_stops_at_the_tag_limit(session: requests.Session) -> None:
    with start_scripted_server() as server:
        server.routes["/v2/x/y/tags/list"] = lambda h: tag_page([f"1.0.{i}" for i in range(5000)])
        listed = walk(server, session, max_tags=1000)
        assert listed.complete is False and len(listed.tags) == 1000  # type: ignore[attr-defined]


def test_a_page_larger_than_the_cap_is_refused(session: requests.Session) -> None:
    with start_scripted_server() as server:
        big = [f"1.0.{i}-{'x' * 100}" for i in range(MAX_PAGE_BYTES // 100)]
        server.routes["/v2/x/y/tags/list"] = lambda h: tag_page(big)
        with pytest.raises(NoeError, match="byte limit"):
            walk(server, session)


@pytest.mark.parametrize(
    ("link", "message"),
    [
        ('<http://evil.example/v2/x/y/tags/list?last=a&n=100>; rel="next"', "somewhere else; not followed"),
        ('</v2/other/repo/tags/list?last=a&n=100>; rel="next"', "somewhere else; not followed"),
        ('</v2/x/y/tags/list?n=100>; rel="next"', "without a usable 'last' tag"),
    ],
)
def test_a_link_elsewhere_is_never_followed(session: requests.Session, link: str, message: str) -> None:
    with start_scripted_server() as server:
        server.routes["/v2/x/y/tags/list"] = lambda h: tag_page(["1.0.0"], link)
        with pytest.raises(RegistryError, match=message):
            walk(server, session)
        assert len(tag_requests(server)) == 1
        assert not any("evil" in s.path or "other" in s.path for s in server.seen)


@pytest.mark.parametrize(
    "body", [b"<html>not json</html>", b'{"tags": "1.0.0"}', b"[1, 2]", b"\xff\xfe", b"[" * 5000 + b"]" * 5000]
)
def test_a_body_that_is_not_a_tag_list_is_an_error(session: requests.Session, body: bytes) -> None:
    with start_scripted_server() as server:
        server.routes["/v2/x/y/tags/list"] = lambda h: (200, {"Content-Type": "application/json"}, body)
        with pytest.raises(RegistryError, match="something other than a JSON tag list"):
            walk(server, session)


def test_tags_that_break_the_grammar_are_dropped(session: requests.Session) -> None:
    with start_scripted_server() as server:
        server.routes["/v2/x/y/tags/list"] = lambda h: tag_page(["1.0.0", "../../etc", "x" * 200, 7, "1.0.1"])  # type: ignore[list-item]
        assert walk(server, session).tags == ("1.0.0", "1.0.1")  # type: ignore[attr-defined]
