"""The Helm chart, the plain manifests, the Dockerfile and the examples, checked offline.

helm is the real binary (Helm 4, from the PyPI wheel, tests/support/helm.py);
every rendered object is validated against the official Kubernetes schemas of
the oldest and newest supported versions with ``kubernetes-validate``; the
chart is checked against the code it deploys (``noe serve``'s parser, the API
calls of noe_web/kube/client.py and noe_web/commands/certs.py).
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chart import EVERYTHING, KUBE_VERSIONS, NAMESPACE, RELEASE, find, flag_values, one, validate
from tests.support.helm import helm_binary, run_helm
from tests.support.paths import ROOT

pytestmark = pytest.mark.deploy

CHART = ROOT / "deploy" / "helm" / "noe"
MANIFESTS = ROOT / "deploy" / "manifests"
EXAMPLES = ROOT / "examples"


# The documented combinations.
COMBINATIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "ha": {"ha": {"enabled": True}},
    "no-cert-manager": {"certManager": {"enabled": False}},
    "no-cert-manager-no-cronjob": {"certManager": {"enabled": False}, "certs": {"renewSchedule": ""}},
    "everything": EVERYTHING,
    "everything-no-cert-manager": {**EVERYTHING, "certManager": {"enabled": False}},
    "own-cluster-issuer": {"certManager": {"issuerRef": {"name": "vault", "kind": "ClusterIssuer"}}},
    "own-tls-secret": {
        "tls": {"existingSecret": "corp-noe-tls", "caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()}
    },
    "pull-secrets-in-two-namespaces": {
        "webhook": {"pullSecrets": {"namespaces": ["team-a", "team-b"]}},
        "controller": {"enabled": True},
    },
    "pull-secrets-off": {"webhook": {"pullSecrets": {"enabled": False}}, "controller": {"enabled": True}},
}

# values key -> the `noe serve` flag it becomes.
VALUE_FLAGS = {
    "preferredArch": "--preferred-arch",
    "schedulableArchitectures": "--cluster-schedulable-archs",
    "systemOS": "--system-os",
    "x86_64Levels": "--x86-64-levels",
    "matchNodeLabels": "--match-node-labels",
    "strictNamespaces": "--strict-namespaces",
    "archTolerations": "--arch-tolerations",
    "preferenceMode": "--preference-mode",
    "preferredArchWeight": "--preferred-arch-weight",
    "fallbackArch": "--fallback-arch",
    "imagePlatforms": "--image-platforms",
    "proxies": "--registry-proxies",
    "privateRegistries": "--private-registries",
    "insecureRegistries": "--insecure-registries",
    "registryCA": "--registry-ca-file",
    "kubeletConfig": "--image-credential-provider-config",
    "dockerConfigPathCandidates": "--docker-config",
    "containerdConfigPathCandidates": "--containerd-config",
    "cacheTTL": "--cache-ttl",
    "negativeCacheTTL": "--negative-cache-ttl",
    "verifyPlatformManifests": "--verify-platform-manifests",
    "cache": "--cache-key-file",  # and --cache-timeout, --cache-ca-file; the URL comes from a Secret
    "admissionDeadline": "--admission-deadline",
    "workers": "--workers",
    "threads": "--threads",
    "logLevel": "--log-level",
    "containerPort": "--bind",
    "gracefulTimeout": "--graceful-timeout",
    "webhook": "--on-lookup-failure",  # and webhook.pullSecrets -> --pull-secrets-hint
}
# values keys that shape Kubernetes objects rather than `noe serve`'s flags.
NOT_FLAGS = {
    "global",
    "crds",
    "nameOverride",
    "fullnameOverride",
    "image",
    "imagePullSecrets",
    "extraArgs",
    "extraEnv",
    "failurePolicy",
    "timeoutSeconds",
    "reinvocationPolicy",
    "optOutLabel",
    "excludedNamespaces",
    "replicas",
    "ha",
    "resources",
    "podSecurityContext",
    "securityContext",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "service",
    "metrics",
    "serviceMonitor",
    "clusterDomain",
    "certManager",
    "certs",
    "pod",
    "deployment",
    "serviceaccount",
    "clusterrole",
    "clusterrolebinding",
    "role",
    "rolebinding",
    "mutatingwebhookconfiguration",
    "issuer",
    "certificate",
    "poddisruptionbudget",
    "certsjob",
    "configmap",
    "nodeCredentials",
    "podDisruptionBudget",
    "topologySpread",
    "hostNetwork",
    "dnsPolicy",
    "extraVolumes",
    "extraVolumeMounts",
    "serviceAccount",
    "podMonitor",
    "prometheusRule",
    "grafanaDashboard",
    "tracing",  # OTEL_* variables, not flags (tests/deploy/test_chart_tracing.py)
    "networkPolicy",
    "test",
    "namespaceSelector",
    "objectSelector",
    "matchConditions",
    "preStopSleepSeconds",
    "terminationGracePeriodSeconds",
    "controller",  # the controller's own Deployment (tests/deploy/test_deploy_controller.py)
    "tls",  # your own serving certificate (tests/deploy/test_chart_certificates.py)
}


# --- rendering -------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def helm_available() -> Path:
    """Fails (never skips) with the install command when the helm wheel is missing."""
    return helm_binary()


def _values_file(values: dict[str, Any], directory: Path, name: str) -> Path:
    path = directory / f"{name}.values.json"
    path.write_text(json.dumps(values))
    return path


@cache
def render(name: str) -> list[dict[str, Any]]:
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"noe-deploy-tests-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    values = _values_file(COMBINATIONS[name], scratch, name)
    out = run_helm(["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values)]).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The webhook's Deployment (the controller, when enabled, has its own)."""
    return one([d for d in docs if d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"], "Deployment")


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = deployment(docs)["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "webhook")


def serve_args(docs: list[dict[str, Any]]) -> list[str]:
    args = container(docs)["args"]
    assert args[0] == "serve"
    return list(args[1:])


def pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for d in docs:
        if d["kind"] in ("Deployment", "Job", "DaemonSet"):
            specs.append((f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]))
        elif d["kind"] == "CronJob":
            specs.append((f"CronJob/{d['metadata']['name']}", d["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return specs


# --- helm lint / template and schemas ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_helm_lint_strict(name: str, tmp_path: Path) -> None:
    values = _values_file(COMBINATIONS[name], tmp_path, name)
    proc = run_helm(["lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", str(values)])
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_rendered_objects_validate(name: str, version: str) -> None:
    docs = render(name)
    assert docs
    for doc in docs:
        validate(doc, version)


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _kube_files() -> list[Path]:
    files = sorted(MANIFESTS.glob("*.yaml")) + sorted(EXAMPLES.glob("*.yaml"))
    return [f for f in files if f.is_file()]


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("path", _kube_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_manifest_and_example_files_validate(path: Path, version: str) -> None:
    docs = _yaml_docs(path)
    assert docs, f"{path} holds no object"
    for doc in docs:
        validate(doc, version)


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", ["admission-review.json", "admission-review-v1beta1.json"])
def test_admission_review_examples_carry_a_valid_pod(name: str, version: str) -> None:
    review = json.loads((EXAMPLES / name).read_text())
    assert review["kind"] == "AdmissionReview"
    assert review["apiVersion"] == ("admission.k8s.io/v1" if "v1beta1" not in name else "admission.k8s.io/v1beta1")
    request = review["request"]
    assert request["operation"] == "CREATE" and request["uid"]
    validate(request["object"], version)
    # The README's curl line sends the multi-arch pod of examples/pod.yaml.
    assert request["object"] == _yaml_docs(EXAMPLES / "pod.yaml")[0]


def test_plain_manifests_are_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "render.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_plain_manifests_start_with_their_namespace() -> None:
    for path in MANIFESTS.glob("*.yaml"):
        docs = _yaml_docs(path)
        assert docs[0]["kind"] == "Namespace"
        namespaced = [d for d in docs if "namespace" in d["metadata"]]
        assert {d["metadata"]["namespace"] for d in namespaced} == {docs[0]["metadata"]["name"]}


# --- consistency with the code -----------------------------------------------------------------


def _serve_parser() -> Any:
    from noe_web.commands import build_parser  # the real `noe` parser, as the image runs it

    return build_parser()


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_every_chart_argument_is_accepted_by_noe_serve(name: str) -> None:
    parser = _serve_parser()
    args = serve_args(render(name))
    ns = parser.parse_args(["serve", *args])
    assert ns.command == "serve"


@cache
def _help_options(command: str) -> frozenset[str]:
    """The options ``noe COMMAND --help`` lists, from the real console script's output."""
    proc = subprocess.run(
        [sys.executable, "-m", "noe_web", command, "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return frozenset(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", proc.stdout))


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_every_flag_the_chart_passes_is_in_the_commands_help(name: str) -> None:
    """Whole option names only: argparse would also take an abbreviation the help never shows."""
    for label, spec in pod_specs(render(name)):
        for c in spec["containers"]:
            command, *args = c["args"]
            flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
            unknown = flags - _help_options(command)
            assert not unknown, f"{label} passes {sorted(unknown)}, which `noe {command} --help` does not list"


@pytest.mark.parametrize("name", ["no-cert-manager", "everything-no-cert-manager"])
def test_certs_job_arguments_are_accepted_by_noe_certs(name: str) -> None:
    from noe_web.commands.certs import add_certs_parser

    docs = render(name)
    import argparse

    parser = argparse.ArgumentParser(prog="noe")
    add_certs_parser(parser.add_subparsers(dest="command"))
    for label, spec in pod_specs(docs):
        if "certs" not in label:
            continue
        args = spec["containers"][0]["args"]
        ns = parser.parse_args(args)
        assert ns.command == "certs"


def test_every_value_is_classified_and_flag_values_reach_noe_serve() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    unclassified = set(values) - set(VALUE_FLAGS) - NOT_FLAGS
    assert not unclassified, f"values without a known role (flag or object shape): {sorted(unclassified)}"
    args = serve_args(render("everything"))
    passed = {a.split("=", 1)[0] for a in args}
    missing = {key: flag for key, flag in VALUE_FLAGS.items() if flag not in passed}
    assert not missing, f"values set but not passed to noe serve: {missing}"
    # and every one of those flags is one `noe serve` defines
    parser = _serve_parser()
    serve = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["serve"]
    known = {opt for action in serve._actions for opt in action.option_strings}
    assert set(VALUE_FLAGS.values()) <= known, sorted(set(VALUE_FLAGS.values()) - known)


def test_everything_values_become_these_arguments() -> None:
    args = serve_args(render("everything"))
    assert flag_values(args, "--preferred-arch") == ["arm64"]
    assert flag_values(args, "--cluster-schedulable-archs") == ["amd64,arm64"]
    assert flag_values(args, "--match-node-labels") == ["accelerator.node.kubernetes.io/gpu,team"]
    assert flag_values(args, "--strict-namespaces") == ["payments,platform"]
    assert flag_values(args, "--arch-tolerations") == ["arm64=arch=arm64:NoSchedule,amd64=arch=amd64:PreferNoSchedule"]
    assert flag_values(args, "--preference-mode") == ["required"]
    assert flag_values(args, "--fallback-arch") == ["arm64"]
    assert flag_values(args, "--system-os") == ["linux,windows"]
    assert flag_values(args, "--x86-64-levels") == ["nfd"]
    assert flag_values(args, "--registry-proxies") == [",".join(EVERYTHING["proxies"])]
    assert flag_values(args, "--private-registries") == ["*.corp,123456789012.dkr.ecr.*.amazonaws.com"]
    assert flag_values(args, "--docker-config") == EVERYTHING["dockerConfigPathCandidates"]
    # A directory (the Go chart's form) means the config.toml in it: noe reads files only.
    assert flag_values(args, "--containerd-config") == [
        "/etc/containerd/config.toml",
        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
    ]
    assert flag_values(args, "--image-credential-provider-config") == ["/etc/eks/image-credential-provider/config.json"]
    assert flag_values(args, "--image-credential-provider-bin-dir") == ["/etc/eks/image-credential-provider"]
    assert "--verify-platform-manifests" in args
    assert flag_values(args, "--cache-timeout") == ["0.5"]
    assert not [a for a in args if "everything-pw" in a or a.startswith("--cache-url")]  # the URL: from a Secret
    # Files named by flags are mounted where the flags point.
    mounts = {m["mountPath"] for m in container(render("everything"))["volumeMounts"]}
    for flag in (
        "--image-platforms",
        "--registry-ca-file",
        "--docker-config",
        "--containerd-config",
        "--image-credential-provider-config",
        "--image-credential-provider-bin-dir",
        "--cache-key-file",
        "--cache-ca-file",
    ):
        assert flag_values(args, flag), flag
        for value in flag_values(args, flag):
            assert any(value == m or value.startswith(m.rstrip("/") + "/") for m in mounts), (flag, value)


def test_the_go_noe_gaps_are_closed_by_default() -> None:
    args = serve_args(render("default"))
    assert flag_values(args, "--system-os") == ["linux"] and flag_values(args, "--x86-64-levels") == ["off"]
    assert flag_values(render_with(["--set", "systemOS=linux\\,windows"]), "--system-os") == ["linux,windows"]
    # The Go chart never passed these two.
    assert flag_values(args, "--preferred-arch") == ["amd64"]
    assert flag_values(render_with(["--set", "matchNodeLabels={team}"]), "--match-node-labels") == ["team"]


def render_with(extra: list[str]) -> list[str]:
    out = run_helm(["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra]).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    return serve_args(docs)


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_webhook_reaches_the_service_port_and_path_noe_serves(name: str) -> None:
    docs = render(name)
    webhook = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    service_docs = find(docs, "Service")
    args = serve_args(docs)
    bind = flag_values(args, "--bind")
    assert bind and bind[0].endswith(":8443"), "noe serve listens on 8443"
    for hook in webhook:
        ref = hook["clientConfig"]["service"]
        assert ref["path"] == "/mutate"
        assert ref["namespace"] == NAMESPACE
        svc = one(service_docs, "Service", ref["name"])
        port = next(p for p in svc["spec"]["ports"] if p["port"] == ref.get("port", 443))
        target = port["targetPort"]
        ports = {p["name"]: p["containerPort"] for p in container(docs)["ports"]}
        number = ports[target] if isinstance(target, str) else target
        assert str(number) == bind[0].rsplit(":", 1)[1]
        assert svc["spec"]["selector"].items() <= deployment(docs)["spec"]["template"]["metadata"]["labels"].items()
    # Probes hit the endpoints noe serve offers, over HTTPS on the serving port.
    c = container(docs)
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    metrics = flag_values(args, "--metrics-addr")
    assert metrics and int(metrics[0].rsplit(":", 1)[1]) == next(
        p["containerPort"] for p in c["ports"] if p["name"] == "metrics"
    )


def _calls_of(module: Path, class_names: set[str] | None = None) -> set[tuple[str, str]]:
    """(verb, resource) pairs: the HTTP methods and API paths of each method of the classes of *module*.

    A method naming a path and calling a helper method of its class (``self._json_patch(path, ...)``)
    gets the helper's HTTP methods.
    """
    verbs = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    tree = ast.parse(module.read_text())
    module_consts = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value.value, str)
    }
    found: set[tuple[str, str]] = set()
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if class_names is not None and cls.name not in class_names:
            continue
        per_fn: dict[str, tuple[set[str], set[str], set[str]]] = {}
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            texts: list[str] = []
            methods: set[str] = set()
            helpers: set[str] = set()
            for node in ast.walk(fn):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    texts.append(node.value)
                    if node.value in verbs:
                        methods.add(node.value)
                elif isinstance(node, ast.Name) and node.id in module_consts:
                    texts.append(module_consts[node.id])
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "_session"
                    and node.attr in ("get", "post", "put", "patch", "delete")
                ):
                    methods.add(node.attr.upper())
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    helpers.add(node.attr)
            resources = {
                m.group(1) for t in texts for m in re.finditer(r"/(secrets|events|nodes|[a-z]+configurations)\b", t)
            }
            per_fn[fn.name] = (methods, resources, helpers)
        for methods, resources, helpers in per_fn.values():
            if not resources:
                continue
            own = set(methods)
            for helper in helpers:
                if helper in per_fn and not per_fn[helper][1]:
                    own |= per_fn[helper][0]
            found |= {(verbs[m], r) for m in own for r in resources}
    return found


def _policy_watch_resources() -> set[str]:
    """The resources noe_web/kube/policy_watch.py lists and watches (the last part of each path it names)."""
    from noe_web.kube.policy_watch import NAMESPACES_PATH, POLICY_PATHS

    return {path.rsplit("/", 1)[1] for path in (*POLICY_PATHS.values(), NAMESPACES_PATH)}


POLICY_WATCH_RESOURCES = _policy_watch_resources()


def _rules(role: dict[str, Any]) -> set[tuple[str, str]]:
    return {(verb, resource) for rule in role["rules"] for verb in rule["verbs"] for resource in rule["resources"]}


def test_webhook_rbac_is_exactly_the_api_calls_of_the_kube_client() -> None:
    used = _calls_of(ROOT / "noe_web" / "kube" / "client.py", {"KubeClient"})
    used |= _calls_of(ROOT / "noe_web" / "kube" / "nodes.py", {"KubeNodes"})
    assert ("get", "secrets") in used and ("create", "events") in used and ("get", "nodes") in used, used
    # the placement-policy watch (noe_web/kube/policy_watch.py): both kinds and Namespaces listed and
    # watched, a Namespace created a moment before its first pod read once
    watched = {(verb, resource) for verb in ("list", "watch") for resource in POLICY_WATCH_RESOURCES}
    used |= watched | {("get", "namespaces")}
    docs = render("default")
    role = one(docs, "ClusterRole")
    granted = _rules(role)
    # patch on events: Event series (a repeated event) are updates of the first one.
    assert used <= granted
    assert granted - used <= {("patch", "events")}, f"granted but never used: {granted - used}"
    for rule in role["rules"]:
        assert rule["apiGroups"] == (["arch.noe.adevinta.com"] if "placementpolicies" in rule["resources"] else [""])
        assert "*" not in rule["verbs"]
        if {"list", "watch"} & set(rule["verbs"]):
            assert set(rule["resources"]) <= POLICY_WATCH_RESOURCES, rule
    # (the `helm test` hook's own Role lets its dry-run pod be created: tests/deploy/test_chart_ops.py)
    assert [
        d["kind"]
        for d in docs
        if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["labels"]["app.kubernetes.io/component"] != "test"
    ] == ["ClusterRole", "Role"]
    # its own namespace only: the ConfigMaps, for noe-learned-platforms (noe_web/kube/learned_watch.py)
    [own] = [d for d in find(docs, "Role") if d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"]
    assert own["metadata"]["namespace"] == NAMESPACE
    assert _rules(own) == {("list", "configmaps"), ("watch", "configmaps")}
    [own_binding] = [b for b in find(docs, "RoleBinding") if b["roleRef"]["name"] == own["metadata"]["name"]]
    assert own_binding["subjects"] == binding_subjects(docs)
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == binding_subjects(docs)


def binding_subjects(docs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The webhook's service account, as its bindings must name it."""
    name = deployment(docs)["spec"]["template"]["spec"]["serviceAccountName"]
    return [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]


def test_certs_rbac_is_exactly_the_api_calls_of_certs_py() -> None:
    used = _calls_of(ROOT / "noe_web" / "commands" / "certs.py", {"CertsApi"})
    assert used == {
        ("get", "secrets"),
        ("create", "secrets"),
        ("update", "secrets"),
        ("get", "mutatingwebhookconfigurations"),
        ("patch", "mutatingwebhookconfigurations"),
    }
    docs = render("no-cert-manager")
    certs_role = next(r for r in find(docs, "Role") if r["metadata"]["name"].endswith("-certs"))
    certs_cluster = next(r for r in find(docs, "ClusterRole") if r["metadata"]["name"].endswith("-certs"))
    assert _rules(certs_role) | _rules(certs_cluster) == used
    secret_name = next(
        v["secret"]["secretName"] for v in deployment(docs)["spec"]["template"]["spec"]["volumes"] if "secret" in v
    )
    for rule in certs_role["rules"]:
        if rule["verbs"] != ["create"]:  # create cannot name its object
            assert rule["resourceNames"] == [secret_name]
    webhook_name = one(docs, "MutatingWebhookConfiguration")["metadata"]["name"]
    assert [r["resourceNames"] for r in certs_cluster["rules"]] == [[webhook_name]]


# --- the webhook configuration, security, HA, certificates ----------------------------------------


def test_webhook_configuration_defaults() -> None:
    docs = render("default")
    [hook] = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["admissionReviewVersions"] == ["v1", "v1beta1"]
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 10
    assert hook["matchPolicy"] == "Equivalent"
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["operations"]) for r in hook["rules"]}
    assert rules == {
        (("",), ("pods",)): ["CREATE"],
        (("apps",), ("daemonsets",)): ["CREATE", "UPDATE"],
        (("",), ("pods/ephemeralcontainers",)): ["UPDATE"],  # kubectl debug (rule 18)
    }
    expressions = hook["namespaceSelector"]["matchExpressions"]
    by_name = next(e for e in expressions if e["key"] == "kubernetes.io/metadata.name")
    assert by_name["operator"] == "NotIn" and {"kube-system", NAMESPACE} <= set(by_name["values"])
    opt_out = next(e for e in expressions if e["key"] != "kubernetes.io/metadata.name")
    assert opt_out == {"key": "arch.noe.adevinta.com/skip", "operator": "NotIn", "values": ["true"]}
    assert hook["objectSelector"]["matchExpressions"] == [opt_out]
    args = serve_args(docs)
    assert float(flag_values(args, "--admission-deadline")[0]) < hook["timeoutSeconds"]


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_pod_security(name: str) -> None:
    for label, spec in pod_specs(render(name)):
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] > 0, label
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, label
        assert not spec.get("hostNetwork") and not spec.get("hostPID"), label
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, label
            assert sc["readOnlyRootFilesystem"] is True, label
            assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add"), label
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], label
            # Writable places exist for what the process writes.
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            assert "/tmp" in mounts, label
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            if "hostPath" in v:
                assert v["hostPath"].get("type") in ("", "DirectoryOrCreate"), (label, v)
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                if "hostPath" in volumes[m["name"]]:
                    assert m.get("readOnly") is True, (label, m)


@pytest.mark.parametrize("name", ["default", "everything"])
def test_state_and_metrics_directories_are_writable_volumes(name: str) -> None:
    docs = render(name)
    c = container(docs)
    volumes = {v["name"]: v for v in deployment(docs)["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    state = flag_values(serve_args(docs), "--state-dir")[0]
    multiproc = next(e["value"] for e in c["env"] if e["name"] == "PROMETHEUS_MULTIPROC_DIR")
    for path in (state, multiproc, "/tmp"):
        assert "emptyDir" in mounts[path], path


def test_host_credential_directories_not_files() -> None:
    docs = render("everything")
    volumes = deployment(docs)["spec"]["template"]["spec"]["volumes"]
    host = sorted(v["hostPath"]["path"] for v in volumes if "hostPath" in v)
    assert host == sorted(
        {
            "/var/lib/kubelet",
            "/.docker",
            "/etc/containerd",
            "/var/lib/rancher/k3s/agent/etc/containerd",
            "/etc/eks/image-credential-provider",
        }
    )


def test_image_is_pinned_never_latest() -> None:
    image = container(render("default"))["image"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert image.endswith(f":{app_version}") and not image.endswith(":latest")
    assert container(render("everything"))["image"] == f"registry.corp/platform/noe:0.1.0-rc1@sha256:{'ab' * 32}"
    proc = run_helm(["template", RELEASE, str(CHART), "--set", "image.tag=latest"], check=False)
    assert proc.returncode != 0 and "tag" in proc.stderr
    for path in MANIFESTS.glob("*.yaml"):
        assert ":latest" not in path.read_text()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["--set", "preferredArch=s390x", "--set", "schedulableArchitectures={amd64,arm64}"], "preferredArch"),
        (["--set", "admissionDeadline=10"], "admissionDeadline"),
        (["--set", "kubeletConfig.binDir=/bin"], "kubeletConfig"),
        (["--set", "preferenceMode=hard"], "preferenceMode"),
        (["--set", "cache.redis.url=redis://r:6379", "--set", "cache.redis.deploy=true"], "cache.redis"),
        (["--set", "cache.redis.url=redis://r:6379", "--set", "cache.redis.existingSecret=s"], "cache.redis"),
        (["--set", "cache.redis.url=redis://r:6379", "--set", "cache.redis.caBundle=x"], "caBundle"),
        (["--set", "cache.redis.url=http://r:6379"], "cache"),
    ],
)
def test_invalid_values_are_refused(settings: list[str], message: str) -> None:
    proc = run_helm(["template", RELEASE, str(CHART), *settings], check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_ha() -> None:
    docs = render("ha")
    spec = deployment(docs)["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    keys = {c["topologyKey"] for c in spec["template"]["spec"]["topologySpreadConstraints"]}
    assert "kubernetes.io/hostname" in keys
    assert deployment(render("everything"))["spec"]["replicas"] == 3


def test_cert_manager_chain() -> None:
    docs = render("default")
    issuers = {i["metadata"]["name"]: i["spec"] for i in find(docs, "Issuer")}
    certificates = {c["metadata"]["name"]: c["spec"] for c in find(docs, "Certificate")}
    ca = next(c for c in certificates.values() if c.get("isCA"))
    assert "selfSigned" in issuers[ca["issuerRef"]["name"]]
    ca_issuer = next(n for n, s in issuers.items() if s.get("ca", {}).get("secretName") == ca["secretName"])
    serving_name, serving = next((n, c) for n, c in certificates.items() if not c.get("isCA"))
    assert serving["issuerRef"]["name"] == ca_issuer
    svc = one(docs, "Service")["metadata"]["name"]
    assert {f"{svc}.{NAMESPACE}.svc", f"{svc}.{NAMESPACE}.svc.cluster.local"} <= set(serving["dnsNames"])
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{serving_name}"
    # The Secret is mounted as a directory (no subPath), where --cert-dir points.
    pod = deployment(docs)["spec"]["template"]["spec"]
    tls = next(v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == serving["secretName"])
    mount = next(m for m in container(docs)["volumeMounts"] if m["name"] == tls["name"])
    assert "subPath" not in mount
    assert flag_values(serve_args(docs), "--cert-dir") == [mount["mountPath"]]
    assert not find(docs, "Job")


def test_without_cert_manager_a_hook_job_runs_noe_certs() -> None:
    docs = render("no-cert-manager")
    assert not find(docs, "Certificate") and not find(docs, "Issuer")
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert "cert-manager.io/inject-ca-from" not in (mwc["metadata"].get("annotations") or {})
    job = one(docs, "Job")
    hooks = set(job["metadata"]["annotations"]["helm.sh/hook"].split(","))
    assert {"pre-install", "post-install", "pre-upgrade", "post-upgrade"} <= hooks
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "certs"
    opts = dict(a.split("=", 1) for a in args[1:])
    pod = deployment(docs)["spec"]["template"]["spec"]
    assert opts["--secret"] == next(v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v)
    assert opts["--webhook-config"] == mwc["metadata"]["name"]
    assert opts["--service"] == mwc["webhooks"][0]["clientConfig"]["service"]["name"]
    assert opts["--namespace"] == NAMESPACE
    cron = one(docs, "CronJob")
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == args
    assert job["spec"]["template"]["spec"]["serviceAccountName"] != pod["serviceAccountName"]
    assert not find(render("no-cert-manager-no-cronjob"), "CronJob")


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_standard_labels(name: str) -> None:
    for doc in render(name):
        labels = doc["metadata"]["labels"]
        for key in (
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/version",
            "app.kubernetes.io/managed-by",
            "helm.sh/chart",
        ):
            assert key in labels, (doc["kind"], key)


def test_per_object_labels_and_annotations() -> None:
    docs = render("everything")
    for kind in (
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "Issuer",
        "Certificate",
        "PodDisruptionBudget",
        "ConfigMap",
    ):
        for doc in find(docs, kind):
            assert doc["metadata"]["labels"]["some"] == "label", kind
            assert doc["metadata"]["annotations"]["some"] == "annotation", kind
    pod = deployment(docs)["spec"]["template"]["metadata"]
    assert pod["labels"]["some"] == "label" and pod["annotations"]["some"] == "annotation"
    assert one(docs, "ServiceMonitor")["metadata"]["name"]


def test_image_platforms_configmap_is_the_platforms_file_format(tmp_path: Path) -> None:
    from noe_core.image.declared import StaticPlatforms

    cm = one(render("everything"), "ConfigMap")
    path = tmp_path / "platforms.json"
    path.write_text(cm["data"]["platforms.json"])
    static = StaticPlatforms.load(path)
    assert static.get("registry.corp/legacy/app:1") is not None


# --- container image ---------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_essentials() -> None:
    steps = _dockerfile()
    args = {rest.split("=")[0]: rest.split("=", 1)[1] for word, rest in steps if word == "ARG" and "=" in rest}

    def resolved(text: str) -> str:
        """A FROM as docker resolves it without --build-arg: ARG defaults substituted (BASE_IMAGE, ...)."""
        while (found := re.search(r"\$\{(\w+)\}", text)) is not None:
            text = text.replace(found.group(0), args[found.group(1)])
        return text

    froms = [rest for word, rest in steps if word == "FROM"]
    assert len(froms) >= 2, "a builder stage and a runtime stage"
    assert all(re.match(r"python:[\d.]+-slim\b", resolved(f)) for f in froms), froms
    # The official multi-arch image, pinned by digest (an index: every platform takes its own image from it).
    assert re.fullmatch(r"python:3\.1[1-9]-slim@sha256:[0-9a-f]{64}", args["BASE_IMAGE"]), args["BASE_IMAGE"]
    # Every date from SOURCE_DATE_EPOCH in each stage that writes files (pip's .pyc, useradd).
    stages = " ".join(rest if word != "FROM" else "\nFROM" for word, rest in steps).split("\nFROM")[1:]
    assert all("SOURCE_DATE_EPOCH" in stage for stage in stages), "each stage declares ARG SOURCE_DATE_EPOCH"
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert re.search(r"pip install [\"']?\.\[web,tracing\][\"']?", runs), "the image traces when OTEL_* asks"
    # Multi-arch friendly: nothing fetched by URL, no architecture named.
    assert not re.search(r"\b(curl|wget)\b|https?://", runs)
    assert not any(word == "ADD" for word, _ in steps)
    assert not re.search(r"amd64|x86_64|aarch64|arm64", runs)
    users = [rest for word, rest in steps if word == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]), "non-root numeric user last"
    deployment_uid = deployment(render("default"))["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert users[-1].split(":")[0] == str(deployment_uid)
    assert [rest for word, rest in steps if word == "ENTRYPOINT"] == ['["noe"]']
    # Built from a clean checkout: every COPY source is tracked in git, nothing vendored.
    copies = [rest for word, rest in steps if word == "COPY" and "--from" not in rest]
    tracked = set(
        subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    )
    for copy in copies:
        for source in shlex.split(copy)[:-1]:
            src = source.rstrip("/")
            assert src in tracked or any(t.startswith(src + "/") for t in tracked), f"COPY {source}: not in git"
            assert "vendor" not in src
    assert "buildx build --platform linux/amd64,linux/arm64" in (ROOT / "Dockerfile").read_text()


def test_dockerignore_keeps_what_the_build_copies() -> None:
    ignored = [
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    ]
    for needed in ("setup.cfg", "pyproject.toml", "noe_core", "noe_web", "README.md"):
        assert needed not in ignored or f"!{needed}" in ignored, needed
    assert ".git" in ignored and "tests" in ignored


def test_package_builds_from_only_what_the_dockerfile_copies(tmp_path: Path) -> None:
    """The builder stage's `pip install .[web]` needs only its COPY set: build the sdist from exactly that."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    copies = [shlex.split(rest)[:-1] for word, rest in _dockerfile() if word == "COPY" and "--from" not in rest]
    sources = [s.rstrip("/") for group in copies for s in group]
    context = tmp_path / "context"
    for path in tracked:
        if any(path == s or path.startswith(s + "/") for s in sources) and (ROOT / path).is_file():
            (context / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, context / path)
    script = (
        "import sys; from setuptools import build_meta as b; "
        "print(b.build_sdist(sys.argv[1])); print(b.get_requires_for_build_wheel())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "dist")],
        cwd=context,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import tarfile

    sdist = next((tmp_path / "dist").glob("noe*webhook-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {
        "noe_web/commands/certs.py",
        "noe_web/commands/__init__.py",
        "noe_core/placement/rules.py",
        "setup.cfg",
    } <= names
    assert "noe = noe_web.commands:main" in (context / "setup.cfg").read_text()


# --- examples ------------------------------------------------------------------------------------


def _example_images() -> set[str]:
    images: set[str] = set()
    for path in EXAMPLES.glob("*.yaml"):
        for doc in _yaml_docs(path):
            if doc.get("kind") not in ("Pod", "DaemonSet"):
                continue
            spec = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                images.add(c["image"])
    return images


def test_platforms_file_covers_every_example_image() -> None:
    from noe_core.image.declared import StaticPlatforms

    static = StaticPlatforms.load(EXAMPLES / "platforms.json")
    raw = json.loads((EXAMPLES / "platforms.json").read_text())
    assert any(isinstance(v, dict) and "error" in v for v in raw.values()), "one error entry"
    assert any("*" in k for k in raw), "one glob key"
    for image in _example_images():
        assert static.get(image) is not None, image


@pytest.mark.parametrize(
    ("example", "allowed"),
    [
        ("pod.yaml", True),
        ("pod-arm64-only.yaml", True),
        ("pod-preferred-arch.yaml", True),
        ("daemonset.yaml", True),
        ("pod-no-common-arch.yaml", False),
    ],
)
def test_examples_decide_as_documented(example: str, allowed: bool) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "noe_core.cli",
            "mutate",
            "-f",
            str(EXAMPLES / example),
            "--platforms",
            str(EXAMPLES / "platforms.json"),
            "--explain",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == (0 if allowed else 3), proc.stdout + proc.stderr


def test_strict_namespace_example_is_denied_only_when_strict() -> None:
    base = [
        sys.executable,
        "-m",
        "noe_core.cli",
        "mutate",
        "-f",
        str(EXAMPLES / "pod-strict-namespace.yaml"),
        "--platforms",
        str(EXAMPLES / "platforms.json"),
    ]
    lenient = subprocess.run(base, capture_output=True, text=True, check=False, timeout=60, cwd=ROOT)
    strict = subprocess.run(
        [*base, "--strict-namespaces", "payments"], capture_output=True, text=True, check=False, timeout=60, cwd=ROOT
    )
    assert lenient.returncode == 0, lenient.stderr
    assert strict.returncode == 3, strict.stdout + strict.stderr


def test_ci_recipe_reports_every_workload_and_fails_on_a_denied_one() -> None:
    env = {**os.environ, "NOE": f"{sys.executable} -m noe_core.cli"}
    proc = subprocess.run(
        ["sh", str(EXAMPLES / "ci" / "where-will-it-land.sh"), "examples", "examples/platforms.json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    from tests.support.ci_recipe import script_kinds

    workloads = sorted(
        p.name for p in EXAMPLES.glob("*.yaml") if any(d.get("kind") in script_kinds() for d in _yaml_docs(p))
    )
    for name in workloads:
        assert f"=== examples/{name}" in proc.stdout
    assert "pod-no-common-arch.yaml: denied" in proc.stdout
    assert f"checked {len(workloads)} workload manifest(s)" in proc.stdout


# --- the chart's command line, run for real ------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_noe_serve_starts_with_the_charts_arguments(tmp_path: Path) -> None:
    """The Deployment's exact arguments (in-pod paths mapped to temp dirs) start a serving webhook."""
    import base64
    import time

    import requests

    from tests.support.certs import make_ca

    platforms = json.loads((EXAMPLES / "platforms.json").read_text())
    values = _values_file({"imagePlatforms": platforms, "failurePolicy": "Ignore"}, tmp_path, "smoke")
    out = run_helm(["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values)]).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    args = serve_args(docs)
    ca = make_ca("smoke CA", tmp_path / "ca")
    pair = ca.issue(["127.0.0.1", "localhost"])
    cert_dir = tmp_path / "tls"
    cert_dir.mkdir()
    shutil.copy(pair.cert_file, cert_dir / "tls.crt")
    shutil.copy(pair.key_file, cert_dir / "tls.key")
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "platforms.json").write_text(one(docs, "ConfigMap")["data"]["platforms.json"])
    c = container(docs)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_", "KUBERNETES_"))}
    env.update({e["name"]: e["value"] for e in c["env"] if "value" in e})
    mapping = {"/etc/noe/tls": str(cert_dir), "/etc/noe/config": str(config_dir)}
    for path, name in (
        (env["PROMETHEUS_MULTIPROC_DIR"], "metrics"),
        (env["HOME"], "home"),
        (flag_values(args, "--state-dir")[0], "state"),
    ):
        (tmp_path / name).mkdir()
        mapping[path] = str(tmp_path / name)
    env["PROMETHEUS_MULTIPROC_DIR"], env["HOME"] = mapping[env["PROMETHEUS_MULTIPROC_DIR"]], mapping[env["HOME"]]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    port, metrics_port = _free_port(), _free_port()
    mapped = []
    for arg in args:
        flag, _, value = arg.partition("=")
        if flag == "--bind":
            value = f"127.0.0.1:{port}"
        elif flag == "--metrics-addr":
            value = f"127.0.0.1:{metrics_port}"
        for inside, outside in sorted(mapping.items(), key=lambda item: -len(item[0])):
            if value == inside or value.startswith(inside + "/"):
                value = outside + value[len(inside) :]
                break
        mapped.append(f"{flag}={value}" if _ else arg)
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "noe_web", "serve", *mapped], stdout=log, stderr=log, cwd=tmp_path, env=env
    )
    try:
        session = requests.Session()
        session.trust_env = False
        session.verify = str(ca.ca_file)
        base = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        ready = False
        while time.monotonic() < deadline and proc.poll() is None and not ready:
            try:
                ready = session.get(base + c["readinessProbe"]["httpGet"]["path"], timeout=2).status_code == 200
            except requests.RequestException:
                time.sleep(0.2)
        assert ready, (tmp_path / "serve.log").read_text()[-3000:]
        assert session.get(base + c["livenessProbe"]["httpGet"]["path"], timeout=5).status_code == 200
        review = json.loads((EXAMPLES / "admission-review.json").read_text())
        path = one(docs, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["service"]["path"]
        answer = session.post(base + path, json=review, timeout=10).json()["response"]
        assert answer["allowed"] is True and answer["uid"] == review["request"]["uid"]
        patch = json.loads(base64.b64decode(answer["patch"]))
        assert any(op["path"].startswith("/spec/affinity") for op in patch)
        metrics = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
        assert metrics.status_code == 200
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
