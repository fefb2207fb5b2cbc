"""The terminal report (``noe report`` default output): the rollouts section."""

from __future__ import annotations

from typing import Any

from noe_core import ImagePlatforms, PolicySettings
from noe_core.k8s.owners import Owners
from noe_core.policies.rollout import ROLLOUT_LABEL
from noe_core.report.build import build_report
from noe_core.report.pods import read_pod
from noe_web.report.table import render_table


def rollout_pod(name: str, group: str) -> dict[str, Any]:
    labels = {"pod-template-hash": "5d8f", **({ROLLOUT_LABEL: group} if group else {})}
    owner = [{"kind": "ReplicaSet", "name": f"{name.split('-', maxsplit=1)[0]}-5d8f", "controller": True}]
    meta = {"name": name, "namespace": "shop", "labels": labels, "ownerReferences": owner}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "multi"}]}, "status": {"phase": "Running"}}


def test_workloads_in_a_rollout_are_listed_with_their_cohort_and_control_pods() -> None:
    pods = [rollout_pod("web-a", "arm64"), rollout_pod("web-b", "control"), rollout_pod("web-c", "control")]
    pods.append(rollout_pod("api-a", ""))
    lookups = {"multi": ImagePlatforms.of("linux/amd64", "linux/arm64")}
    table = render_table(build_report([read_pod(p, Owners()) for p in pods], lookups, PolicySettings()))
    section = table.split("Rollouts (pods by group):\n", 1)[1].splitlines()
    assert section[0].split() == ["NAMESPACE", "KIND", "NAME", "ROLLOUT", "TO", "COHORT", "PODS", "CONTROL", "PODS"]
    assert section[1].split() == ["shop", "Deployment", "web", "arm64", "1", "2"]
    assert [row for row in section if row.startswith("shop")] == [section[1]]  # api is in no rollout


def test_no_rollout_no_section() -> None:
    lookups = {"multi": ImagePlatforms.of("linux/amd64")}
    table = render_table(build_report([read_pod(rollout_pod("api-a", ""), Owners())], lookups, PolicySettings()))
    assert "Rollouts" not in table
