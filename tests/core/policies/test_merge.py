"""Which settings a pod gets: flags, then matching cluster policies, then the namespace's own (docs/policies.md)."""

from __future__ import annotations

from typing import Any

from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.policies import PolicySet, merge, read_policy
from noe_core.policies.merge import NAMESPACE_NAME_LABEL
from noe_core.policies.settings import NOTHING_SCHEDULABLE, ArchToleration, PolicySettings, WeightedArchitecture

FLAGS = PolicySettings(preferred_arch="amd64", schedulable_archs=frozenset({"amd64", "arm64", "ppc64le"}))


def policy(name: str, spec: dict[str, Any], namespace: str = "") -> Any:
    doc: dict[str, Any] = {
        "apiVersion": "arch.noe.adevinta.com/v1alpha1",
        "kind": "PlacementPolicy" if namespace else "ClusterPlacementPolicy",
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "spec": spec,
    }
    return read_policy(doc)


def settings_for(policies: list[Any], namespace: str = "team-a", ns_labels: Any = None, pod_labels: Any = None) -> Any:
    return PolicySet(policies).settings_for(
        FLAGS, namespace=namespace, namespace_labels=ns_labels or {}, pod_labels=pod_labels or {}
    )


def test_no_policy_leaves_the_flags() -> None:
    merged = settings_for([])
    assert merged.settings == FLAGS and merged.applied == () and merged.annotation == ""


def test_order_is_cluster_then_namespaced_each_by_priority_then_name() -> None:
    policies = [
        policy("z-low", {"priority": 1, "preferenceMode": "required"}, namespace="team-a"),
        policy("a-low", {"priority": 1}, namespace="team-a"),
        policy("b", {"priority": 5, "preferenceMode": "soft"}),
        policy("a", {"priority": 5}),
        policy("first", {"priority": 0}),
        policy("other-ns", {"priority": 0}, namespace="team-b"),
    ]
    merged = settings_for(policies)
    assert merged.annotation == (
        "ClusterPlacementPolicy/first,ClusterPlacementPolicy/a,ClusterPlacementPolicy/b,"
        "PlacementPolicy/team-a/a-low,PlacementPolicy/team-a/z-low"
    )
    assert merged.settings.preference_mode == "required"  # the last one that sets it wins
    assert merged.sources["preferenceMode"] == ("PlacementPolicy/team-a/z-low",)


def test_later_policies_replace_earlier_values() -> None:
    merged = settings_for(
        [
            policy(
                "base", {"preferredArchitectures": [{"architecture": "arm64", "weight": 80}], "matchNodeLabels": ["a"]}
            ),
            policy("team", {"preferredArchitectures": [{"architecture": "amd64", "weight": 30}]}, namespace="team-a"),
        ]
    )
    assert merged.settings.preferred == (WeightedArchitecture("amd64", 30),)
    assert merged.settings.match_node_labels == ("a",)
    assert merged.sources["matchNodeLabels"] == ("ClusterPlacementPolicy/base",)
    assert merged.sources["preferredArchitectures"] == ("PlacementPolicy/team-a/team",)


def test_an_empty_preference_list_removes_the_flag_preference() -> None:
    merged = settings_for([policy("none", {"preferredArchitectures": []})])
    assert merged.settings.preferred == ()


def test_schedulable_architectures_only_narrow() -> None:
    merged = settings_for(
        [
            policy("one", {"schedulableArchitectures": ["amd64", "arm64", "s390x"]}),
            policy("two", {"schedulableArchitectures": ["arm64", "amd64"]}, namespace="team-a"),
        ]
    )
    assert merged.settings.schedulable_archs == {"amd64", "arm64"}  # s390x is not in the flag: never widened
    assert merged.sources["schedulableArchitectures"] == (
        "--cluster-schedulable-archs",
        "ClusterPlacementPolicy/one",
        "PlacementPolicy/team-a/two",
    )
    any_arch = PolicySettings(preferred_arch="")
    alone = merge(any_arch, [policy("p", {"schedulableArchitectures": ["arm64"]})], namespace="x")
    assert alone.settings.schedulable_archs == {"arm64"}  # an empty flag list means any: the policy's list


