"""A pod's need: its images' offers intersected and the fewest terms, each case checked on a node grid by meaning."""

from __future__ import annotations

import itertools

from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.node_platform import NodePlatform
from noe_core.image.offer import Offer, PairOffer, PlatformScope
from noe_core.placement.needs import NodeTerm, node_terms, shared

BUILDS = ("10.0.17763", "10.0.20348", "10.0.26100", "10.0.99999")
GRID = [
    NodePlatform(os_name, arch, build if os_name == "windows" else "", level)
    for os_name, arch, build, level in itertools.product(
        ("linux", "windows"), ("amd64", "arm64", "arm"), BUILDS, (1, 2, 3, 4)
    )
    if (arch == "amd64" or level == 1) and (os_name == "windows" or build == BUILDS[0])
]
BOTH = PlatformScope(("linux", "windows"), levels=True)


def _offer(scope: PlatformScope, *entries: str) -> Offer:
    return ImagePlatforms.of(*entries).offer(scope)


def _selects(term: NodeTerm, node: NodePlatform, scope: PlatformScope) -> bool:
    """A term's meaning, read the way kube-scheduler reads its expressions against the node's labels."""
    labels = node.labels()
    return all(labels.get(e["key"]) in e["values"] for e in term.expressions(scope))


def _check_meaning(images: list[list[str]], scope: PlatformScope) -> tuple[NodeTerm, ...]:
    """The terms of the images' shared offer select exactly the grid nodes where every image is usable."""
    common = shared([_offer(scope, *entries) for entries in images])
    terms = node_terms(common)
    for node in GRID:
        if node.os not in scope.oses or (scope.architectures and node.architecture not in scope.architectures):
            continue
        expected = all(ImagePlatforms.of(*entries).usable_on(node, levels=scope.levels) for entries in images)
        assert any(_selects(term, node, scope) for term in terms) == expected, node
    return terms


def test_the_common_case_is_one_plain_term() -> None:
    scope = PlatformScope()
    common = shared([_offer(scope, "linux/amd64", "linux/arm64/v8"), _offer(scope, "linux/amd64", "linux/arm64")])
    assert common.plain and common.architectures == ("amd64", "arm64")
    assert node_terms(common) == (NodeTerm(("linux",), ("amd64", "arm64")),)
    assert node_terms(common)[0].expressions(scope) == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}
    ]


def test_a_level_is_required_on_amd64_only_at_the_highest_lowest_level() -> None:
    terms = _check_meaning(
        [["linux/amd64/v3", "linux/amd64/v4", "linux/arm64"], ["linux/amd64/v2", "linux/arm64"]], BOTH
    )
    assert terms == (NodeTerm(("linux",), ("amd64",), level=3), NodeTerm(("linux",), ("arm64",)))
    expressions = terms[0].expressions(BOTH)
    assert {
        "key": "feature.node.kubernetes.io/cpu-cpuid.X86_64_V3",
        "operator": "In",
        "values": ["true"],
    } in expressions
    # a v1 entry (no variant) is enough for any amd64 node
    assert _check_meaning([["linux/amd64/v3", "linux/amd64"]], BOTH) == (NodeTerm(("linux",), ("amd64",)),)


def test_without_levels_variants_do_not_narrow() -> None:
    scope = PlatformScope(("linux",))
    assert _check_meaning([["linux/amd64/v3"], ["linux/amd64/v2"]], scope) == (NodeTerm(("linux",), ("amd64",)),)


def test_windows_builds_are_intersected() -> None:
    images = [
        ["windows(10.0.17763.5458)/amd64", "windows(10.0.20348.2227)/amd64", "linux/amd64"],
        ["windows(10.0.20348.1)/amd64", "windows(10.0.26100.1)/amd64", "linux/amd64", "linux/arm64"],
    ]
    terms = _check_meaning(images, BOTH)
    assert terms == (
        NodeTerm(("linux",), ("amd64",)),
        NodeTerm(("windows",), ("amd64",), ("10.0.20348",)),
    )
    # no build in common: the Windows pair is not shared
    assert _check_meaning([["windows(10.0.17763.1)/amd64"], ["windows(10.0.20348.1)/amd64"]], BOTH) == ()


def test_an_entry_without_os_version_matches_every_build() -> None:
    terms = _check_meaning([["windows/amd64"], ["windows(10.0.20348.1)/amd64"]], BOTH)
    assert terms == (NodeTerm(("windows",), ("amd64",), ("10.0.20348",)),)
    assert _check_meaning([["windows/amd64"], ["windows/amd64", "windows(10.0.20348.1)/amd64"]], BOTH) == (
        NodeTerm(("windows",), ("amd64",)),
    )


def test_builds_with_a_lower_level_than_any_build_get_their_own_term() -> None:
    # any build at v3, but 10.0.17763 has a v1 entry: two terms, the second without level
    images = [["windows/amd64/v3", "windows(10.0.17763.1)/amd64"], ["windows/amd64"]]
    terms = _check_meaning(images, BOTH)
    assert terms == (
        NodeTerm(("windows",), ("amd64",), (), 3),
        NodeTerm(("windows",), ("amd64",), ("10.0.17763",), 1),
    )
    offer = _offer(BOTH, *images[0])[("windows", "amd64")]
    assert offer == PairOffer(3, (("10.0.17763", 1),)) and offer.need("10.0.20348") == 3


def test_oses_share_a_term_when_they_share_everything_else() -> None:
    terms = _check_meaning([["amd64", "arm64"], ["linux/amd64", "windows/amd64", "linux/arm64", "windows/arm64"]], BOTH)
    assert terms == (NodeTerm(("linux", "windows"), ("amd64", "arm64")),)
    assert terms[0].expressions(BOTH)[0] == {
        "key": "kubernetes.io/os",
        "operator": "In",
        "values": ["linux", "windows"],
    }


def test_schedulable_architectures_and_other_oses_are_left_out() -> None:
    scope = PlatformScope(("linux",), frozenset({"arm64"}))
    assert _check_meaning([["linux/amd64", "linux/arm64", "windows/arm64", "darwin/arm64"]], scope) == (
        NodeTerm(("linux",), ("arm64",)),
    )
