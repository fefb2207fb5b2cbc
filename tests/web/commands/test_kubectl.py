"""``kubectl noe``: the plugin run by real kubectls, against the Kubernetes API stand-in.

kubectl finds ``kubectl-noe`` on PATH (tests/support/kubectl.py puts this
checkout's there) and runs it; every case reads what a user sees — exit status,
standard output, one line on standard error — and what the API stand-ins
(tests/support/fake_kube_api.py, HTTPS, token auth) were asked, so which cluster
and which credentials a kubeconfig choice led to is observed, not assumed.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core.util.installed_version import installed_version
from tests.support.certs import CA
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.images import PushedImage
from tests.support.kubectl import KUBECTLS, install_plugin, kubectl_path, run_kubectl
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.kubectl

PLATFORMS = {"multi:1": ["linux/amd64", "linux/arm64"], "amd:1": ["linux/amd64"]}


def pod(namespace: str, name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {"phase": "Running"},
    }


@pytest.fixture
def api_a(test_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(test_ca, tokens=("token-a",)) as server:
        server.add_objects("pods", [pod("shop", "web-a", "multi:1"), pod("batch", "job-a", "amd:1")])
        yield server


@pytest.fixture
def api_b(test_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(test_ca, tokens=("token-b",)) as server:
        server.add_objects("pods", [pod("shop", "web-b", "multi:1")])
        yield server


class Kubectl:
    """One real kubectl with ``kubectl-noe`` first on its PATH, in a scratch HOME."""

    def __init__(self, binary: Path, tmp_path: Path) -> None:
        self.binary = binary
        self.plugins = tmp_path / "plugins"
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.plugin = install_plugin(self.plugins)
        self.platforms = tmp_path / "platforms.json"
        self.platforms.write_text(json.dumps(PLATFORMS))

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run_kubectl(self.binary, args, plugins=self.plugins, home=self.home, env=env)

    def report(
        self, *args: str, before: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl noe [BEFORE] report ARGS`` offline for images (``--platforms``), as JSON."""
        return self("noe", *before, "report", *args, "--platforms", str(self.platforms), "-o", "json", env=env)


@pytest.fixture(params=KUBECTLS)
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    return Kubectl(kubectl_path(request.param), tmp_path)


def cluster_entry(name: str, api: FakeKubeAPI) -> dict[str, Any]:
    ca = api.ca_file.read_bytes()
    return {"name": name, "cluster": {"server": api.url, "certificate-authority-data": base64.b64encode(ca).decode()}}


