"""The chart's ``controller.enabled`` and ``webhook.onLookupFailure``: objects, arguments, RBAC, hardening.

Rendered with the real helm (tests/support/helm.py), validated against the
Kubernetes schemas like the rest of the chart (tests/deploy/test_deploy.py), and the
controller's arguments parsed by the real ``noe`` parser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from noe_web.commands import build_parser
from tests.support.chart import CHART, EVERYTHING, KUBE_VERSIONS, NAMESPACE, RELEASE, find, flag_values, one, validate
from tests.support.helm import run_helm

# The flags both processes must get alike (policy and registry), as the chart passes them.
SHARED = (
    "--preferred-arch",
    "--cluster-schedulable-archs",
    "--system-os",
    "--match-node-labels",
    "--strict-namespaces",
    "--arch-tolerations",
    "--preference-mode",
    "--preferred-arch-weight",
    "--image-platforms",
    "--registry-proxies",
    "--private-registries",
    "--insecure-registries",
    "--registry-ca-file",
    "--docker-config",
    "--containerd-config",
    "--image-credential-provider-config",
    "--image-credential-provider-bin-dir",
    "--cache-ttl",
    "--negative-cache-ttl",
    "--verify-platform-manifests",
    "--cache-key-file",
    "--cache-timeout",
    "--cache-ca-file",
    "--log-level",
    "--pull-secrets-hint",
)


def render(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    out = run_helm(["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(path)]).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def pod_spec(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    deployments = [
        d for d in find(docs, "Deployment") if d["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    assert len(deployments) == 1
    spec: dict[str, Any] = deployments[0]["spec"]["template"]["spec"]
    return spec


def args_of(docs: list[dict[str, Any]], component: str) -> list[str]:
    return list(pod_spec(docs, component)["containers"][0]["args"])


def test_disabled_by_default_and_the_webhook_allows_on_lookup_failure(tmp_path: Path) -> None:
    docs = render({}, tmp_path)
    assert not [d for d in docs if d["metadata"]["name"].endswith("-controller")]
    assert flag_values(args_of(docs, "webhook"), "--on-lookup-failure") == ["allow"]


def test_enabled_controller_gets_the_webhooks_policy_and_registry_flags(tmp_path: Path) -> None:
    values = {
        **EVERYTHING,
        "webhook": {"onLookupFailure": "gate"},
        "controller": {"enabled": True, "replicas": 3, "dryRun": True, "gateTimeout": "10m"},
    }
    docs = render(values, tmp_path)
    for doc in docs:
        validate(doc, KUBE_VERSIONS[-1])
    serve, controller = args_of(docs, "webhook"), args_of(docs, "controller")
    assert serve[0] == "serve" and controller[0] == "controller"
    assert flag_values(serve, "--on-lookup-failure") == ["gate"]
    for flag in SHARED:
        assert flag_values(controller, flag) == flag_values(serve, flag), flag
    assert "--verify-platform-manifests" in controller
    assert flag_values(controller, "--gate-timeout") == ["10m"] and "--dry-run" in controller
    assert one(docs, "Deployment", "noe-controller")["spec"]["replicas"] == 3


def test_controller_arguments_are_accepted_by_noe_controller(tmp_path: Path) -> None:
    docs = render({"controller": {"enabled": True}, "insecureRegistries": ["registry.lab:5000"]}, tmp_path)
    ns = build_parser().parse_args(args_of(docs, "controller"))
    assert ns.command == "controller"
    assert (ns.lease_duration, ns.renew_deadline, ns.retry_period) == (15.0, 10.0, 2.0)
    assert ns.eviction_backoff == 3600.0 and ns.gate_timeout == 300.0 and ns.leader_elect is True
    assert ns.leader_election_id == "noe-controller"


def test_controller_rbac_is_what_the_issue_lists_and_never_deletes(tmp_path: Path) -> None:
    docs = render({"controller": {"enabled": True}}, tmp_path)
    rules = {
        (tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"])
        for r in one(docs, "ClusterRole", "noe-controller")["rules"]
    }
    assert rules == {
        (("",), ("pods",)): {"get", "list", "watch", "patch"},
        (("",), ("pods/eviction",)): {"create"},
        (("",), ("pods/log",)): {"get"},
        (("",), ("nodes",)): {"get", "list", "watch"},
        (("",), ("events",)): {"create"},
        (("",), ("secrets",)): {"get"},
        # placement policies: watched as the webhook watches them; the leader writes their status
        (("",), ("namespaces",)): {"get", "list", "watch"},
        (("arch.noe.adevinta.com",), ("clusterplacementpolicies", "placementpolicies")): {"list", "watch"},
        (("arch.noe.adevinta.com",), ("clusterplacementpolicies/status", "placementpolicies/status")): {"patch"},
    }
    role = one(docs, "Role", "noe-controller")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert {res for r in role["rules"] for res in r["resources"]} == {"leases", "configmaps"}
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named and named[0]["resourceNames"] == ["noe-controller"]
    # learning: the one ConfigMap, created once and then read and replaced by name
    assert {(tuple(r["resources"]), tuple(r.get("resourceNames", ())), tuple(r["verbs"])) for r in role["rules"]} >= {
        (("configmaps",), (), ("create",)),
        (("configmaps",), ("noe-learned-platforms",), ("get", "update")),
    }
    binding = one(docs, "ClusterRoleBinding", "noe-controller")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "noe-controller", "namespace": NAMESPACE}]
    assert pod_spec(docs, "controller")["serviceAccountName"] == "noe-controller"


def test_controller_rbac_reads_and_replaces_only_its_eviction_record_by_name(tmp_path: Path) -> None:
    """The eviction back-off every leader reads (noe_web/controller/eviction_record.py): one ConfigMap, by name."""
    docs = render({"controller": {"enabled": True}}, tmp_path)
    for doc in docs:
        validate(doc, KUBE_VERSIONS[-1])
    role = one(docs, "Role", "noe-controller")
    configmap_rules = sorted(
        (tuple(r.get("resourceNames", ())), tuple(r["verbs"]))
        for r in role["rules"]
        if r["resources"] == ["configmaps"]
    )
    assert configmap_rules == [
        ((), ("create",)),
        ((), ("list", "watch")),  # the learned platforms, watched as the webhook watches them
        (("noe-evictions",), ("get", "update")),
        (("noe-learned-platforms",), ("get", "update")),
    ]
    assert not [r for r in one(docs, "ClusterRole", "noe-controller")["rules"] if "configmaps" in r["resources"]]


def test_policy_reports_add_their_flags_and_only_their_rbac(tmp_path: Path) -> None:
    values = {"controller": {"enabled": True, "policyReports": {"enabled": True, "target": "arm64", "interval": "5m"}}}
    docs = render(values, tmp_path)
    for doc in docs:
        validate(doc, KUBE_VERSIONS[-1])
    args = args_of(docs, "controller")
    ns = build_parser().parse_args(args)
    assert ns.policy_reports is True and ns.target == "arm64" and ns.policy_report_interval == 300.0
    rules = one(docs, "ClusterRole", "noe-controller")["rules"]
    assert rules[-1] == {
        "apiGroups": ["wgpolicyk8s.io"],
        "resources": ["policyreports"],
        "verbs": ["get", "create", "update"],
    }
    off = render({"controller": {"enabled": True}}, tmp_path)
    assert "--policy-reports" not in args_of(off, "controller")
    assert not [r for r in one(off, "ClusterRole", "noe-controller")["rules"] if "wgpolicyk8s.io" in r["apiGroups"]]


def test_controller_pod_is_hardened_like_the_webhook(tmp_path: Path) -> None:
    docs = render({"controller": {"enabled": True}}, tmp_path)
    webhook, controller = pod_spec(docs, "webhook"), pod_spec(docs, "controller")
    assert controller["securityContext"] == webhook["securityContext"]
    assert controller["containers"][0]["securityContext"] == webhook["containers"][0]["securityContext"]
    assert controller["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    probes = controller["containers"][0]
    assert probes["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
