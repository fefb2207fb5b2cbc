"""The placement-policy CRDs: generated once for both kinds, valid apiextensions.k8s.io/v1, installed by the
chart's crds subchart, and judging objects as noe does (schema + CEL here; noe_core.policies offline)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_core.errors import InvalidPolicy
from noe_core.policies import read_documents, read_policy
from tests.support.chart import CHART, KUBE_VERSIONS, find
from tests.support.crd_schema import problems, structural_errors, undescribed, version_schema
from tests.support.helm import run_helm
from tests.support.paths import EXAMPLES, ROOT

pytestmark = pytest.mark.deploy

CRD_DIR = CHART / "charts" / "crds" / "crds"
API = "arch.noe.adevinta.com/v1alpha1"


def crds() -> dict[str, dict[str, Any]]:
    loaded = (yaml.safe_load(path.read_text()) for path in sorted(CRD_DIR.glob("*.yaml")))
    return {doc["spec"]["names"]["kind"]: doc for doc in loaded}


CRDS = crds()


def policy(kind: str, spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if kind == "PlacementPolicy":
        meta["namespace"] = "team-a"
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def test_the_files_are_what_the_generator_writes() -> None:
    proc = subprocess.run(
        [sys.executable, "deploy/crds.py", "--check"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_both_kinds_with_status_printer_columns_and_scope() -> None:
    assert set(CRDS) == {"ClusterPlacementPolicy", "PlacementPolicy"}
    assert CRDS["ClusterPlacementPolicy"]["spec"]["scope"] == "Cluster"
    assert CRDS["PlacementPolicy"]["spec"]["scope"] == "Namespaced"
    for crd in CRDS.values():
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1alpha1" and version["storage"] and version["served"]
        assert version["subresources"] == {"status": {}}
        assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Priority", "Accepted", "Age"]
    cluster_spec = version_schema(CRDS["ClusterPlacementPolicy"])["properties"]["spec"]["properties"]
    namespaced_spec = version_schema(CRDS["PlacementPolicy"])["properties"]["spec"]["properties"]
    assert set(cluster_spec) - set(namespaced_spec) == {"namespaceSelector"}


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("kind", ["ClusterPlacementPolicy", "PlacementPolicy"])
def test_valid_apiextensions_v1(kind: str, version: str) -> None:
    kubernetes_validate.validate(CRDS[kind], version, strict=True)


@pytest.mark.parametrize("kind", ["ClusterPlacementPolicy", "PlacementPolicy"])
def test_structural_and_described(kind: str) -> None:
    schema = version_schema(CRDS[kind])
    assert list(structural_errors(schema)) == []
    assert list(undescribed(schema)) == []  # kubectl explain is the user's manual
    status = schema["properties"]["status"]["properties"]
    assert {"observedGeneration", "conditions", "rollout"} <= set(status)  # every field the controller writes


def test_the_chart_installs_them_unless_told_not_to() -> None:
    with_crds = [d for d in yaml.safe_load_all(run_helm(["template", "noe", str(CHART), "--include-crds"]).stdout) if d]
    names = sorted(d["metadata"]["name"] for d in find(with_crds, "CustomResourceDefinition"))
    assert names == ["clusterplacementpolicies.arch.noe.adevinta.com", "placementpolicies.arch.noe.adevinta.com"]
    off = run_helm(["template", "noe", str(CHART), "--include-crds", "--set", "crds.install=false"]).stdout
    assert "CustomResourceDefinition" not in off
    # Helm's convention: crds/ are applied at install, never rendered among the templates (so upgrades leave them)
    assert "CustomResourceDefinition" not in run_helm(["template", "noe", str(CHART)]).stdout


def test_the_examples_are_accepted_by_the_schema_and_by_noe() -> None:
    files = sorted((EXAMPLES / "policies").glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        found = read_documents(docs, path.name)
        assert found.rejected == (), found.rejected
        for doc in docs:
            if doc["kind"] in CRDS:
                assert problems(CRDS[doc["kind"]], doc) == [], (path.name, doc["metadata"]["name"])


REJECTED = [
    ({"priority": 1001}, "PriorityOutOfRange"),
    ({"priority": -3}, "PriorityOutOfRange"),
    ({"preferredArchitectures": [{"architecture": "arm64", "weight": 0}]}, "WeightOutOfRange"),
    ({"preferredArchitectures": [{"architecture": "m68k", "weight": 5}]}, "InvalidArchitecture"),
    ({"preferredArchitectures": [{"architecture": "arm64"}]}, "InvalidField"),
    (
        {"schedulableArchitectures": ["amd64"], "preferredArchitectures": [{"architecture": "arm64", "weight": 1}]},
        "PreferenceOutsideSchedulable",
    ),
    ({"schedulableArchitectures": []}, "InvalidField"),
    ({"preferenceMode": "hard"}, "InvalidField"),
    ({"onLookupFailure": "deny"}, "InvalidField"),
    ({"fallbackArchitecture": "m68k"}, "InvalidArchitecture"),
    ({"strict": "yes"}, "InvalidField"),
    ({"unknownField": 1}, "UnknownField"),
    ({"rollout": {"architecture": "arm64", "percent": 150}}, "PercentOutOfRange"),
    ({"rollout": {"architecture": "arm64"}}, "InvalidField"),
    ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "InvalidSelector"),
    ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}, "InvalidSelector"),
    ({"architectureTolerations": [{"architecture": "arm64", "key": "k", "effect": "Often"}]}, "InvalidField"),
    (
        {"architectureTolerations": [{"architecture": "arm64", "key": "k", "operator": "Exists", "value": "v"}]},
        "InvalidField",
    ),
]


@pytest.mark.parametrize(("spec", "reason"), REJECTED, ids=[r for _, r in REJECTED])
@pytest.mark.parametrize("kind", ["ClusterPlacementPolicy", "PlacementPolicy"])
def test_mistakes_fail_at_apply_and_in_noe(kind: str, spec: dict[str, Any], reason: str) -> None:
    doc = policy(kind, spec)
    assert problems(CRDS[kind], doc), "the API server would accept it"
    with pytest.raises(InvalidPolicy) as caught:
        read_policy(doc)
    assert caught.value.reason == reason


def test_aliases_pass_the_cross_field_rule_as_noe_normalises_them() -> None:
    spec = {
        "schedulableArchitectures": ["arm64", "x86_64"],
        "preferredArchitectures": [{"architecture": "aarch64", "weight": 9}],
    }
    doc = policy("ClusterPlacementPolicy", spec)
    assert problems(CRDS["ClusterPlacementPolicy"], doc) == []
    assert read_policy(doc).preferred_architectures is not None


def test_a_namespaced_policy_has_no_namespace_selector() -> None:
    doc = policy("PlacementPolicy", {"namespaceSelector": {}})
    assert problems(CRDS["PlacementPolicy"], doc)
    with pytest.raises(InvalidPolicy, match="namespaceSelector"):
        read_policy(doc)


ARCHES = st.sampled_from(
    ["amd64", "arm64", "aarch64", "x86_64", "s390x", "m68k", "", "arm 64", "AMD64", "arm64/v8", "i486", "armhf"]
)
SPECS = st.fixed_dictionaries(
    {},
    optional={
        "priority": st.integers(-5, 1005),
        "preferredArchitectures": st.lists(
            st.fixed_dictionaries({"architecture": ARCHES}, optional={"weight": st.integers(-1, 101)}), max_size=3
        ),
        "schedulableArchitectures": st.lists(ARCHES, max_size=3, unique=True),
        "preferenceMode": st.sampled_from(["soft", "required", "hard"]),
        "strict": st.sampled_from([True, False, "true"]),
        "onLookupFailure": st.sampled_from(["allow", "gate", "deny"]),
        "rollout": st.fixed_dictionaries({"architecture": ARCHES}, optional={"percent": st.integers(-1, 101)}),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=SPECS, kind=st.sampled_from(["ClusterPlacementPolicy", "PlacementPolicy"]))
def test_noe_refuses_whatever_the_schema_refuses(spec: dict[str, Any], kind: str) -> None:
    doc = policy(kind, spec)
    refused_by_schema = bool(problems(CRDS[kind], doc))
    try:
        read_policy(doc)
        refused_by_noe = False
    except InvalidPolicy:
        refused_by_noe = True
    if refused_by_schema:
        assert refused_by_noe, spec  # offline files are never more lenient than kubectl apply
    if not refused_by_noe:
        assert not refused_by_schema, spec
