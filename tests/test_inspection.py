"""Image inspection: declared platforms first, the real registry for the rest, the deadline kept."""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from noe_core.deadline import Deadline
from noe_core.lookup import ImagePlatforms, LookupFailure
from noe_core.platforms_file import StaticPlatforms
from noe_core.registry.inspection import ImageInspector
from noe_core.registry.resolver import Resolver
from noe_core.registry.transport import make_session
from noe_core.registry_settings import RegistrySettings


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """Accepts TCP connections and never answers a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture
def resolver(registry: Any, silent_registry: str) -> Iterator[Resolver]:
    settings = RegistrySettings(insecure_registries=(registry.host, silent_registry))
    with make_session(settings) as session, Resolver(session, settings=settings) as res:
        yield res


def test_declared_platforms_win_and_cost_no_request(
    registry: Any, pushed_images: dict[str, Any], resolver: Resolver
) -> None:
    image = pushed_images["docker-manifest-list"].reference
    static = StaticPlatforms.from_mapping({image: ["linux/s390x"]}, "platforms.json")
    mark = registry.mark()
    inspection = ImageInspector(static=static, resolver=resolver).inspect([image], deadline=Deadline.after(5))
    assert inspection.lookups == {image: ImagePlatforms.of("linux/s390x")}
    assert inspection.declared == (image,)
    assert registry.requests_since(mark) == []


def test_without_resolver_an_undeclared_image_cannot_be_inspected() -> None:
    static = StaticPlatforms.from_mapping({"a:1": ["linux/amd64"]}, "platforms.json")
    inspection = ImageInspector(static=static).inspect(["a:1", "b:1"], deadline=Deadline.after(1))
    assert inspection.lookups["a:1"] == ImagePlatforms.of("linux/amd64")
    failure = inspection.lookups["b:1"]
    assert isinstance(failure, LookupFailure) and "platforms.json" in failure.reason


def test_each_image_gets_its_own_answer_or_failure_in_the_order_asked(
    pushed_images: dict[str, Any], registry: Any, resolver: Resolver
) -> None:
    images = [
        pushed_images["oci-single-amd64"].reference,
        pushed_images["windows-index"].reference,
        registry.ref("missing/repo", "x"),
        "Not A Reference",
    ]
    lookups = ImageInspector(resolver=resolver).inspect(images, deadline=Deadline.after(20)).lookups
    assert list(lookups) == images
    assert isinstance(lookups[images[0]], ImagePlatforms)
    assert isinstance(lookups[images[1]], ImagePlatforms)
    missing, invalid = lookups[images[2]], lookups[images[3]]
    assert isinstance(missing, LookupFailure) and "check the image name" in missing.reason
    assert isinstance(invalid, LookupFailure) and "invalid image reference" in invalid.reason


def test_lookups_without_a_deadline(pushed_images: dict[str, Any], resolver: Resolver) -> None:
    # noe mutate without --timeout inspects with Deadline.never(): no infinite timeout reaches threading.
    images = [pushed_images["oci-single-amd64"].reference, pushed_images["docker-single-arm64"].reference]
    lookups = ImageInspector(resolver=resolver).inspect(images, deadline=Deadline.never()).lookups
    assert lookups == {
        images[0]: ImagePlatforms(ImagePlatforms.of("linux/amd64").platforms, pushed_images["oci-single-amd64"].digest),
        images[1]: ImagePlatforms(
            ImagePlatforms.of("linux/arm64/v8").platforms, pushed_images["docker-single-arm64"].digest
        ),
    }


def test_a_stuck_registry_is_abandoned_at_the_deadline_and_answers_that_arrived_are_kept(
    pushed_images: dict[str, Any], resolver: Resolver, silent_registry: str
) -> None:
    good = pushed_images["docker-single-arm64"].reference
    stuck = f"{silent_registry}/team/app:1"
    started = time.monotonic()
    inspection = ImageInspector(resolver=resolver).inspect([good, stuck], deadline=Deadline.after(1.5))
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"inspection overran its 1.5 s deadline: {elapsed:.2f}s"
    arrived = inspection.lookups[good]
    assert isinstance(arrived, ImagePlatforms)
    assert [p.architecture for p in arrived.platforms] == ["arm64"]
    abandoned = inspection.lookups[stuck]
    assert isinstance(abandoned, LookupFailure) and "timed out after 1.5s" in abandoned.reason


class _NoThreads(concurrent.futures.Executor):
    """An executor that refuses work: whatever reaches it was not answered on the caller's thread."""

    submitted: list[Any]

    def __init__(self) -> None:
        self.submitted = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.submitted.append(args)
        raise RuntimeError("a warm lookup was handed to a lookup thread")


def test_warm_images_are_answered_on_the_callers_thread_without_a_request(
    registry: Any, pushed_images: dict[str, Any], resolver: Resolver
) -> None:
    by_tag = pushed_images["docker-manifest-list"].reference
    single = pushed_images["docker-single-arm64"]
    by_digest = f"{single.reference.rsplit(':', 1)[0]}@{single.digest}"
    cold = ImageInspector(resolver=resolver).inspect([by_tag, by_digest], deadline=Deadline.after(10))
    assert all(isinstance(lookup, ImagePlatforms) for lookup in cold.lookups.values()), cold
    mark = registry.mark()
    no_threads = _NoThreads()
    warm = ImageInspector(resolver=resolver, executor=no_threads).inspect(
        [by_tag, by_digest], deadline=Deadline.after(10)
    )
    assert warm.lookups == cold.lookups
    assert no_threads.submitted == [] and registry.requests_since(mark) == []


def test_cached_answers_only_what_is_fresh_in_memory(
    registry: Any, pushed_images: dict[str, Any], resolver: Resolver
) -> None:
    image = pushed_images["oci-index-attestations"].reference
    assert resolver.cached(image) is None  # never looked up
    assert resolver.cached("Not A Reference!") is None
    assert resolver.cached(f"{image.rsplit(':', 1)[0]}@sha256:{'0' * 64}") is None  # unknown digest
    resolved = resolver.resolve(image, deadline=Deadline.after(10))
    mark = registry.mark()
    assert resolver.cached(image) == resolved
    assert registry.requests_since(mark) == []
