"""Rules 3 and 14-18 through a real ``noe serve``: the new image shapes pushed to a real registry.

Two server processes: one with today's defaults (``--system-os linux``, levels
off), one for a mixed cluster with node-feature-discovery (``--system-os
linux,windows --x86-64-levels nfd``). Both talk to a real HTTPS Kubernetes API
peer, which serves the Nodes ``kubectl debug`` requests are checked against.
Answers are judged by meaning: the patched pod against a grid of Linux and
Windows nodes with builds and levels (``noe_core.testing.runnable``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from noe_core import testing
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.platform import parse_platform
from noe_core.util.printable import shorten
from tests.support.certs import CA, make_ca
from tests.support.cli import run_cli
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.images import WINDOWS_VERSIONS, PushedImage
from tests.support.noe_serve import NoeProcess, apply, post_review, start_noe, uid

pytestmark = [pytest.mark.e2e, pytest.mark.registry]

KUBE_TOKEN = "kube-platforms-token-" + uuid.uuid4().hex
BUILDS = tuple(v.rsplit(".", 1)[0] for v in WINDOWS_VERSIONS)
NODES = [
    *(testing.node(f"linux-amd64-v{level}", "amd64", x86_64_level=level) for level in (1, 2, 3, 4)),
    testing.node("linux-arm64", "arm64"),
    *(testing.node(f"win-{build}", "amd64", "windows", windows_build=build) for build in (*BUILDS, "10.0.26100")),
]


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    ca: CA = make_ca("platforms kube CA", tmp_path_factory.mktemp("platforms-kube-ca"))
    with start_fake_kube_api(ca, tokens=(KUBE_TOKEN,)) as api:
        for node in NODES:
            api.add_node(node)
        yield api


def _start(tmp_path_factory: pytest.TempPathFactory, kube_api: FakeKubeAPI, name: str, *args: str) -> NoeProcess:
    work = tmp_path_factory.mktemp(name)
    kubeconfig = kube_api.write_kubeconfig(work / "kubeconfig", token=KUBE_TOKEN)
    serving = make_ca(f"{name} serving CA", work / "ca")
    pair = serving.issue(["127.0.0.1", "localhost"], name="serving")
    common = ["--tls-cert-file", str(pair.cert_file), "--tls-key-file", str(pair.key_file)]
    common += ["--kubeconfig", str(kubeconfig), "--insecure-registries", "127.0.0.1:*", "--strict-namespaces", "strict"]
    common += ["--workers", "1", "--threads", "4", "--state-dir", str(work / "state")]
    return start_noe(work, [*common, *args], serving.ca_file)


@pytest.fixture(scope="module")
def today(tmp_path_factory: pytest.TempPathFactory, kube_api: FakeKubeAPI) -> Iterator[NoeProcess]:
    proc = _start(tmp_path_factory, kube_api, "noe-today")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, kube_api: FakeKubeAPI) -> Iterator[NoeProcess]:
    proc = _start(tmp_path_factory, kube_api, "noe-mixed", "--system-os", "linux,windows", "--x86-64-levels", "nfd")
    yield proc
    proc.stop()


def _lookups(images: dict[str, PushedImage]) -> dict[str, ImagePlatforms]:
    """What each pushed shape is, written from what was pushed (not asked of the registry)."""
    out: dict[str, ImagePlatforms] = {}
    for image in images.values():
        if image.artifact_type:
            out[image.reference] = ImagePlatforms.artifact(image.artifact_type)
            continue
        platforms = []
        for key in image.platforms:  # os/arch[/variant][:os.version]
            base, _, version = key.partition(":")
            os_name, rest = base.split("/", 1)
            platforms.append(parse_platform(f"{os_name}({version})/{rest}" if version else base))
        out[image.reference] = ImagePlatforms(tuple(platforms))
    return out


def _admit(noe: NoeProcess, obj: dict[str, Any], **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    review = testing.admission_review(obj, uid=uid(), **kw)
    with noe.session() as http:
        response = post_review(http, noe, review)
    return response, apply(review, response)


def _where(obj: dict[str, Any], oses: tuple[str, ...]) -> set[str]:
    """The grid nodes of the cluster's OSes the pod may be scheduled on."""
    return {
        n["metadata"]["name"]
        for n in NODES
        if n["metadata"]["labels"]["kubernetes.io/os"] in oses and testing.schedulable(obj, n)
    }


def _runs(obj: dict[str, Any], images: dict[str, PushedImage], *, levels: str, oses: tuple[str, ...]) -> set[str]:
    truth = _lookups(images)
    return {
        n["metadata"]["name"]
        for n in NODES
        if n["metadata"]["labels"]["kubernetes.io/os"] in oses and testing.runnable(obj, n, truth, x86_64_levels=levels)
    }


# ------------------------------------------------------------------------------ today's defaults


def test_today_a_v3_only_image_is_placed_as_before_with_a_warning(
    today: NoeProcess, pushed_images: dict[str, PushedImage]
) -> None:
    image = pushed_images["amd64-v3-index"]
    response, placed = _admit(today, testing.pod([image.reference], namespace="e2e-v3"))
    assert response["allowed"]
    assert response["warnings"] == [
        f"{shorten(image.reference, 48)} needs x86-64-v3 on amd64; not required (--x86-64-levels off)"
    ]
    terms = placed["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}
        ]
    }


