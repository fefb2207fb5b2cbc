"""Every pod the chart renders meets Pod Security "restricted", for every combination of its toggles.

The checker below is written from the Kubernetes Pod Security Standards
(https://kubernetes.io/docs/concepts/security/pod-security-standards/): the
"baseline" controls, then the "restricted" ones. Node credentials (hostPath)
and hostNetwork are the two opt-ins that cannot be restricted; with them on,
the violations must be exactly those, so the opt-in costs what it says and
nothing more.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helm import run_helm
from tests.support.paths import ROOT

pytestmark = pytest.mark.deploy

CHART = ROOT / "deploy" / "helm" / "noe"

# --- the Pod Security Standards ----------------------------------------------------------------------

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", []), *spec.get("ephemeralContainers", [])]


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    found = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(f"Host Namespaces: {field}")
    scs = [("pod", pod_sc)] + [(c["name"], c.get("securityContext") or {}) for c in _containers(spec)]
    for who, sc in scs:
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"HostProcess: {who}")
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            found.append(f"SELinux: {who}")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"Seccomp: {who} Unconfined")
        apparmor = (sc.get("appArmorProfile") or {}).get("type")
        if apparmor not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"AppArmor: {who}")
    for c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            found.append(f"Privileged: {c['name']}")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            found.append(f"Capabilities: {c['name']} adds {sorted(added - BASELINE_CAPABILITIES)}")
        if sc.get("procMount", "Default") != "Default":
            found.append(f"/proc Mount Type: {c['name']}")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"Host Ports: {c['name']} {port['hostPort']}")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            found.append(f"HostPath Volumes: {v['name']} {v['hostPath']['path']}")
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"Sysctls: {sysctl['name']}")
    for key in (spec.get("metadata") or {}).get("annotations") or {}:
        if key.startswith("container.apparmor.security.beta.kubernetes.io/"):
            found.append(f"AppArmor annotation: {key}")
    return found


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    found = baseline_violations(spec)
    pod_sc = spec.get("securityContext") or {}
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"Volume Types: {v['name']} {sorted(kinds)}")
    for c in _containers(spec):
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"Privilege Escalation: {name}")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"Running as Non-root: {name}")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            found.append(f"Running as Non-root user: {name}")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"Seccomp: {name} {seccomp}")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"Capabilities: {name} does not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"Capabilities: {name} adds {caps['add']}")
    if pod_sc.get("runAsUser") == 0:
        found.append("Running as Non-root user: pod")
    return found


# --- the checker itself --------------------------------------------------------------------------------


def test_the_checker_catches_each_control() -> None:
    good: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
        ],
        "volumes": [{"name": "t", "emptyDir": {}}],
    }
    assert restricted_violations(good) == []
    bad_edits = [
        lambda s: s.__setitem__("hostNetwork", True),
        lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/var/lib/kubelet"}}),
        lambda s: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}),
        lambda s: s["containers"][0]["securityContext"].__setitem__("privileged", True),
        lambda s: s["containers"][0]["securityContext"].__setitem__("allowPrivilegeEscalation", True),
        lambda s: s["containers"][0]["securityContext"].__setitem__("runAsNonRoot", False),
        lambda s: s["containers"][0]["securityContext"].__setitem__("runAsUser", 0),
        lambda s: s["containers"][0]["securityContext"].__setitem__(
            "capabilities", {"drop": ["ALL"], "add": ["NET_ADMIN"]}
        ),
        lambda s: s["containers"][0]["securityContext"].__setitem__("capabilities", {}),
        lambda s: s["containers"][0]["securityContext"].__setitem__("seccompProfile", {"type": "Unconfined"}),
        lambda s: s["containers"][0].__setitem__("ports", [{"containerPort": 80, "hostPort": 80}]),
        lambda s: s["securityContext"].__setitem__("sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
        lambda s: s.__setitem__("initContainers", [{"name": "i", "securityContext": {}}]),
    ]
    for edit in bad_edits:
        spec = json.loads(json.dumps(good))
        edit(spec)
        assert restricted_violations(spec), spec


# --- every toggle combination of the chart -----------------------------------------------------------------

TOGGLES = {
    "certManager.enabled": (True, False),
    "nodeCredentials.enabled": (False, True),
    "hostNetwork": (False, True),
    "metrics.enabled": (True, False),
    "networkPolicy.enabled": (False, True),
    "cache.redis.deploy": (False, True),
}


def _combination_values(combo: dict[str, bool]) -> dict[str, Any]:
    values: dict[str, Any] = {
        "containerdConfigPathCandidates": ["/etc/containerd"],
        "extraVolumes": [{"name": "bundle", "configMap": {"name": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "bundle", "mountPath": "/etc/corp-ca", "readOnly": True}],
    }
    for dotted, value in combo.items():
        node = values
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return values


def _pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for d in docs:
        if d["kind"] == "Pod":
            specs.append((f"Pod/{d['metadata']['name']}", d["spec"]))
        elif d["kind"] in ("Deployment", "Job", "DaemonSet", "StatefulSet", "ReplicaSet"):
            specs.append((f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]))
        elif d["kind"] == "CronJob":
            specs.append((f"CronJob/{d['metadata']['name']}", d["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return specs


COMBOS = [dict(zip(TOGGLES, choice, strict=True)) for choice in itertools.product(*TOGGLES.values())]


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_every_rendered_pod_is_restricted_unless_an_opt_in_says_otherwise(
    combo: dict[str, bool], tmp_path: Path
) -> None:
    values = tmp_path / "values.json"
    values.write_text(json.dumps(_combination_values(combo)))
    out = run_helm(["template", "noe", str(CHART), "--namespace", "noe-system", "-f", str(values)]).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    specs = _pod_specs(docs)
    labels = {label for label, _ in specs}
    # the webhook, `helm test`'s pod, the certificate Job and CronJob without cert-manager, the chart's Valkey
    assert "Deployment/noe" in labels
    assert ("Deployment/noe-valkey" in labels) is combo["cache.redis.deploy"]
    assert any(label.startswith("Pod/") for label in labels)
    assert any(label.startswith("Job/") for label in labels) is not combo["certManager.enabled"]
    for label, spec in specs:
        violations = restricted_violations(spec)
        webhook = label == "Deployment/noe"
        allowed = set()
        if webhook and combo["nodeCredentials.enabled"]:
            allowed |= {v for v in violations if v.startswith(("HostPath Volumes:", "Volume Types:"))}
        if webhook and combo["hostNetwork"]:
            allowed |= {"Host Namespaces: hostNetwork"}
        assert set(violations) == allowed if webhook else not violations, (label, violations)
        if webhook and combo["nodeCredentials.enabled"]:
            assert any(v.startswith("HostPath Volumes: ") for v in violations), "node credentials mount nothing?"


def test_default_install_mounts_nothing_from_the_node() -> None:
    out = run_helm(["template", "noe", str(CHART), "--namespace", "noe-system"]).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    for label, spec in _pod_specs(docs):
        assert restricted_violations(spec) == [], label
        assert all("hostPath" not in v for v in spec.get("volumes") or []), label
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [
        a for a in args if a.startswith(("--docker-config", "--containerd-config", "--image-credential-provider"))
    ], args
