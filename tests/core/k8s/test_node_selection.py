"""kube-scheduler's taint rules as noe reads them: which taints keep a pod off, written as kubectl writes them."""

from __future__ import annotations

from noe_core.k8s.node_selection import selects, taint_text, untolerated

TAINTS = [
    {"key": "arch", "value": "arm64", "effect": "NoSchedule"},
    {"key": "spot", "effect": "PreferNoSchedule"},
    {"key": "gone", "effect": "NoExecute"},
]


def test_only_untolerated_blocking_taints_keep_a_pod_off() -> None:
    assert untolerated([], TAINTS) == [TAINTS[0], TAINTS[2]]
    assert untolerated([{"key": "arch", "operator": "Exists"}], TAINTS) == [TAINTS[2]]
    assert untolerated([{"operator": "Exists"}], TAINTS) == []
    assert untolerated([{"key": "arch", "value": "amd64", "effect": "NoSchedule"}], TAINTS)[0] is TAINTS[0]


def test_taints_read_as_kubectl_writes_them() -> None:
    assert [taint_text(t) for t in TAINTS] == ["arch=arm64:NoSchedule", "spot:PreferNoSchedule", "gone:NoExecute"]


def test_selectors_and_required_terms_both_apply() -> None:
    spec = {
        "nodeSelector": {"pool": "a"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
                    ]
                }
            }
        },
    }
    assert selects(spec, {"pool": "a", "kubernetes.io/arch": "arm64"}, "n")
    assert not selects(spec, {"pool": "b", "kubernetes.io/arch": "arm64"}, "n")
    assert not selects(spec, {"pool": "a", "kubernetes.io/arch": "amd64"}, "n")
