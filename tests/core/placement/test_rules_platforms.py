"""Rules 3 and 14-17 by meaning: generated pods over OSes, Windows builds and x86-64 levels, on a node grid.

The contract: a pod may run on a node only if every image has an entry usable
there, and the patch must select exactly those nodes among the ones the cluster
can have. For random images (Linux and Windows entries, builds, amd64 levels,
entries without OS, artifacts, image volumes), random user terms and every
combination of ``--system-os`` / ``--x86-64-levels`` / schedulable list:

(a) an allowed, placed pod is schedulable on a grid node exactly when the
    original was and every inspected image has an entry usable there
    (:func:`noe_core.testing.runnable`, built on ``usable_on``);
(b) a deny happens exactly when no node of the cluster could run every image;
(c) every term noe writes selects some node the cluster can have (it says nothing
    the cluster cannot have), and no two of its terms carry the same requirement;
(d) the emitted operations give what the diff against the reference describes, and a
    DaemonSet UPDATE withdraws noe's earlier terms before deciding again.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_core import testing
from noe_core.image.image_platforms import ImagePlatforms, Lookups
from noe_core.image.node_platform import NodePlatform
from noe_core.image.platform import parse_platform
from noe_core.placement.pipeline import decide
from noe_core.policies.settings import PolicySettings
from noe_core.util.json_patch import apply_patch, make_patch
from tests.support.reference_policy import reference_object

BUILDS = ("10.0.17763", "10.0.20348", "10.0.26100")
ENTRIES = (
    "linux/amd64",
    "linux/amd64/v2",
    "linux/amd64/v3",
    "linux/amd64/v4",
    "linux/arm64/v8",
    "linux/arm/v7",
    "amd64",
    "amd64/v3",
    "windows/amd64",
    "windows(10.0.17763.5458)/amd64",
    "windows(10.0.20348.2227)/amd64",
    "windows(10.0.20348.100)/amd64/v3",
    "windows/amd64/v3",
    "windows(10.0.26100.1)/arm64",
    "windows/arm64",
)
IMAGES = [f"img{i}:1" for i in range(6)]


def _nodes() -> list[dict[str, Any]]:
    nodes = []
    for arch, level, zone in itertools.product(("amd64", "arm64", "arm"), (1, 2, 3, 4), ("z1", "z2")):
        if arch != "amd64" and level > 1:
            continue
        nodes.append(testing.node(f"l-{arch}-{level}-{zone}", arch, x86_64_level=level, labels={"zone": zone}))
        for build in (*BUILDS, "10.0.99999"):
            name = f"w-{arch}-{level}-{build}-{zone}"
            nodes.append(
                testing.node(name, arch, "windows", windows_build=build, x86_64_level=level, labels={"zone": zone})
            )
    return nodes


NODES = _nodes()


def _in_cluster(node: dict[str, Any], policy: PolicySettings) -> bool:
    platform = NodePlatform.from_labels(node["metadata"]["labels"])
    return platform.os in policy.system_os and policy.is_schedulable(platform.architecture)


def _pod_cluster(pod: dict[str, Any], policy: PolicySettings) -> list[dict[str, Any]]:
    """The cluster's nodes of the OS the pod's nodeSelector pins, when the cluster has several (else all)."""
    pinned = (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/os")
    nodes = [node for node in NODES if _in_cluster(node, policy)]
    if len(policy.system_os) > 1 and pinned in policy.system_os:
        nodes = [node for node in nodes if node["metadata"]["labels"]["kubernetes.io/os"] == pinned]
    return nodes


@st.composite
def lookups(draw: st.DrawFn) -> Lookups:
    out: dict[str, Any] = {}
    # entries every image shares, so that intersections are often wide and their terms non-trivial
    base = draw(st.lists(st.sampled_from(ENTRIES), min_size=1, max_size=4, unique=True))
    for image in IMAGES:
        kind = draw(st.sampled_from(["image"] * 6 + ["artifact", "failed"]))
        if kind == "artifact":
            out[image] = ImagePlatforms.artifact("application/vnd.example.config.v1+json")
        elif kind == "failed":
            out[image] = testing.platforms({image: "registry answered 503"})[image]
        else:
            # a family first (Linux levels, Windows builds, anything), so that conflicts are common
            pool = draw(st.sampled_from([ENTRIES, ENTRIES[:8], ENTRIES[8:], ENTRIES[:4] + ENTRIES[9:13]]))
            entries = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
            shared = base if draw(st.sampled_from([True, True, False])) else []
            out[image] = ImagePlatforms(tuple(parse_platform(e) for e in dict.fromkeys([*shared, *entries])))
    return out


ZONE_TERM = st.sampled_from(
    [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]},
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]},
        {},
    ]
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    terms = draw(st.lists(ZONE_TERM, max_size=2))
    selector = draw(
        st.sampled_from([None, {"zone": "z2"}, {"kubernetes.io/os": "windows"}, {"kubernetes.io/os": "linux"}])
    )
    affinity = (
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
        if terms
        else None
    )
    return testing.pod(
        images=draw(st.lists(st.sampled_from(IMAGES), min_size=1, max_size=2)),
        init_images=draw(st.lists(st.sampled_from(IMAGES), max_size=1)),
        volume_images=draw(st.lists(st.sampled_from(IMAGES), max_size=1)),
        node_selector=selector,
        affinity=affinity,
    )


POLICIES = st.builds(
    PolicySettings,
    preferred_arch=st.sampled_from(["amd64", "arm64", ""]),
    system_os=st.sampled_from([("linux",), ("windows",), ("linux", "windows")]),
    x86_64_levels=st.sampled_from(["off", "nfd"]),
    schedulable_archs=st.sampled_from([frozenset(), frozenset({"amd64", "arm64"}), frozenset({"arm64"})]),
)
BOUNDED = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decide(obj: dict[str, Any], found: Lookups, policy: PolicySettings, kind: str = "Pod", op: str = "CREATE") -> Any:
    if policy.preferred_arch and not policy.is_schedulable(policy.preferred_arch):
        policy = PolicySettings(**{**policy.__dict__, "preferred_arch": ""})
    return decide(obj, kind=kind, operation=op, namespace="default", lookups=found, settings=policy)


def _usable(pod: dict[str, Any], node: dict[str, Any], found: Lookups, policy: PolicySettings) -> bool:
    """Every inspected image runs on ``node`` (the original pod's own terms aside). An artifact used as a
    container's image is left out, as the policy leaves it out (with a warning: it cannot run anywhere)."""
    bare = testing.pod()
    bare["spec"] = {k: v for k, v in pod["spec"].items() if k not in ("nodeSelector", "affinity")}
    containers = {c["image"] for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])}
    judged = {
        i: v for i, v in found.items() if not (i in containers and isinstance(v, ImagePlatforms) and v.is_artifact)
    }
    return testing.runnable(bare, node, judged, x86_64_levels=policy.x86_64_levels)


