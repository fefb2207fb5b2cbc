"""Newer-tag hints (noe_web.report.hints) through ``noe report``, against the real registry, counted on its log.

The registry is Debian's distribution behind tests/support/paging_proxy.py,
which pages tag lists as distribution 3 (and Docker Hub) do, so a list of 250+
tags takes three pages; manifests, blobs and auth are the real registry's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.cli import run_cli
from tests.support.cluster import generate, push_cluster_images
from tests.support.images import add_tags, push_oci_index, push_oci_single
from tests.support.paging_proxy import PagingProxy, start_paging_proxy
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.registry
PRICE_ARGS = ["--prices", "amd64=0.0464,arm64=0.0368"]


@pytest.fixture
def proxy(registry: RegistryServer) -> Iterator[PagingProxy]:
    with start_paging_proxy(registry) as paging:
        yield paging


def pod(name: str, images: list[str]) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": "1"}}} for i, image in enumerate(images)
    ]
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "shop"}, "spec": {"containers": containers}}


def shop(registry: RegistryServer, make_repo: Any) -> dict[str, str]:
    """Repositories, by role: tags with and without arm64, a long tag list, tags that are no versions."""
    repos = {role: make_repo("hints/") for role in ("app", "never", "nover", "pinned", "fine")}
    app = push_oci_single(registry, repos["app"], "1.0.0")
    add_tags(registry, app, ["1.0.1", *(f"0.{i // 10}.{i % 10}" for i in range(250))])  # older, and one newer amd64
    for tag in ("1.1.0", "1.2.0", "2.0.0", "latest", "1.1", "1.0.2-alpine"):
        push_oci_index(registry, repos["app"], tag)  # amd64 and arm64
    never = push_oci_single(registry, repos["never"], "1.0.0")
    add_tags(registry, never, [f"1.0.{i}" for i in range(1, 8)])  # seven newer tags without arm64
    push_oci_index(registry, repos["never"], "1.0.8")  # arm64 only at the eighth
    nightly = push_oci_single(registry, repos["nover"], "nightly")
    push_oci_index(registry, repos["nover"], "1.0.0")
    pinned = push_oci_single(registry, repos["pinned"], "1.0.0")
    push_oci_index(registry, repos["pinned"], "1.0.1")
    push_oci_index(registry, repos["fine"], "1.0.0")
    assert nightly.tag == "nightly"
    return repos | {"pinned_digest": pinned.digest}


def report(proxy: PagingProxy, tmp_path: Path, images: list[str], *args: str) -> tuple[int, dict[str, Any], str]:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"kind": "List", "items": [pod(f"p{i}", [image]) for i, image in enumerate(images)]}))
    code, out, err = run_cli(*["report", "-f", str(path), "--insecure-registries", "127.0.0.1:*", "-o", "json", *args])
    return code, json.loads(out) if out else {}, err


def manifest_tags(registry: RegistryServer, mark: int, repo: str) -> list[str]:
    """The tags (not digests) whose manifests were fetched from ``repo`` since ``mark``."""
    prefix = f"/v2/{repo}/manifests/"
    return [
        e.path[len(prefix) :]
        for e in registry.requests_since(mark, method="GET")
        if e.path.startswith(prefix) and not e.path[len(prefix) :].startswith("sha256:")
    ]


def tag_lists(registry: RegistryServer, mark: int, repo: str) -> int:
    return sum(urlsplit(e.path).path == f"/v2/{repo}/tags/list" for e in registry.requests_since(mark))


def test_hints_find_the_lowest_newer_tag_that_offers_the_target(
    registry: RegistryServer, proxy: PagingProxy, make_repo: Any, tmp_path: Path
) -> None:
    repos = shop(registry, make_repo)
    host = proxy.host
    images = {
        "app": f"{host}/{repos['app']}:1.0.0",
        "never": f"{host}/{repos['never']}:1.0.0",
        "nover": f"{host}/{repos['nover']}:nightly",
        "pinned": f"{host}/{repos['pinned']}:1.0.0@{repos['pinned_digest']}",
        "fine": f"{host}/{repos['fine']}:1.0.0",
    }
    mark = registry.mark()
    code, doc, err = report(proxy, tmp_path, list(images.values()))
    assert code == 0 and err == "", err
    steps = {s["image"]: s for s in doc["plan"]["steps"]}
    pinned = f"{host}/{repos['pinned']}@{repos['pinned_digest']}"
    assert set(steps) == {images["app"], images["never"], images["nover"], pinned}  # fine does not block
    assert steps[images["app"]]["upgrade"] == {"tag": "1.1.0", "image": f"{host}/{repos['app']}:1.1.0"}
    assert steps[images["never"]]["upgrade"] is None  # arm64 only at the 8th newer tag: past the 5 looked at
    assert steps[images["nover"]]["upgrade"] is None and steps[pinned]["upgrade"] is None

    # app: one tag walk (3 pages of 100 through the proxy), then 1.0.1 (amd64 only) and 1.1.0 (arm64): found
    assert len([p for p in proxy.tag_pages if repos["app"] in p]) == 3
    assert tag_lists(registry, mark, repos["app"]) == 3
    assert manifest_tags(registry, mark, repos["app"]) == ["1.0.0", "1.0.1", "1.1.0"]  # the pod's own, then 2
    # never: one walk, exactly five candidates, lowest first, and not one more
    assert tag_lists(registry, mark, repos["never"]) == 1
    assert manifest_tags(registry, mark, repos["never"]) == ["1.0.0", "1.0.1", "1.0.2", "1.0.3", "1.0.4", "1.0.5"]
    # no version tag, pinned by digest, not blocking: not one request beyond the image's own lookup
    for role in ("nover", "pinned", "fine"):
        assert tag_lists(registry, mark, repos[role]) == 0, role
    assert manifest_tags(registry, mark, repos["nover"]) == ["nightly"]
    assert manifest_tags(registry, mark, repos["pinned"]) == []  # by digest only
    assert manifest_tags(registry, mark, repos["fine"]) == ["1.0.0"]


def test_hints_are_in_the_table_and_the_page(
    registry: RegistryServer, proxy: PagingProxy, make_repo: Any, tmp_path: Path
) -> None:
    repo = make_repo("hints/")
    old = push_oci_single(registry, repo, "2.3.1")
    push_oci_index(registry, repo, "2.4.0")
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pod("p", [f"{proxy.host}/{repo}:2.3.1"])))
    page = tmp_path / "report.html"
    code, out, err = run_cli(*["report", "-f", str(path), "--insecure-registries", "127.0.0.1:*", "--html", str(page)])
    assert code == 0 and err == "" and old.tag == "2.3.1"
    plan = out.split("Rebuild plan toward arm64", 1)[1].splitlines()
    assert plan[1].split()[-1] == "UPGRADE" and plan[2].split()[1:] == [
        f"{proxy.host}/{repo}:2.3.1",
        "1",
        "1",
        "1",
        "-",
        "to",
        "2.4.0",
    ]
    assert f"<td>{proxy.host}/{repo}:2.3.1</td>" in page.read_text()
    assert "upgrade to 2.4.0 to unlock arm64" in page.read_text()


def test_no_hints_when_told_or_without_a_registry(
    registry: RegistryServer, proxy: PagingProxy, make_repo: Any, tmp_path: Path
) -> None:
    repo = make_repo("hints/")
    push_oci_single(registry, repo, "1.0.0")
    push_oci_index(registry, repo, "1.0.1")
    image = f"{proxy.host}/{repo}:1.0.0"
    mark = registry.mark()
    code, doc, err = report(proxy, tmp_path, [image], "--no-upgrade-hints")
    assert code == 0 and err == ""
    assert doc["plan"]["steps"][0]["upgrade"] is None
    assert tag_lists(registry, mark, repo) == 0 and manifest_tags(registry, mark, repo) == ["1.0.0"]
    platforms = tmp_path / "platforms.json"
    platforms.write_text(json.dumps({image: ["linux/amd64"]}))
    mark = registry.mark()
    code, doc, err = report(proxy, tmp_path, [image], "--platforms", str(platforms))
    assert code == 0 and doc["plan"]["steps"][0]["upgrade"] is None
    assert registry.requests_since(mark) == []


def test_a_registry_that_refuses_the_tag_list_is_a_note(
    registry: RegistryServer, proxy: PagingProxy, make_repo: Any, tmp_path: Path
) -> None:
    repo = make_repo("hints/")
    push_oci_single(registry, repo, "1.0.0")
    push_oci_index(registry, repo, "1.0.1")
    proxy.refuse_tags = 403
    code, doc, err = report(proxy, tmp_path, [f"{proxy.host}/{repo}:1.0.0"])
    assert code == 0  # the report is whole; only the hint is missing
    assert doc["plan"]["steps"][0]["upgrade"] is None
    assert err.startswith(f"noe report: no newer-tag hint for {proxy.host}/{repo}:1.0.0: registry {proxy.host} ")
    assert "(HTTP 403)" in err and len(err.splitlines()) == 1


def test_a_generated_cluster_on_the_registry_gets_its_hints(registry: RegistryServer, tmp_path: Path) -> None:
    """The generated cluster named on the real registry, with tests/support/cluster.py's NEWER_TAGS pushed."""
    cluster, _, truth = generate(tmp_path, pods=600, namespaces=12, registry=registry.host)
    push_cluster_images(registry, truth)
    mark = registry.mark()
    code, out, err = run_cli(
        *["report", "-f", str(cluster), "-o", "json", "--insecure-registries", "127.0.0.1:*", *PRICE_ARGS]
    )
    assert code == 0, err
    steps = {s["image"].split("/", 1)[1]: s["upgrade"] for s in json.loads(out)["plan"]["steps"]}
    assert steps == {
        "team/api:2.1": {"tag": "2.3", "image": f"{registry.host}/team/api:2.3"},
        "team/worker:1.0": {"tag": "1.1", "image": f"{registry.host}/team/worker:1.1"},
        "legacy/billing:9": {"tag": "10", "image": f"{registry.host}/legacy/billing:10"},
        "team/encoder:3": None,  # 4 to 8 looked at, none offers arm64; 9 never asked
        "team/init-migrate:5": None,  # no newer tag
        "org/win-only:1": None,
    }
    assert sorted(urlsplit(e.path).path for e in registry.requests_since(mark) if "/tags/list" in e.path) == sorted(
        f"/v2/{image.split(':')[0]}/tags/list" for image in steps
    )
    asked = {repo: manifest_tags(registry, mark, repo) for repo in ("team/api", "team/worker", "team/encoder")}
    assert asked == {
        "team/api": ["2.1", "2.2", "2.3"],
        "team/worker": ["1.0", "1.1"],
        "team/encoder": ["3", "4", "5", "6", "7", "8"],
    }
    assert manifest_tags(registry, mark, "legacy/billing") == ["9", "10"]
