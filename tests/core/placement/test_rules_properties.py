"""Properties of the policy over random pods, checked against a grid of nodes by meaning.

(a) the mutated pod never admits a node whose architecture is outside ``common``;
(b) among nodes of an allowed architecture it admits exactly what the original
    admitted, plus the nodes whose architecture taint noe was told to tolerate;
(c) the patch applied to the original gives the mutated object, and the
    operations the policy emits give exactly the object the jsonpatch diff
    describes between the original and the copy-edit-compare reference
    (``tests/support/reference_policy.py``), for Pods and for DaemonSet
    templates at CREATE and at UPDATE over an earlier placement;
(d) mutating the result again changes nothing.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_core import testing
from noe_core.placement.pipeline import decide
from noe_core.policies.settings import PREFERRED_ARCH_LABEL, PolicySettings, parse_arch_tolerations
from noe_core.util.json_patch import apply_patch, make_patch
from tests.support.reference_policy import reference_object

ARCHS = ("amd64", "arm64", "arm", "ppc64le")
LOOKUPS = testing.platforms(
    {
        "multi:1": ["linux/amd64", "linux/arm64/v8", "linux/arm/v7", "linux/ppc64le", "unknown/unknown"],
        "amd-arm64:1": ["linux/amd64", "linux/arm64"],
        "arm-family:1": ["linux/arm64", "linux/arm/v7", "windows/amd64"],
        "amd64:1": ["linux/amd64"],
        "arm64:1": ["linux/arm64"],
        "broken:1": "registry answered 503",
    }
)
TOLERATIONS = parse_arch_tolerations("arm64=arch=arm64:NoSchedule,arm=arch=arm:NoSchedule")
TOLERATED_ARCHS = {t.arch for t in TOLERATIONS}


def _node(arch: str, zone: str | None, team: str | None, gen: str | None, tainted: bool) -> dict[str, Any]:
    labels = {k: v for k, v in (("zone", zone), ("team", team), ("gen", gen)) if v is not None}
    name = f"{arch}-{zone}-{team}-{gen}-{'t' if tainted else 'u'}"
    return testing.node(name, arch, labels=labels, taints=[f"arch={arch}:NoSchedule"] if tainted else [])


NODES = [
    _node(*combo)
    for combo in itertools.product(ARCHS, ("z1", "z2", None), ("a", "b", None), ("5", None), (False, True))
]


def _untainted(node: dict[str, Any]) -> dict[str, Any]:
    return {**node, "spec": {}}


KEYS = st.sampled_from(["zone", "team", "gen"])
VALUES = st.sampled_from(["z1", "z2", "a", "b", "5", "3"])


@st.composite
def expressions(draw: st.DrawFn) -> dict[str, Any]:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    key = draw(KEYS)
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    if operator in ("Gt", "Lt"):
        return {"key": "gen", "operator": operator, "values": [draw(st.sampled_from(["3", "5", "7"]))]}
    return {"key": key, "operator": operator, "values": draw(st.lists(VALUES, min_size=1, max_size=2, unique=True))}


ARCH_EXPRESSION = st.builds(
    lambda key, values: {"key": key, "operator": "In", "values": values},
    st.sampled_from(["kubernetes.io/arch", "beta.kubernetes.io/arch"]),
    st.lists(st.sampled_from(ARCHS), min_size=1, max_size=2, unique=True),
)
TERMS = st.lists(
    st.builds(
        lambda exprs, arch: {"matchExpressions": exprs + arch},
        st.lists(expressions(), max_size=2),
        st.lists(ARCH_EXPRESSION, max_size=1),
    )
    | st.just({}),
    max_size=3,
)
TOLERATION = st.sampled_from(
    [
        {"key": "arch", "operator": "Exists"},
        {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
        {"key": "arch", "operator": "Equal", "value": "ppc64le"},
        {"key": "other", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ]
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    labels = draw(
        st.dictionaries(
            st.sampled_from(["team", "zone", PREFERRED_ARCH_LABEL]),
            st.sampled_from(["a", "b", "z1", "amd64", "arm64", "arm"]),
            max_size=3,
        )
    )
    selector = draw(
        st.dictionaries(
            st.sampled_from(["zone", "team", "kubernetes.io/arch"]),
            st.sampled_from(["z1", "a", "amd64", "arm64"]),
            max_size=2,
        )
    )
    terms = draw(TERMS)
    affinity = (
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
        if terms
        else None
    )
    return testing.pod(
        images=draw(st.lists(st.sampled_from(sorted(LOOKUPS)), max_size=3)),
        init_images=draw(st.lists(st.sampled_from(sorted(LOOKUPS)), max_size=1)),
        labels=labels,
        node_selector=selector or None,
        affinity=affinity,
        tolerations=draw(st.lists(TOLERATION, max_size=2)) or None,
    )


POLICIES = st.builds(
    PolicySettings,
    preferred_arch=st.sampled_from(["amd64", "arm64", ""]),
    preference_mode=st.sampled_from(["soft", "required"]),
    arch_tolerations=st.sampled_from([(), TOLERATIONS]),
    match_node_labels=st.sampled_from([(), ("team",), ("team", "zone")]),
    preferred_arch_weight=st.integers(1, 100),
)

BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _arch(node: dict[str, Any]) -> str:
    return str(node["metadata"]["labels"]["kubernetes.io/arch"])


def _decide(obj: dict[str, Any], policy: PolicySettings) -> Any:
    return decide(obj, kind="Pod", operation="CREATE", namespace="default", lookups=LOOKUPS, settings=policy)


@BOUNDED
@given(pod=pods(), policy=POLICIES)
def test_never_admits_an_architecture_outside_common(pod: dict[str, Any], policy: PolicySettings) -> None:
    decision = _decide(pod, policy)
    if not decision.allowed:
        assert decision.obj == pod and not decision.changed
        return
    if decision.common is None:
        return
    for node in NODES:
        if testing.schedulable(decision.obj, node):
            assert _arch(node) in decision.common, node["metadata"]["name"]


@BOUNDED
@given(
    pod=pods(),
    policy=POLICIES.map(
        lambda p: PolicySettings(
            preferred_arch=p.preferred_arch, preference_mode=p.preference_mode, arch_tolerations=p.arch_tolerations
        )
    ),
)
def test_allowed_architectures_keep_the_original_placement(pod: dict[str, Any], policy: PolicySettings) -> None:
    decision = _decide(pod, policy)
    if not decision.allowed or decision.common is None:
        return
    pinned = (decision.obj["spec"].get("nodeSelector") or {}).get("kubernetes.io/arch")
    allowed = {pinned} if pinned else set(decision.common)
    tolerated = {t.arch for t in policy.arch_tolerations} & allowed
    for node in NODES:
        after = testing.schedulable(decision.obj, node)
        if _arch(node) not in allowed:
            assert not after
            continue
        reference = _untainted(node) if _arch(node) in tolerated else node
        assert after == testing.schedulable(pod, reference), node["metadata"]["name"]


@BOUNDED
@given(pod=pods(), policy=POLICIES)
def test_patch_reproduces_the_mutation_and_mutation_is_idempotent(pod: dict[str, Any], policy: PolicySettings) -> None:
    snapshot = repr(pod)
    decision = _decide(pod, policy)
    assert repr(pod) == snapshot
    assert apply_patch(pod, make_patch(pod, decision.obj)) == decision.obj
    assert decision.changed == (decision.obj != pod)
    if decision.allowed:
        again = _decide(decision.obj, policy)
        assert again.allowed and not again.changed and again.obj == decision.obj


@BOUNDED
@given(pod=pods(), policy=POLICIES)
def test_daemonset_template_gets_the_same_meaning(pod: dict[str, Any], policy: PolicySettings) -> None:
    ds = testing.daemonset()
    ds["spec"]["template"]["spec"] = pod["spec"]
    ds["spec"]["template"]["metadata"]["labels"] = pod["metadata"].get("labels", {})
    as_pod = _decide(pod, policy)
    as_ds = decide(ds, kind="DaemonSet", operation="UPDATE", namespace="default", lookups=LOOKUPS, settings=policy)
    assert as_ds.allowed == as_pod.allowed and as_ds.common == as_pod.common
    if as_pod.allowed:
        assert as_ds.obj["spec"]["template"]["spec"] == as_pod.obj["spec"]


def _check_against_the_diff(obj: dict[str, Any], kind: str, operation: str, policy: PolicySettings) -> Any:
    decision = decide(obj, kind=kind, operation=operation, namespace="default", lookups=LOOKUPS, settings=policy)
    expected = reference_object(obj, kind=kind, namespace="default", lookups=LOOKUPS, settings=policy)
    assert apply_patch(obj, list(decision.patch)) == apply_patch(obj, make_patch(obj, expected)) == expected
    assert decision.changed == (expected != obj)
    return decision


@BOUNDED
@given(pod=pods(), policy=POLICIES, spec_state=st.sampled_from(["object", "absent", "null"]))
def test_emitted_operations_give_what_the_diff_describes(
    pod: dict[str, Any], policy: PolicySettings, spec_state: str
) -> None:
    if spec_state != "object" and not pod["spec"].get("containers"):
        pod = {**pod, "spec": None} if spec_state == "null" else {k: v for k, v in pod.items() if k != "spec"}
    _check_against_the_diff(pod, "Pod", "CREATE", policy)


@BOUNDED
@given(pod=pods(), later=pods(), policy=POLICIES)
def test_daemonset_update_operations_give_what_the_diff_describes(
    pod: dict[str, Any], later: dict[str, Any], policy: PolicySettings
) -> None:
    ds = testing.daemonset()
    ds["spec"]["template"]["spec"] = pod["spec"]
    ds["spec"]["template"]["metadata"]["labels"] = pod["metadata"].get("labels", {})
    created = _check_against_the_diff(ds, "DaemonSet", "CREATE", policy)
    placed = created.obj
    placed["spec"]["template"]["spec"]["containers"] = later["spec"]["containers"]
    _check_against_the_diff(placed, "DaemonSet", "UPDATE", policy)