def _placed_anything(pod: dict[str, Any], found: Lookups) -> bool:
    """Some image was inspected as a program, so noe placed the pod (not left it open)."""
    workload_images = {c["image"] for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])}
    volumes = {v["image"]["reference"] for v in pod["spec"].get("volumes", [])}
    return any(
        isinstance(found[image], ImagePlatforms) and not found[image].is_artifact for image in workload_images | volumes
    )


@BOUNDED
@given(pod=pods(), found=lookups(), policy=POLICIES)
def test_the_patch_selects_exactly_the_nodes_every_image_runs_on(
    pod: dict[str, Any], found: Lookups, policy: PolicySettings
) -> None:
    decision = _decide(pod, found, policy)
    cluster = [node for node in NODES if _in_cluster(node, policy)]
    if not decision.allowed:
        # the deny is about the images alone: no node the pod can have runs them all, whatever its terms
        assert decision.common == ()
        assert not any(_usable(pod, n, found, policy) for n in _pod_cluster(pod, policy))
        return
    if decision.common is None:
        assert not _placed_anything(pod, found)
        return
    assert any(_usable(pod, n, found, policy) for n in _pod_cluster(pod, policy))
    for node in cluster:
        expected = testing.schedulable(pod, node) and _usable(pod, node, found, policy)
        assert testing.schedulable(decision.obj, node) == expected, node["metadata"]["name"]


@BOUNDED
@given(pod=pods(), found=lookups(), policy=POLICIES)
def test_every_term_noe_writes_selects_a_node_the_cluster_can_have(
    pod: dict[str, Any], found: Lookups, policy: PolicySettings
) -> None:
    bare = {**pod, "spec": {k: v for k, v in pod["spec"].items() if k not in ("nodeSelector", "affinity")}}
    decision = _decide(bare, found, policy)
    if not decision.allowed or decision.common is None:
        return
    terms = decision.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    requirements = [
        frozenset(
            (e["key"], e["operator"], tuple(e["values"]))
            for e in term["matchExpressions"]
            if e["key"] != "kubernetes.io/arch"
        )
        for term in terms
    ]
    archs_by_requirement: dict[frozenset[Any], list[Any]] = {}
    for requirement, term in zip(requirements, terms, strict=True):
        archs_by_requirement.setdefault(requirement, []).append(term)
    for term in terms:
        alone = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
        probe = testing.pod(affinity=alone)
        assert any(testing.schedulable(probe, n) for n in NODES if _in_cluster(n, policy)), term
    # one term per distinct requirement of one OS set: the same (build, level) requirement is never split
    for requirement, same in archs_by_requirement.items():
        oses = [tuple(e["values"]) for t in same for e in t["matchExpressions"] if e["key"] == "kubernetes.io/os"]
        assert len(oses) == len(set(oses)), (requirement, same)
    if policy.system_os == ("linux",) and policy.x86_64_levels == "off":
        # today's behaviour: one term, kubernetes.io/arch alone
        assert terms == [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": list(decision.common)}]}
        ]