def test_today_image_volumes_narrow_and_artifacts_do_not(
    today: NoeProcess, pushed_images: dict[str, PushedImage]
) -> None:
    multi, arm = pushed_images["docker-manifest-list"], pushed_images["docker-single-arm64"]
    artifact, index = pushed_images["artifact"], pushed_images["artifact-index"]
    response, placed = _admit(
        today, testing.pod([multi.reference], volume_images=[arm.reference, artifact.reference], namespace="strict")
    )
    assert response["allowed"] and "warnings" not in response
    assert _where(placed, ("linux",)) == {"linux-arm64"}
    response, placed = _admit(today, testing.pod([multi.reference], volume_images=[index.reference]))
    assert response["allowed"] and "warnings" not in response
    assert _where(placed, ("linux",)) == _runs(placed, pushed_images, levels="off", oses=("linux",))
    # an artifact as a container's image: a warning, or a deny in a strict namespace
    response, _ = _admit(today, testing.pod([multi.reference, artifact.reference]))
    assert response["warnings"] == [f"{artifact.reference} is an artifact, not a container image: it cannot run"]
    denied, _ = _admit(today, testing.pod([artifact.reference], namespace="strict"))
    assert not denied["allowed"] and "is an artifact (application/vnd.noe.test.model.v1)" in denied["status"]["message"]


def _debug(noe: NoeProcess, running: dict[str, Any], *images: str, namespace: str = "default") -> dict[str, Any]:
    after = copy.deepcopy(running)
    after["spec"]["ephemeralContainers"] = [
        {"name": f"debugger-{i}", "image": image, "stdin": True} for i, image in enumerate(images)
    ]
    response, placed = _admit(
        noe, after, operation="UPDATE", old_object=running, sub_resource="ephemeralcontainers", namespace=namespace
    )
    assert "patch" not in response and placed == after
    return response


def test_kubectl_debug_on_the_nodes_platform(
    today: NoeProcess, kube_api: FakeKubeAPI, pushed_images: dict[str, PushedImage]
) -> None:
    amd64_only = pushed_images["oci-single-amd64"].reference
    multi = pushed_images["docker-manifest-list"].reference
    running = testing.pod([multi], node_name="linux-arm64", namespace="e2e-debug")
    before = len([r for r in kube_api.requests_snapshot() if r.path.startswith("/api/v1/nodes/")])
    warned = _debug(today, running, amd64_only)
    assert warned["allowed"]
    assert warned["warnings"] == [
        f"{shorten(amd64_only, 48)} cannot run on node linux-arm64 (linux/arm64): no linux/arm64 entry"
    ]
    assert "warnings" not in _debug(today, running, multi)
    reads = [r for r in kube_api.requests_snapshot() if r.path.startswith("/api/v1/nodes/")][before:]
    assert [r.path for r in reads] == ["/api/v1/nodes/linux-arm64"]  # the second check came from the cache
    denied = _debug(
        today, {**running, "metadata": {**running["metadata"], "namespace": "strict"}}, amd64_only, namespace="strict"
    )
    assert not denied["allowed"] and denied["status"]["code"] == 403
    # a node the webhook cannot read: allowed, with a warning
    lost = _debug(today, testing.pod([multi], node_name="gone-node"), amd64_only)
    assert lost["allowed"] and lost["warnings"][0].startswith("cannot read node gone-node: ")


# ------------------------------------------------------------------------------ a mixed cluster with levels


@pytest.mark.parametrize(
    "shapes",
    [
        ["amd64-v3-index"],
        ["amd64-levels-index"],
        ["amd64-v3-index", "amd64-levels-index"],
        ["windows-builds-index"],
        ["windows-index"],
        ["windows-builds-index", "windows-index"],
        ["windows-index", "docker-manifest-list"],
        ["amd64-v3-index", "artifact-index"],
    ],
)
def test_mixed_cluster_places_exactly_where_every_image_runs(
    mixed: NoeProcess, pushed_images: dict[str, PushedImage], shapes: list[str]
) -> None:
    images = [pushed_images[s].reference for s in shapes]
    obj = testing.pod(images[:1], volume_images=images[1:], namespace="e2e-mixed")
    response, placed = _admit(mixed, obj)
    expected = _runs(obj, pushed_images, levels="nfd", oses=("linux", "windows"))
    if not expected:
        assert not response["allowed"] and "no platform is supported by every image" in response["status"]["message"]
        return
    assert response["allowed"], response
    assert _where(placed, ("linux", "windows")) == expected


def test_mixed_cluster_debug_reads_the_level_of_the_node(
    mixed: NoeProcess, pushed_images: dict[str, PushedImage]
) -> None:
    v3 = pushed_images["amd64-v3-index"].reference
    running = testing.pod([pushed_images["docker-manifest-list"].reference], node_name="linux-amd64-v2")
    warned = _debug(mixed, running, v3)
    assert warned["warnings"] == [
        f"{shorten(v3, 48)} cannot run on node linux-amd64-v2 (linux/amd64): no linux/amd64 entry"
    ]
    fine = _debug(mixed, {**running, "spec": {**running["spec"], "nodeName": "linux-amd64-v3"}}, v3)
    assert "warnings" not in fine


def test_inspect_prints_what_the_webhook_reads(pushed_images: dict[str, PushedImage]) -> None:
    code, out, _ = run_cli(
        "inspect", pushed_images["windows-builds-index"].reference, "--insecure-registries", "127.0.0.1:*"
    )
    assert code == 0
    assert all(f"windows({v})/amd64" in out for v in WINDOWS_VERSIONS)
    code, out, _ = run_cli("inspect", pushed_images["artifact-index"].reference, "--insecure-registries", "127.0.0.1:*")
    assert code == 0 and "Artifact:   application/vnd.noe.test.model.v1" in out
