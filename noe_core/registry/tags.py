"""A repository's tags through the Registry API (``GET /v2/<name>/tags/list``), page by page, bounded.

Pages are asked for ``n`` tags at a time; a registry with more answers a
``Link: </v2/<name>/tags/list?last=…&n=…>; rel="next"`` header (distribution
does whenever ``n`` is given), which is followed. The walk goes through the
:class:`~noe_core.registry.resolver.Resolver`'s transport — its mirror rules,
authentication handshake, retries, capped reads and deadline — with the
credentials a lookup of the same image presents, so listing tags needs no
access an image lookup would not have.

A registry is not trusted to end the walk: a page is at most
:data:`MAX_PAGE_BYTES`, the walk stops after :data:`MAX_PAGES` pages or
:data:`MAX_TAGS` tags (the list is then marked incomplete), a ``Link`` must
lead to the same repository on the same host (never another host: it would be
sent the credentials) and move forward (a ``last`` seen before is a loop, and
an error), and a body that is not a JSON tag list is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlsplit

from noe_core.credentials.keychain import Keychain
from noe_core.errors import RegistryError
from noe_core.name.reference import Reference
from noe_core.registry.resolver import Resolver
from noe_core.registry.sender import status_error
from noe_core.util.deadline import Deadline
from noe_core.util.safe_load import load_json

PAGE_SIZE = 100
"""Tags asked for per page (Docker Hub's largest page)."""
MAX_PAGES = 100
MAX_TAGS = 10_000
MAX_PAGE_BYTES = 1024 * 1024
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_NEXT = re.compile(r'<(?P<url>[^>]*)>\s*;[^,]*\brel="?next"?', re.IGNORECASE)


@dataclass(frozen=True)
class TagList:
    """The tags read, how many requests that took, and whether the list is whole."""

    repository: str
    tags: tuple[str, ...]
    pages: int
    complete: bool


def list_tags(
    resolver: Resolver,
    reference: Reference,
    *,
    deadline: Deadline,
    keychain: Keychain | None = None,
    page_size: int = PAGE_SIZE,
    max_pages: int = MAX_PAGES,
    max_tags: int = MAX_TAGS,
) -> TagList:
    """Every tag of ``reference``'s repository (on its mirror, if one is configured), in the registry's order.

    Raises :class:`RegistryError` (or ``AuthError``) when a page cannot be read.
    """
    target = resolver.mirrored(reference)
    credentials = resolver.credentials(target, deadline=deadline, keychain=keychain)
    tags: dict[str, None] = {}
    seen_last: set[str] = set()
    query = f"n={page_size}"
    pages = 0
    while True:
        result = resolver.transport.fetch(
            "GET",
            target,
            f"tags/list?{query}",
            deadline=deadline,
            credentials=credentials,
            accept="application/json",
            max_bytes=MAX_PAGE_BYTES,
        )
        pages += 1
        if result.status != 200:
            raise status_error(result, target, "tag list")
        for tag in _page_tags(result.body, target):
            tags.setdefault(tag, None)
            if len(tags) >= max_tags:
                return TagList(target.context, tuple(tags), pages, complete=False)
        last = _next_last(result.header("link"), target)
        if last is None:
            return TagList(target.context, tuple(tags), pages, complete=True)
        if last in seen_last:
            raise RegistryError(
                f"registry {target.api_host} keeps sending the tag list of {target.repository} after "
                f"{last[:80]!r} again: its pagination loops",
                registry=target.api_host,
            )
        if pages >= max_pages:
            return TagList(target.context, tuple(tags), pages, complete=False)
        seen_last.add(last)
        query = f"n={page_size}&last={quote(last, safe='')}"


def _page_tags(body: bytes, target: Reference) -> list[str]:
    """The tags of one page; a body that is not ``{"tags": [...]}`` is a :class:`RegistryError`."""
    try:
        doc = load_json(body)
    except (UnicodeDecodeError, ValueError):
        doc = None
    tags = doc.get("tags") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not (tags is None or isinstance(tags, list)):
        raise RegistryError(
            f"registry {target.api_host} answered the tag list of {target.repository} with something "
            "other than a JSON tag list",
            registry=target.api_host,
        )
    # A tag that breaks the grammar could not be pulled anyway: skipped, never passed on.
    return [tag for tag in tags or () if isinstance(tag, str) and _TAG.fullmatch(tag)]


def _next_last(link: str, target: Reference) -> str | None:
    """The ``last`` of the ``rel="next"`` link, or ``None`` at the end; a link elsewhere is an error."""
    match = _NEXT.search(link)
    if match is None:
        return None
    url = urlsplit(match["url"])
    path = f"/v2/{target.repository}/tags/list"
    if (url.netloc and url.netloc != target.api_host) or url.path != path:
        raise RegistryError(
            f"registry {target.api_host} pointed the next page of the tag list of {target.repository} "
            "somewhere else; not followed",
            registry=target.api_host,
        )
    values = parse_qs(url.query).get("last", [])
    if len(values) != 1 or not values[0] or len(values[0]) > 256:
        raise RegistryError(
            f"registry {target.api_host} sent a next-page link for the tag list of {target.repository} "
            "without a usable 'last' tag",
            registry=target.api_host,
        )
    return values[0]
