"""One edit session per placement: copies of the placement fields only, the earlier placement withdrawn first."""

from __future__ import annotations

import copy
import json

from noe_core import testing
from noe_core.k8s.workload import PLACEMENT_ANNOTATION, read_workload
from noe_core.placement.session import PlacementSession


def test_only_the_placement_fields_are_copied_and_the_input_is_never_edited() -> None:
    pod = testing.pod(["a:1"], node_selector={"disk": "ssd"}, tolerations=[{"key": "k", "operator": "Exists"}])
    pod["metadata"]["annotations"] = {"note": "x"}
    sent = copy.deepcopy(pod)
    session = PlacementSession.of(read_workload(pod, "Pod"))
    assert session.spec == {"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k", "operator": "Exists"}]}
    assert session.meta_edits.doc == {}  # a pod's annotations are never edited, so never copied
    session.spec_edits.set(("nodeSelector", "kubernetes.io/arch"), "arm64")
    assert pod == sent
    assert session.operations() == ({"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "arm64"},)


def test_the_architecture_selection_is_read_once_from_the_session() -> None:
    assert PlacementSession.of(read_workload(testing.pod(["a:1"]), "Pod")).selection is None
    pinned = testing.pod(["a:1"], node_selector={"kubernetes.io/arch": "arm64"})
    assert PlacementSession.of(read_workload(pinned, "Pod")).selection == "nodeSelector sets kubernetes.io/arch=arm64"


def test_a_daemonset_update_withdraws_noes_earlier_placement_first() -> None:
    ds = testing.daemonset(["a:1"], node_selector={"kubernetes.io/arch": "arm64"})
    ds["spec"]["template"]["metadata"]["annotations"] = {
        PLACEMENT_ANNOTATION: json.dumps({"nodeSelector": "arm64"}),
        "keep": "me",
    }
    workload = read_workload(ds, "DaemonSet")
    fresh = PlacementSession.of(workload)
    assert fresh.withdrawn and fresh.selection is None and "nodeSelector" not in fresh.spec
    assert fresh.meta_edits.doc == {"annotations": {"keep": "me"}}
    kept = PlacementSession.of(workload, withdraw_previous=False)
    assert not kept.withdrawn and kept.selection == "nodeSelector sets kubernetes.io/arch=arm64"