def test_strict_is_sticky() -> None:
    strict_flags = PolicySettings(strict_namespaces=frozenset({"payments"}))
    lax = merge(strict_flags, [policy("lax", {"strict": False})], namespace="payments")
    assert "payments" in lax.settings.strict_namespaces
    made = settings_for([policy("strict", {"strict": True}), policy("lax", {"strict": False}, namespace="team-a")])
    assert "team-a" in made.settings.strict_namespaces
    assert made.sources["strict"] == ("ClusterPlacementPolicy/strict",)


def test_selectors_pick_namespaces_and_pods() -> None:
    policies = [
        policy("prod", {"namespaceSelector": {"matchLabels": {"env": "prod"}}, "onLookupFailure": "gate"}),
        policy("web", {"podSelector": {"matchLabels": {"app": "web"}}, "preferenceMode": "required"}),
        policy("by-name", {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "team-a"}}, "strict": True}),
    ]
    prod_web = settings_for(policies, ns_labels={"env": "prod"}, pod_labels={"app": "web"})
    assert (
        prod_web.annotation == "ClusterPlacementPolicy/by-name,ClusterPlacementPolicy/prod,ClusterPlacementPolicy/web"
    )
    assert prod_web.settings.on_lookup_failure == "gate" and prod_web.settings.preference_mode == "required"
    dev_db = settings_for(policies, namespace="team-b", ns_labels={"env": "dev"}, pod_labels={"app": "db"})
    assert dev_db.applied == () and dev_db.settings == FLAGS


def test_a_namespaced_policy_applies_only_in_its_namespace() -> None:
    policies = [policy("team", {"preferenceMode": "required"}, namespace="team-a")]
    assert settings_for(policies, namespace="team-b").applied == ()
    assert settings_for(policies, namespace="team-a").settings.preference_mode == "required"


def test_tolerations_replace() -> None:
    flags = PolicySettings(arch_tolerations=(ArchToleration("arm64", "arch", "arm64", "NoSchedule"),))
    merged = merge(flags, [policy("t", {"architectureTolerations": []})], namespace="x")
    assert merged.settings.arch_tolerations == ()


def test_image_platforms_layer_over_the_flag_file() -> None:
    flag_file = StaticPlatforms.from_mapping(
        {"corp/app:1": ["linux/amd64"], "corp/*": ["linux/s390x"], "other/*": ["linux/ppc64le"]}
    )
    merged = PolicySet(
        [
            policy("base", {"imagePlatforms": [{"image": "corp/app:*", "platforms": ["linux/arm64"]}]}),
            policy(
                "team",
                {
                    "imagePlatforms": [
                        {"image": "corp/app:1", "platforms": ["linux/riscv64"]},
                        {"image": "corp/*", "platforms": ["linux/386"]},
                    ]
                },
                namespace="team-a",
            ),
        ]
    ).settings_for(FLAGS, namespace="team-a", namespace_labels={}, pod_labels={}, declared=flag_file)
    declared = merged.declared
    assert declared is not None
    assert declared.get("corp/app:1") == ImagePlatforms.of("linux/riscv64")  # same exact key: the later source
    assert declared.get("corp/app:2") == ImagePlatforms.of("linux/386")  # later globs first
    assert declared.get("other/x:1") == ImagePlatforms.of("linux/ppc64le")  # the flag file's globs last
    flag_exact = PolicySet([policy("g", {"imagePlatforms": [{"image": "corp/*", "platforms": ["linux/arm"]}]})])
    only_glob = flag_exact.settings_for(FLAGS, namespace="n", namespace_labels={}, pod_labels={}, declared=flag_file)
    assert only_glob.declared is not None
    assert only_glob.declared.get("corp/app:1") == ImagePlatforms.of("linux/amd64")  # an exact key beats every glob


def test_the_rollout_of_the_last_policy_that_sets_one() -> None:
    merged = settings_for(
        [
            policy("a", {"rollout": {"architecture": "arm64", "percent": 10}}),
            policy("b", {"rollout": {"architecture": "arm64", "percent": 50}}, namespace="team-a"),
        ]
    )
    assert merged.rollout is not None and merged.rollout.percent == 50
    assert str(merged.rollout_source) == "PlacementPolicy/team-a/b"


def test_thousand_policies_are_indexed_by_namespace() -> None:
    policies = [policy(f"p{i}", {"priority": i % 7}, namespace=f"ns-{i % 100}") for i in range(1000)]
    policies += [policy(f"c{i}", {"namespaceSelector": {"matchLabels": {"team": str(i)}}}) for i in range(20)]
    policy_set = PolicySet(policies)
    merged = policy_set.settings_for(FLAGS, namespace="ns-3", namespace_labels={"team": "3"}, pod_labels={})
    assert len(merged.applied) == 11  # c3 and the ten policies of ns-3
    assert str(merged.applied[0]) == "ClusterPlacementPolicy/c3"
    assert len(policy_set) == 1020


def test_disjoint_schedulable_lists_leave_nothing_schedulable_never_any() -> None:
    merged = settings_for(
        [policy("amd", {"schedulableArchitectures": ["amd64"]}), policy("arm", {"schedulableArchitectures": ["arm64"]})]
    )
    assert merged.settings.schedulable_archs == NOTHING_SCHEDULABLE
    assert not merged.settings.is_schedulable("amd64") and not merged.settings.is_schedulable("arm64")
    outside_flags = settings_for([policy("s390x", {"schedulableArchitectures": ["s390x"]})])
    assert outside_flags.settings.schedulable_archs == NOTHING_SCHEDULABLE  # the flag has no s390x


def test_a_remembered_merge_is_the_merge_of_those_flags_namespace_and_policies() -> None:
    policies = [
        policy("web", {"podSelector": {"matchLabels": {"app": "web"}}, "preferenceMode": "required"}),
        policy("base", {"strict": False, "onLookupFailure": "gate"}),
    ]
    policy_set = PolicySet(policies)
    strict_flags = PolicySettings(strict_namespaces=frozenset({"payments"}))

    def merged(base: PolicySettings, namespace: str, **pod_labels: str) -> Any:
        return policy_set.settings_for(base, namespace=namespace, namespace_labels={}, pod_labels=pod_labels)

    first = merged(FLAGS, "team-a", app="web")
    again = merged(FLAGS, "team-a", app="web", pod="other")
    assert again is first  # same flags, namespace and policies: the merge is made once
    assert again.trail == "ClusterPlacementPolicy/base,ClusterPlacementPolicy/web"
    other_pods = merged(FLAGS, "team-a", app="db")  # other policies match: another merge
    assert other_pods.settings.preference_mode == "soft" and str(other_pods.applied[0]) == "ClusterPlacementPolicy/base"
    for base in (strict_flags, FLAGS, strict_flags):  # each flags value gets its own merge, every time
        for namespace in ("payments", "team-a"):
            got = merged(base, namespace, app="web")
            assert got == merge(base, policies[::-1], namespace=namespace)
            strict = namespace in got.settings.strict_namespaces
            assert strict == (base is strict_flags and namespace == "payments")


def test_the_remembered_merges_are_bounded() -> None:
    policy_set = PolicySet([policy("all", {"preferenceMode": "required"})])
    for i in range(5000):
        name = f"ns-{i}"
        got = policy_set.settings_for(FLAGS, namespace=name, namespace_labels={}, pod_labels={})
        assert got.applied and got.settings.preference_mode == "required"
    assert len(policy_set._merged) <= 4097