@BOUNDED
@given(pod=pods(), later=pods(), found=lookups(), policy=POLICIES)
def test_operations_and_daemonset_updates_agree_with_the_reference(
    pod: dict[str, Any], later: dict[str, Any], found: Lookups, policy: PolicySettings
) -> None:
    if policy.preferred_arch and not policy.is_schedulable(policy.preferred_arch):
        policy = PolicySettings(**{**policy.__dict__, "preferred_arch": ""})
    ds = testing.daemonset()
    ds["spec"]["template"]["spec"] = pod["spec"]
    for kind, obj in (("Pod", pod), ("DaemonSet", ds)):
        decision = decide(obj, kind=kind, operation="CREATE", namespace="default", lookups=found, settings=policy)
        expected = reference_object(obj, kind=kind, namespace="default", lookups=found, settings=policy)
        assert apply_patch(obj, list(decision.patch)) == apply_patch(obj, make_patch(obj, expected)) == expected
    placed = decision.obj
    placed["spec"]["template"]["spec"]["containers"] = later["spec"]["containers"]
    updated = decide(placed, kind="DaemonSet", operation="UPDATE", namespace="default", lookups=found, settings=policy)
    expected = reference_object(placed, kind="DaemonSet", namespace="default", lookups=found, settings=policy)
    assert apply_patch(placed, list(updated.patch)) == expected
    fresh = testing.daemonset()
    fresh["spec"]["template"]["spec"] = {**pod["spec"], "containers": later["spec"]["containers"]}
    created_fresh = decide(
        fresh, kind="DaemonSet", operation="CREATE", namespace="default", lookups=found, settings=policy
    )
    if created_fresh.common is None:
        return  # nothing inspected: noe's earlier placement is kept (a registry outage must not strip it)
    assert updated.allowed == created_fresh.allowed and updated.common == created_fresh.common
    if updated.allowed:
        # deciding afresh: the same meaning as a DaemonSet created with the new images
        template_after = updated.obj["spec"]["template"]
        template_fresh = created_fresh.obj["spec"]["template"]
        for node in NODES:
            assert testing.schedulable(template_after, node) == testing.schedulable(template_fresh, node)


# --- the rules, one case each ----------------------------------------------------------------------

CASES = {
    **testing.platforms(
        {
            "web:1": ["linux/amd64", "linux/arm64/v8"],
            "iis:1": ["windows(10.0.17763.5458)/amd64", "windows(10.0.20348.2227)/amd64"],
            "agent:1": ["windows(10.0.20348.2227)/amd64", "linux/amd64", "linux/arm64"],
            "fast:1": ["linux/amd64/v3", "linux/arm64"],
            "model:1": ["linux/arm64"],
        }
    ),
    "weights:1": ImagePlatforms.artifact("application/vnd.example.model.v1+json"),
}
MIXED = PolicySettings(system_os="linux,windows")


def _case(pod: dict[str, Any], policy: PolicySettings, namespace: str = "default") -> Any:
    return decide(pod, kind="Pod", operation="CREATE", namespace=namespace, lookups=CASES, settings=policy)


def _where(obj: dict[str, Any], policy: PolicySettings) -> set[str]:
    return {n["metadata"]["name"] for n in NODES if _in_cluster(n, policy) and testing.schedulable(obj, n)}


def _runs(pod: dict[str, Any], policy: PolicySettings) -> set[str]:
    return {
        n["metadata"]["name"]
        for n in NODES
        if _in_cluster(n, policy) and testing.runnable(pod, n, CASES, x86_64_levels=policy.x86_64_levels)
    }


def test_linux_only_drops_windows_entries_and_adds_no_os_requirement() -> None:
    decision = _case(testing.pod(images=["agent:1"]), PolicySettings())
    assert decision.common == ("amd64", "arm64")
    assert decision.obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}
        ]
    }


