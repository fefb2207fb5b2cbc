"""Generated cases of the one placement pipeline: placement policies, pods, learned entries and flags over a
table of registry answers, on a grid of nodes. The property tests of every path's agreement
(tests/core/placement/test_pipeline.py) and of the controller's remembered misplaced check
(tests/web/controller/test_misplaced.py) draw from them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from noe_core import testing
from noe_core.errors import RegistryError
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.policies.settings import PolicySettings
from noe_core.registry.lookup_service import LookupService
from noe_core.util.deadline import Deadline

ARCHES = ("amd64", "arm64", "ppc64le", "s390x")
DIGESTS = {image: "sha256:" + f"{index:x}" * 64 for index, image in enumerate(("multi:1", "amd-arm:1", "arm:1"), 1)}
REGISTRY: dict[str, ImagePlatforms | LookupFailure] = {
    "multi:1": ImagePlatforms.of(*(f"linux/{a}" for a in ARCHES), digest=DIGESTS["multi:1"]),
    "amd-arm:1": ImagePlatforms.of("linux/amd64", "linux/arm64", digest=DIGESTS["amd-arm:1"]),
    "arm:1": ImagePlatforms.of("linux/arm64", digest=DIGESTS["arm:1"]),
    "broken:1": LookupFailure("registry.corp answered 503", temporary=True),
    "gone:1": LookupFailure("registry.corp answered 404"),
}
IMAGES = sorted(REGISTRY)
NAMESPACES = {"team-a": {"env": "prod"}, "team-b": {"env": "dev"}}
NODES = [testing.node(f"n-{arch}", arch, labels={"team": "a"}) for arch in ARCHES]


class TableResolver:
    """The registry as a table (the lookup service's ``PlatformResolver``): nothing cached, every answer asked."""

    def resolve(self, reference: str, *, deadline: Deadline, keychain: object = None) -> ImagePlatforms:
        found = REGISTRY[reference]
        if isinstance(found, LookupFailure):
            raise RegistryError(found.reason, temporary=found.temporary)
        return found

    def cached(self, reference: str, *, keychain: object = None) -> ImagePlatforms | None:
        return None


SERVICE = LookupService(resolver=TableResolver())

# --- strategies ------------------------------------------------------------------------------------------

selectors = st.one_of(
    st.just(None),
    st.builds(lambda env: {"matchLabels": {"env": env}}, st.sampled_from(["prod", "dev"])),
)
pod_selectors = st.one_of(
    st.just(None),
    st.builds(lambda app: {"matchLabels": {"app": app}}, st.sampled_from(["web", "db"])),
)
declarations = st.lists(
    st.sampled_from(
        [
            {"image": "amd-arm:1", "platforms": ["linux/amd64"]},  # takes arm64 away
            {"image": "arm:*", "platforms": ["linux/arm64", "linux/amd64"]},  # adds amd64 (a glob)
            {"image": "gone:1", "platforms": ["linux/ppc64le", "linux/arm64"]},  # answers for a failing image
            {"image": "multi:1", "platforms": ["linux/s390x"]},
        ]
    ),
    max_size=2,
    unique_by=lambda d: d["image"],
)
SPEC = {
    "priority": st.integers(0, 3),
    "podSelector": pod_selectors,
    "preferredArchitectures": st.lists(
        st.fixed_dictionaries({"architecture": st.sampled_from(ARCHES), "weight": st.integers(1, 100)}),
        max_size=2,
        unique_by=lambda p: p["architecture"],
    ),
    "preferenceMode": st.sampled_from(["soft", "required"]),
    "schedulableArchitectures": st.lists(st.sampled_from(ARCHES), min_size=1, max_size=3, unique=True),
    "strict": st.booleans(),
    "onLookupFailure": st.sampled_from(["allow", "gate"]),
    "matchNodeLabels": st.just(["team"]),
    "imagePlatforms": declarations,
    "rollout": st.fixed_dictionaries({"architecture": st.sampled_from(ARCHES), "percent": st.integers(0, 100)}),
}


@st.composite
def policy_docs(draw: st.DrawFn) -> list[dict[str, Any]]:
    docs = []
    for index in range(draw(st.integers(0, 4))):
        spec = {k: v for k, v in draw(st.fixed_dictionaries({}, optional=SPEC)).items() if v is not None}
        if draw(st.booleans()):
            selector = draw(selectors)
            if selector is not None:
                spec["namespaceSelector"] = selector
            docs.append(testing.cluster_policy(f"c{index}", spec))
        else:
            docs.append(testing.placement_policy(f"p{index}", draw(st.sampled_from(sorted(NAMESPACES))), spec))
    return docs


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    labels = {"app": draw(st.sampled_from(["web", "db", "other"]))}
    if draw(st.integers(0, 3)) == 0:
        labels["team"] = "a"
    images = draw(st.lists(st.sampled_from(IMAGES), min_size=1, max_size=3, unique=True))
    pod = testing.pod(images[:1], images[1:], namespace=draw(st.sampled_from(sorted(NAMESPACES))), labels=labels)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "u", "controller": True}
    ]
    return pod


learned_entries = st.dictionaries(
    st.sampled_from(sorted(DIGESTS.values())), st.sets(st.sampled_from(ARCHES), min_size=1, max_size=2), max_size=2
)
flag_settings = st.builds(
    lambda schedulable, mode, on_failure: PolicySettings(
        preferred_arch="", schedulable_archs=frozenset(schedulable), preference_mode=mode, on_lookup_failure=on_failure
    ),
    st.sampled_from([(), ("amd64", "arm64"), ARCHES]),
    st.sampled_from(["soft", "required"]),
    st.sampled_from(["allow", "gate"]),
)
