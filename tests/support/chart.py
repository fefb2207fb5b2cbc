"""The chart as the deploy suites read it: its directory, a values file that sets everything, rendering with
the real helm, rendered-object finders, and strict validation against the official Kubernetes schemas
(``kubernetes-validate``)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.helm import run_helm
from tests.support.paths import ROOT

CHART = ROOT / "deploy" / "helm" / "noe"

RELEASE, NAMESPACE = "noe", "noe-system"


_NEWEST_MINOR = int(kubernetes_validate.latest_version().split(".")[1])


# Every minor release the chart supports, oldest to the newest schemas kubernetes-validate ships.
KUBE_VERSIONS = tuple(f"1.{minor}" for minor in range(28, _NEWEST_MINOR + 1))


# Kinds of CRDs the official schemas do not carry: structure-checked here instead.
CRD_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/", "argoproj.io/")


EVERYTHING: dict[str, Any] = {
    "fallbackArch": "arm64",
    "image": {
        "registry": "registry.corp",
        "repository": "platform/noe",
        "tag": "0.1.0-rc1",
        "digest": "sha256:" + "ab" * 32,
        "pullPolicy": "Always",
    },
    "imagePullSecrets": [{"name": "corp-pull"}],
    "preferredArch": "arm64",
    "schedulableArchitectures": ["amd64", "arm64"],
    "systemOS": ["linux", "windows"],
    "x86_64Levels": "nfd",
    "matchNodeLabels": ["accelerator.node.kubernetes.io/gpu", "team"],
    "strictNamespaces": ["payments", "platform"],
    "archTolerations": [
        "arm64=arch=arm64:NoSchedule",
        {"arch": "amd64", "key": "arch", "value": "amd64", "effect": "PreferNoSchedule"},
    ],
    "preferenceMode": "required",
    "preferredArchWeight": 50,
    "imagePlatforms": {"registry.corp/legacy/*": ["linux/amd64"], "registry.corp/broken:1": {"error": "gone"}},
    "proxies": ["docker.io=docker-proxy.company.corp", "quay.io=quay-proxy.company.corp"],
    "privateRegistries": ["*.corp", "123456789012.dkr.ecr.*.amazonaws.com"],
    "insecureRegistries": ["registry.lab:5000"],
    "registryCA": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    "nodeCredentials": {"enabled": True},
    "kubeletConfig": {
        "binDir": "/etc/eks/image-credential-provider",
        "configDir": "/etc/eks/image-credential-provider",
        "config": "config.json",
    },
    "dockerConfigPathCandidates": [
        "/var/lib/kubelet/config.json",
        "/.docker/config.json",
        "/var/lib/kubelet/.dockercfg",
    ],
    "containerdConfigPathCandidates": ["/etc/containerd", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"],
    "cacheTTL": 300,
    "negativeCacheTTL": 30,
    "verifyPlatformManifests": True,
    "cache": {
        "redis": {
            "url": "rediss://:everything-pw@redis.corp:6380/1",
            "caBundle": "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n",
            "timeout": 0.5,
        }
    },
    "admissionDeadline": 4,
    "gracefulTimeout": 12,
    "workers": 3,
    "threads": 16,
    "logLevel": "debug",
    "failurePolicy": "Fail",
    "timeoutSeconds": 8,
    "reinvocationPolicy": "Never",
    "optOutLabel": "noe.example.com/skip",
    "excludedNamespaces": ["monitoring"],
    "replicas": 3,
    "ha": {"enabled": True, "replicas": 3, "minAvailable": 2, "whenUnsatisfiable": "DoNotSchedule"},
    "priorityClassName": "system-cluster-critical",
    "tolerations": [{"key": "arch", "operator": "Exists", "effect": "NoSchedule"}],
    "serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "prom"}},
    "clusterDomain": "corp.local",
    "webhook": {"pullSecrets": {"namespaces": ["payments", "platform"]}},
    **{
        key: {"labels": {"some": "label"}, "annotations": {"some": "annotation"}}
        for key in (
            "pod",
            "deployment",
            "serviceaccount",
            "clusterrole",
            "clusterrolebinding",
            "mutatingwebhookconfiguration",
            "issuer",
            "certificate",
            "poddisruptionbudget",
            "configmap",
        )
    },
}


def render_chart(
    values: dict[str, Any] | None = None, *settings: str, chart: str = str(CHART), home: Path | None = None
) -> list[dict[str, Any]]:
    """``helm template`` of *chart* (a directory or ``oci://…`` with ``--version``) with *values* (a dict written
    to a values file) and extra helm arguments; the rendered objects. *home*: helm's config (registry logins)."""
    return [d for d in yaml.safe_load_all(_template(values, settings, chart=chart, home=home).stdout) if d]


def refused(values: dict[str, Any] | None = None, *settings: str) -> str:
    """helm's error for values the chart must refuse (the test fails if it renders)."""
    proc = _template(values, settings, check=False)
    assert proc.returncode != 0, f"rendered although it should be refused: {values} {settings}"
    return proc.stderr


def _template(
    values: dict[str, Any] | None,
    settings: Iterable[str],
    *,
    chart: str = str(CHART),
    check: bool = True,
    home: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="noe-chart-values-") as tmp:
        args = ["template", RELEASE, chart, "--namespace", NAMESPACE, *settings]
        if values is not None:
            path = Path(tmp) / "values.json"
            path.write_text(json.dumps(values))
            args += ["-f", str(path)]
        return run_helm(args, check=check, home=home)


def find(docs: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def flag_values(args: list[str], flag: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] == flag and "=" in a]


def validate(doc: dict[str, Any], version: str) -> None:
    """Strict validation against Kubernetes *version*; CRD kinds get a structural check instead."""
    if doc["apiVersion"].startswith(CRD_GROUPS):
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            kubernetes_validate.validate(doc, version, strict=True)
        assert doc["metadata"]["name"] and isinstance(doc.get("spec"), dict), doc
        return
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path)
        pytest.fail(
            f"{doc['kind']}/{doc['metadata'].get('name')} invalid for Kubernetes {version} at {where}: {exc.message}"
        )