def kubeconfig(
    path: Path,
    *,
    clusters: list[dict[str, Any]],
    users: dict[str, str],
    contexts: dict[str, tuple[str, str]],
    current: str | None = None,
) -> Path:
    """A kubeconfig file: ``users`` name → token, ``contexts`` name → (cluster, user)."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": [{"name": name, "user": {"token": token}} for name, token in users.items()],
        "contexts": [{"name": name, "context": {"cluster": c, "user": u}} for name, (c, u) in contexts.items()],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def workloads(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return sorted(w["name"] for w in json.loads(proc.stdout)["workloads"])


def who_asked(api: FakeKubeAPI) -> set[str]:
    return {r.auth for r in api.requests_snapshot()}


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.rstrip("\n")


# ------------------------------------------------------------------ the plugin mechanism


def test_kubectl_lists_the_plugin(kubectl: Kubectl) -> None:
    proc = kubectl("plugin", "list")
    assert proc.returncode == 0, proc.stderr
    assert str(kubectl.plugin) in proc.stdout.splitlines()
    assert "warning" not in proc.stderr.lower(), proc.stderr


def test_usage_and_help_name_kubectl_noe(kubectl: Kubectl) -> None:
    top = kubectl("noe", "--help")
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("usage: kubectl noe [-h] [--version] COMMAND ...")
    for command in ("report", "inspect", "mutate", "policy"):
        assert f"\n    {command}" in top.stdout, top.stdout
    assert "--kubeconfig, --context, -n and $KUBECONFIG mean what they mean to kubectl" in " ".join(top.stdout.split())
    bare = kubectl("noe")
    assert (bare.returncode, bare.stdout) == (0, top.stdout)  # no subcommand: the help, not the webhook
    report = kubectl("noe", "report", "--help")
    assert report.returncode == 0 and report.stdout.startswith("usage: kubectl noe report [-h]"), report.stdout
    assert "--context NAME" in report.stdout and "--kubeconfig FILE" in report.stdout
    assert one_line(kubectl("noe", "report", "--bogus")) == "kubectl noe report: unrecognized arguments: --bogus"


def test_version_through_kubectl(kubectl: Kubectl) -> None:
    proc = kubectl("noe", "--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"noe {installed_version()}\n", "")


def test_offline_commands_through_kubectl(kubectl: Kubectl) -> None:
    mutate = kubectl("noe", "mutate", "-f", "examples/pod.yaml", "--platforms", "examples/platforms.json", "--patch")
    assert mutate.returncode == 0, mutate.stderr
    assert any(op["path"] == "/spec/affinity" for op in yaml.safe_load(mutate.stdout))
    explain = kubectl("noe", "policy", "explain", "-f", "examples/pod.yaml", "-o", "json")
    assert explain.returncode == 0, explain.stderr
    assert json.loads(explain.stdout)
    offline = kubectl(
        "noe", "report", "-f", "examples/pod.yaml", "--platforms", "examples/platforms.json", "-o", "json"
    )
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["totals"]["pods"] == 1


def test_inspect_through_kubectl_reads_the_registry(
    kubectl: Kubectl, registry: RegistryServer, pushed_images: dict[str, PushedImage]
) -> None:
    image = pushed_images["docker-manifest-list"]
    proc = kubectl("noe", "inspect", image.reference, "--insecure-registries", "127.0.0.1:*", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["digest"] == image.digest
    assert {(p["os"], p["architecture"]) for p in doc["platforms"]} >= {("linux", "amd64"), ("linux", "arm64")}


# ------------------------------------------------------------------ which cluster: kubectl's conventions


def test_report_reads_the_cluster_of_the_kubeconfig(kubectl: Kubectl, api_a: FakeKubeAPI, tmp_path: Path) -> None:
    path = api_a.write_kubeconfig(tmp_path / "kc", token="token-a")
    assert workloads(kubectl.report("--kubeconfig", str(path))) == ["job-a", "web-a"]
    assert who_asked(api_a) == {"token:token-a"}
    assert any(r.path.startswith("/api/v1/pods?") for r in api_a.requests_snapshot())  # every namespace


def test_namespace_flag_reads_one_namespace(kubectl: Kubectl, api_a: FakeKubeAPI, tmp_path: Path) -> None:
    path = str(api_a.write_kubeconfig(tmp_path / "kc", token="token-a"))
    assert workloads(kubectl.report("--kubeconfig", path, "-n", "shop")) == ["web-a"]
    # kubectl's global flags may come before the subcommand too
    assert workloads(kubectl.report("--kubeconfig", path, before=("-n", "batch"))) == ["job-a"]
    pod_lists = [r.path.split("?")[0] for r in api_a.requests_snapshot() if "/pods" in r.path]
    assert pod_lists == ["/api/v1/namespaces/shop/pods", "/api/v1/namespaces/batch/pods"]


def test_context_switches_between_two_clusters(
    kubectl: Kubectl, api_a: FakeKubeAPI, api_b: FakeKubeAPI, tmp_path: Path
) -> None:
    path = kubeconfig(
        tmp_path / "kc",
        clusters=[cluster_entry("a", api_a), cluster_entry("b", api_b)],
        users={"a": "token-a", "b": "token-b"},
        contexts={"a": ("a", "a"), "b": ("b", "b")},
        current="a",
    )
    assert workloads(kubectl.report("--kubeconfig", str(path))) == ["job-a", "web-a"]
    assert workloads(kubectl.report("--kubeconfig", str(path), "--context", "b")) == ["web-b"]
    assert workloads(kubectl.report("--kubeconfig", str(path), before=("--context=b",))) == ["web-b"]
    assert who_asked(api_a) == {"token:token-a"} and who_asked(api_b) == {"token:token-b"}
    before = len(api_a.requests_snapshot()) + len(api_b.requests_snapshot())
    assert one_line(kubectl.report("--kubeconfig", str(path), "--context", "nope")) == (
        f"noe report: --kubeconfig {path}: no context named 'nope' (contexts: a, b)"
    )
    assert len(api_a.requests_snapshot()) + len(api_b.requests_snapshot()) == before


def test_kubeconfig_variable_merges_files_as_kubectl_does(
    kubectl: Kubectl, api_a: FakeKubeAPI, api_b: FakeKubeAPI, tmp_path: Path
) -> None:
    # The first file sets current-context `b`, which only the second defines; both define cluster `a`.
    first = kubeconfig(
        tmp_path / "first",
        clusters=[cluster_entry("a", api_a)],
        users={"a": "token-a"},
        contexts={"a": ("a", "a")},
        current="b",
    )
    second = kubeconfig(
        tmp_path / "second",
        clusters=[cluster_entry("b", api_b), cluster_entry("a", api_b)],
        users={"b": "token-b", "a": "wrong"},
        contexts={"b": ("b", "b"), "a": ("a", "a")},
    )
    listed = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])}
    assert workloads(kubectl.report(env=listed)) == ["web-b"]
    assert workloads(kubectl.report("--context", "a", env=listed)) == ["job-a", "web-a"]  # the first file's `a`
    assert who_asked(api_a) == {"token:token-a"} and who_asked(api_b) == {"token:token-b"}
    # --kubeconfig is read alone: the second file sets no current-context
    assert one_line(kubectl.report("--kubeconfig", str(second), env=listed)) == (
        f"noe report: --kubeconfig {second}: no current-context set; give --context NAME (contexts: a, b)"
    )


def test_kubeconfig_dead_ends_are_one_line(kubectl: Kubectl, tmp_path: Path) -> None:
    gone = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "x"), str(tmp_path / "y")])}
    assert one_line(kubectl.report(env=gone)) == (
        f"noe report: no Kubernetes API: $KUBECONFIG ({tmp_path / 'x'}, {tmp_path / 'y'}): none of these files exists"
    )
    assert one_line(kubectl.report()) == (
        "noe report: no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or read a file with -f"
    )
    assert one_line(kubectl.report("--context", "prod")) == (
        "noe report: --context prod: no kubeconfig to find it in (give --kubeconfig FILE or set $KUBECONFIG)"
    )


def test_home_kubeconfig_is_the_default(kubectl: Kubectl, api_b: FakeKubeAPI) -> None:
    (kubectl.home / ".kube").mkdir()
    api_b.write_kubeconfig(kubectl.home / ".kube" / "config", token="token-b")
    assert workloads(kubectl.report()) == ["web-b"]
    assert who_asked(api_b) == {"token:token-b"}


def test_why_through_kubectl_reads_the_pod_of_the_contexts_namespace(
    kubectl: Kubectl, test_ca: CA, tmp_path: Path
) -> None:
    """``kubectl noe why``: the pod of the kubeconfig context's namespace, through kubectl's plugin mechanism."""
    from noe_core import testing
    from tests.support.fake_cluster import start_fake_cluster

    with start_fake_cluster(test_ca, tokens=("token-why",)) as cluster:
        for name, arch in (("x1", "amd64"), ("a1", "arm64")):
            node = testing.node(name, arch)
            node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
            cluster.add("nodes", node)
        submitted = testing.pod(["amd:1"], name="web-a", namespace="shop")
        pod = testing.decide(submitted, testing.platforms({"amd:1": PLATFORMS["amd:1"]})).obj
        pod["spec"]["nodeName"] = "a1"  # bound where its image does not run
        cluster.add("pods", pod)
        path = kubeconfig(
            tmp_path / "kc",
            clusters=[cluster_entry("c", cluster.api)],
            users={"u": "token-why"},
            contexts={"shop": ("c", "u")},
            current="shop",
        )
        doc = yaml.safe_load(path.read_text())
        doc["contexts"][0]["context"]["namespace"] = "shop"
        path.write_text(yaml.safe_dump(doc))
        proc = kubectl("noe", "why", "pod/web-a", "--kubeconfig", str(path), "--platforms", str(kubectl.platforms),
                       "-o", "json")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        answer = json.loads(proc.stdout)
        assert (answer["pod"]["namespace"], answer["verdict"]) == ("shop", "misplaced")
        assert answer["allowed"] == [{"os": "linux", "architecture": "amd64", "windowsBuild": None, "level": None}]
        assert answer["images"] == [{"image": "amd:1", "platforms": ["linux/amd64"], "source": "declared",
                                     "error": None}]  # fmt: skip
        missing = kubectl("noe", "why", "nowhere", "--kubeconfig", str(path), "--platforms", str(kubectl.platforms))
        assert missing.returncode == 1 and missing.stderr.startswith("noe why: pod shop/nowhere not read: ")