def test_mixed_cluster_requires_the_os_and_the_shared_builds() -> None:
    pod = testing.pod(images=["agent:1", "iis:1"])
    decision = _case(pod, MIXED)
    assert decision.allowed and decision.common == ("amd64",)
    assert (
        _where(decision.obj, MIXED)
        == _runs(pod, MIXED)
        == {"w-amd64-1-10.0.20348-z1", "w-amd64-1-10.0.20348-z2"}
        | {f"w-amd64-{level}-10.0.20348-{zone}" for level in (2, 3, 4) for zone in ("z1", "z2")}
    )
    assert {e["key"] for t in _terms(decision.obj) for e in t["matchExpressions"]} == {
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "node.kubernetes.io/windows-build",
    }


def test_a_windows_pod_pinned_by_its_node_selector_gets_no_os_term() -> None:
    pod = testing.pod(images=["iis:1"], node_selector={"kubernetes.io/os": "windows"})
    decision = _case(pod, MIXED)
    assert _terms(decision.obj) == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "node.kubernetes.io/windows-build", "operator": "In", "values": ["10.0.17763", "10.0.20348"]},
            ]
        }
    ]
    assert _where(decision.obj, MIXED) == _runs(pod, MIXED)
    linux_pinned = _case(testing.pod(images=["iis:1"], node_selector={"kubernetes.io/os": "linux"}), MIXED)
    assert not linux_pinned.allowed
    assert linux_pinned.message.startswith("no CPU architecture is supported by every image (OS linux)")


def test_windows_images_without_a_shared_build_are_denied_with_their_platforms() -> None:
    decision = _case(testing.pod(images=["iis:1", "agent:1"], init_images=["web:1"]), MIXED)
    assert not decision.allowed
    assert decision.message == (
        "no platform is supported by every image (OS linux, windows): iis:1: windows/amd64 build "
        "10.0.17763|10.0.20348; agent:1: linux/amd64, linux/arm64, windows/amd64 build 10.0.20348; "
        "web:1: linux/amd64, linux/arm64"
    )


def test_levels_are_required_on_amd64_only_with_nfd_and_warned_without() -> None:
    pod = testing.pod(images=["fast:1", "web:1"])
    nfd = PolicySettings(x86_64_levels="nfd")
    decision = _case(pod, nfd)
    assert decision.common == ("amd64", "arm64") and not decision.warnings
    assert _where(decision.obj, nfd) == _runs(pod, nfd)
    assert "l-amd64-2-z1" not in _where(decision.obj, nfd) and "l-amd64-3-z1" in _where(decision.obj, nfd)
    off = _case(pod, PolicySettings())
    assert off.warnings == ("fast:1 needs x86-64-v3 on amd64; not required (--x86-64-levels off)",)
    assert "l-amd64-1-z1" in _where(off.obj, PolicySettings())
    arm = _case(testing.pod(images=["fast:1", "model:1"]), PolicySettings())
    assert arm.common == ("arm64",) and not arm.warnings  # amd64 is not possible: nothing to warn about


def test_image_volumes_narrow_the_placement_and_artifacts_do_not() -> None:
    volume = _case(testing.pod(images=["web:1"], volume_images=["model:1"]), PolicySettings())
    assert volume.common == ("arm64",)
    artifact = _case(
        testing.pod(images=["web:1"], volume_images=["weights:1"]), PolicySettings(strict_namespaces={"prod"}), "prod"
    )
    assert artifact.allowed and artifact.common == ("amd64", "arm64") and not artifact.warnings
    as_container = _case(testing.pod(images=["web:1", "weights:1"]), PolicySettings())
    assert as_container.common == ("amd64", "arm64")
    assert as_container.warnings == ("weights:1 is an artifact, not a container image: it cannot run",)
    strict = _case(testing.pod(images=["web:1", "weights:1"]), PolicySettings(strict_namespaces={"prod"}), "prod")
    assert not strict.allowed and "weights:1 is an artifact" in strict.message


def test_a_daemonset_records_its_terms_and_an_update_withdraws_them() -> None:
    ds = testing.daemonset(images=["agent:1"])
    created = decide(ds, kind="DaemonSet", operation="CREATE", namespace="default", lookups=CASES, settings=MIXED)
    record = created.obj["spec"]["template"]["metadata"]["annotations"]["arch.noe.adevinta.com/placement"]
    assert '"terms"' in record
    changed = created.obj
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "web:1"
    updated = decide(changed, kind="DaemonSet", operation="UPDATE", namespace="default", lookups=CASES, settings=MIXED)
    assert _terms(updated.obj["spec"]["template"]) == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
            ]
        }
    ]


def _terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    terms: list[dict[str, Any]] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms
