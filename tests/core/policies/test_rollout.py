"""Rollout at admission (docs/policies.md "Rollout"): the cohort hash, the two groups, the label, rollback."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import fixed
from noe_core.k8s.object_meta import read_object_meta
from noe_core.policies.objects import read_policy, with_status
from noe_core.policies.rollout import ROLLOUT_LABEL, bucket, in_cohort, label_operations, workload_of
from noe_core.policies.settings import PolicySettings
from noe_core.util.json_patch import apply_patch

MULTI = testing.platforms(
    {"app:1": ["linux/amd64", "linux/arm64"], "three:1": ["linux/amd64", "linux/arm64", "linux/ppc64le"]}
)
ONE = testing.platforms({"amd-only:1": ["linux/amd64"], "arm-only:1": ["linux/arm64"]})
NODES = [testing.node("amd", "amd64"), testing.node("arm", "arm64"), testing.node("power", "ppc64le")]
FLAGS = PolicySettings()


# --- the hash, against values computed here from the contract's words -------------------------------
@pytest.mark.parametrize(
    ("uid", "expected"),
    [
        # int(sha256(uid).hexdigest()[:8], 16) % 100, worked out by hand from the digests' first 8 hex digits
        ("", int("e3b0c442", 16) % 100),  # sha256 of the empty string: e3b0c442 98fc1c14...
        ("abc", int("ba7816bf", 16) % 100),  # sha256("abc") = ba7816bf 8f01cfea... (FIPS 180-2 test vector)
    ],
)
def test_bucket_follows_the_contract_on_known_digests(uid: str, expected: int) -> None:
    assert bucket(uid) == expected


def test_known_digest_values_are_what_the_contract_gives() -> None:
    assert bucket("") == 3820012610 % 100 == 10
    assert bucket("abc") == 3128432319 % 100 == 19
    assert in_cohort("abc", 20) and not in_cohort("abc", 19)


def test_bucket_matches_an_independent_computation_over_many_uids() -> None:
    for index in range(2000):
        uid = str(uuid.UUID(int=index * 7919 + 1))
        digest = hashlib.sha256(uid.encode()).digest()
        assert bucket(uid) == int.from_bytes(digest[:4], "big") % 100


@pytest.mark.parametrize("percent", [0, 1, 10, 50, 90, 100])
def test_cohort_share_over_many_uids_is_the_percent(percent: int) -> None:
    uids = [str(uuid.UUID(int=i * 104729 + 17)) for i in range(10_000)]
    share = sum(in_cohort(uid, percent) for uid in uids) / len(uids)
    assert abs(share - percent / 100) < 0.015


# --- the admission -----------------------------------------------------------------------------------
def _admit(
    pod: dict[str, Any],
    spec: dict[str, Any],
    *,
    uid: str,
    lookups: Any = MULTI,
    status: dict[str, Any] | None = None,
    settings: PolicySettings = FLAGS,
    operation: str = "CREATE",
) -> Any:
    doc = testing.cluster_policy("move", spec)
    if status is not None:
        doc["status"] = status
    request = parse_admission_review(testing.admission_review(pod, operation, uid=uid))
    return admit(request, settings, fixed(lookups), policies=testing.policies(doc))


def _uid_in(group: str, percent: int) -> str:
    for index in range(1000):
        uid = f"uid-{index}"
        if in_cohort(uid, percent) == (group == "cohort"):
            return uid
    raise AssertionError("no uid")  # pragma: no cover


def _runs_on(obj: dict[str, Any]) -> set[str]:
    return {n["metadata"]["labels"]["kubernetes.io/arch"] for n in NODES if testing.schedulable(obj, n)}


ROLLOUT = {"rollout": {"architecture": "arm64", "percent": 30}}


def test_cohort_pod_runs_on_the_rollout_architecture_only_and_says_so() -> None:
    admission = _admit(testing.pod(["app:1"], labels={"app": "web"}), ROLLOUT, uid=_uid_in("cohort", 30))
    obj = admission.decision.obj
    assert _runs_on(obj) == {"arm64"}
    assert obj["metadata"]["labels"] == {"app": "web", ROLLOUT_LABEL: "arm64"}
    assert any("rollout of ClusterPlacementPolicy/move" in r and "cohort" in r for r in admission.decision.reasons)


def test_control_pod_stays_off_the_rollout_architecture() -> None:
    admission = _admit(testing.pod(["three:1"]), ROLLOUT, uid=_uid_in("control", 30))
    obj = admission.decision.obj
    assert _runs_on(obj) == {"amd64", "ppc64le"}
    assert obj["metadata"]["labels"] == {ROLLOUT_LABEL: "control"}


def test_the_group_follows_the_uid_hash_exactly() -> None:
    for index in range(200):
        uid = f"request-{index}"
        obj = _admit(testing.pod(["app:1"]), ROLLOUT, uid=uid).decision.obj
        expected = "arm64" if int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16) % 100 < 30 else "control"
        assert obj["metadata"]["labels"][ROLLOUT_LABEL] == expected
        assert _runs_on(obj) == ({"arm64"} if expected == "arm64" else {"amd64"})


@pytest.mark.parametrize(("percent", "runs_on"), [(0, {"amd64"}), (100, {"arm64"})])
def test_percent_0_keeps_pods_off_and_100_moves_them_all(percent: int, runs_on: set[str]) -> None:
    spec = {"rollout": {"architecture": "arm64", "percent": percent}}
    for index in range(30):
        assert _runs_on(_admit(testing.pod(["app:1"]), spec, uid=f"u{index}").decision.obj) == runs_on


@pytest.mark.parametrize("image", ["amd-only:1", "arm-only:1"])
def test_pods_whose_images_allow_one_architecture_are_untouched_by_the_rollout(image: str) -> None:
    for group in ("cohort", "control"):
        admission = _admit(testing.pod([image]), ROLLOUT, lookups=ONE, uid=_uid_in(group, 30))
        obj = admission.decision.obj
        assert ROLLOUT_LABEL not in obj["metadata"].get("labels", {})
        assert _runs_on(obj) == {image.split("-", maxsplit=1)[0] + "64"}
        assert admission.decision.rollout is None


def test_a_schedulable_filter_that_leaves_one_architecture_leaves_the_pod_alone() -> None:
    narrow = {**ROLLOUT, "schedulableArchitectures": ["amd64", "arm64"]}
    settings = PolicySettings(schedulable_archs=frozenset({"arm64"}))
    admission = _admit(testing.pod(["app:1"]), narrow, uid=_uid_in("control", 30), settings=settings)
    assert _runs_on(admission.decision.obj) == {"arm64"}
    assert ROLLOUT_LABEL not in admission.decision.obj["metadata"].get("labels", {})


def test_preferences_apply_within_the_group() -> None:
    spec = {**ROLLOUT, "preferredArchitectures": [{"architecture": "ppc64le", "weight": 50}]}
    obj = _admit(testing.pod(["three:1"]), spec, uid=_uid_in("control", 30)).decision.obj
    preferred = obj["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [p["preference"]["matchExpressions"][0]["values"] for p in preferred] == [["ppc64le"]]
    required = {
        **spec,
        "preferenceMode": "required",
        "preferredArchitectures": [{"architecture": "amd64", "weight": 9}],
    }
    cohort = _admit(testing.pod(["three:1"]), required, uid=_uid_in("cohort", 30)).decision.obj
    assert _runs_on(cohort) == {"arm64"}  # amd64 is outside the cohort: no nodeSelector pins it there
    assert "nodeSelector" not in cohort["spec"]


def test_daemonsets_pinned_pods_and_updates_are_not_subject_to_the_rollout() -> None:
    ds = _admit(testing.daemonset(["app:1"]), ROLLOUT, uid=_uid_in("cohort", 30)).decision.obj
    assert _runs_on(ds) == {"amd64", "arm64"}
    pinned = testing.pod(["app:1"], node_selector={"kubernetes.io/arch": "amd64"})
    admission = _admit(pinned, ROLLOUT, uid=_uid_in("cohort", 30))
    assert _runs_on(admission.decision.obj) == {"amd64"} and admission.decision.rollout is None
    assert ROLLOUT_LABEL not in admission.decision.obj["metadata"].get("labels", {})


def _deployment_pod(deployment: str = "web", template_hash: str = "6d4cf56db6") -> dict[str, Any]:
    pod = testing.pod(["app:1"], labels={"pod-template-hash": template_hash})
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = f"{deployment}-{template_hash}-"
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": f"{deployment}-{template_hash}",
            "uid": "u",
            "controller": True,
        }
    ]
    return pod


def _rolled_back(generation: int = 1, architecture: str = "arm64", workload: str = "Deployment/web") -> dict[str, Any]:
    entry = {"namespace": "default", "workload": workload, "architecture": architecture, "reason": "x", "time": "t"}
    return {"rollout": {"observedGeneration": generation, "rolledBack": [entry]}}


def test_workload_at_admission_is_the_top_owner() -> None:
    assert workload_of(read_object_meta(_deployment_pod())) == "Deployment/web"
    job_pod = testing.pod(["app:1"])
    job_pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "backup-28458840", "controller": True}]
    assert workload_of(read_object_meta(job_pod)) == "CronJob/backup"
    bare = testing.pod(["app:1"], name="lonely")
    assert workload_of(read_object_meta(bare)) == "Pod/lonely"


def test_a_rolled_back_workload_draws_as_percent_0() -> None:
    cohort = _uid_in("cohort", 30)
    back = _admit(_deployment_pod(), ROLLOUT, uid=cohort, status=_rolled_back()).decision
    assert _runs_on(back.obj) == {"amd64"}
    assert back.obj["metadata"]["labels"][ROLLOUT_LABEL] == "control"
    assert any("Deployment/web rolled back: percent 0" in r for r in back.reasons)
    # another workload of the same policy still rolls out
    other = _admit(_deployment_pod("api"), ROLLOUT, uid=cohort, status=_rolled_back()).decision
    assert _runs_on(other.obj) == {"arm64"}


@pytest.mark.parametrize(
    "status", [_rolled_back(generation=0), _rolled_back(architecture="ppc64le"), {"rollout": {"rolledBack": "x"}}, {}]
)
def test_a_rollback_of_another_generation_or_architecture_is_void(status: dict[str, Any]) -> None:
    back = _admit(_deployment_pod(), ROLLOUT, uid=_uid_in("cohort", 30), status=status).decision
    assert _runs_on(back.obj) == {"arm64"}


def test_status_read_again_for_the_same_generation() -> None:
    policy = read_policy(testing.cluster_policy("move", ROLLOUT))
    assert policy.rollout is not None and policy.rollout.rolled_back == frozenset()
    updated = with_status(policy, _rolled_back())
    assert updated.rollout is not None and updated.rollout.rolled_back == {("default", "Deployment/web")}
    assert with_status(updated, {}).rollout == policy.rollout


def test_label_is_added_beside_existing_labels_and_inside_metadata_created_earlier() -> None:
    pod = testing.pod(["app:1"], labels={"a": "b"})
    ops = label_operations(read_object_meta(pod), "arm64", ())
    assert apply_patch(pod, ops)["metadata"]["labels"] == {"a": "b", ROLLOUT_LABEL: "arm64"}
    bare: dict[str, Any] = {"kind": "Pod", "spec": {}}
    first = [
        {"op": "add", "path": "/metadata", "value": {}},
        {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
    ]
    patched = apply_patch(bare, [*first, *label_operations(read_object_meta(bare), "control", first)])
    assert patched["metadata"] == {"annotations": {"x": "y"}, "labels": {ROLLOUT_LABEL: "control"}}


def test_an_existing_rollout_label_is_replaced_by_the_drawn_group() -> None:
    pod = testing.pod(["app:1"], labels={ROLLOUT_LABEL: "arm64"})
    obj = _admit(pod, ROLLOUT, uid=_uid_in("control", 30)).decision.obj
    assert obj["metadata"]["labels"][ROLLOUT_LABEL] == "control" and _runs_on(obj) == {"amd64"}


def test_groups_keep_the_os_and_level_terms_of_a_mixed_cluster() -> None:
    """Rules 14-16 still hold inside a group: the cohort and the control pod each get only their part of the
    nodes every image runs on, with its OS and its x86-64 level."""
    mixed = PolicySettings(system_os="linux,windows", x86_64_levels="nfd")
    lookups = testing.platforms({"fast:1": ["linux/amd64/v3", "linux/arm64", "windows(10.0.20348.1)/amd64"]})
    nodes = {
        "linux-amd64-v2": testing.node("a2", "amd64", x86_64_level=2),
        "linux-amd64-v3": testing.node("a3", "amd64", x86_64_level=3),
        "linux-arm64": testing.node("r", "arm64"),
        "windows-amd64": testing.node("w", "amd64", "windows", windows_build="10.0.20348"),
        "windows-amd64-other-build": testing.node("w2", "amd64", "windows", windows_build="10.0.17763"),
    }

    def runs_on(group: str) -> set[str]:
        pod = testing.pod(["fast:1"])
        admission = _admit(pod, ROLLOUT, uid=_uid_in(group, 30), lookups=lookups, settings=mixed)
        assert admission.decision.allowed, admission.decision.message
        return {name for name, n in nodes.items() if testing.schedulable(admission.decision.obj, n)}

    assert runs_on("cohort") == {"linux-arm64"}
    assert runs_on("control") == {"linux-amd64-v3", "windows-amd64"}
