"""``noe mutate``: the offline policy tester, as users run it (real process and in-process)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core import testing
from noe_core.util.json_patch import apply_patch
from tests.support.cli import run_cli
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
PLATFORMS = str(EXAMPLES / "platforms.json")
ARCH_NODES = [
    testing.node("amd64-node", "amd64"),
    testing.node("arm64-node", "arm64"),
    testing.node("arm-node", "arm"),
    testing.node("ppc-node", "ppc64le"),
    testing.node("win-node", "amd64", os="windows"),
]


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def allowed_arches(pod: dict[str, Any]) -> set[str]:
    return {n["metadata"]["labels"]["kubernetes.io/arch"] for n in ARCH_NODES if testing.schedulable(pod, n)}


def test_example_pod_is_patched_to_common_architectures() -> None:
    status, out, err = run_cli("mutate", "-f", str(EXAMPLES / "pod.yaml"), "--platforms", PLATFORMS)
    assert status == 0, err
    pod = yaml.safe_load(out)
    # nginx:1.27 and busybox:1.36 share amd64, arm64, arm and 386; windows nodes are excluded by the OS.
    assert allowed_arches(pod) == {"amd64", "arm64", "arm"}
    preferred = pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["weight"] == 100
    assert preferred[0]["preference"]["matchExpressions"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
    ]


def test_real_process_on_the_documented_command() -> None:
    """The issue's "done when": the command a new user types, as a separate process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOE_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "noe_web",
            "mutate",
            "-f",
            "examples/pod.yaml",
            "--platforms",
            "examples/platforms.json",
            "--explain",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    explained = yaml.safe_load(proc.stdout)
    assert explained["allowed"] is True
    assert explained["changed"] is True
    assert explained["commonArchitectures"] == ["386", "amd64", "arm", "arm64"]
    assert explained["reasons"], "--explain must say why"


def test_patch_output_applies_to_the_original(tmp_path: Path) -> None:
    status, out, _ = run_cli(
        "mutate", "-f", str(EXAMPLES / "pod.yaml"), "--platforms", PLATFORMS, "--patch", "-o", "json"
    )
    assert status == 0
    patch = json.loads(out)
    original = yaml.safe_load((EXAMPLES / "pod.yaml").read_text())
    status, mutated_out, _ = run_cli("mutate", "-f", str(EXAMPLES / "pod.yaml"), "--platforms", PLATFORMS, "-o", "json")
    assert apply_patch(original, patch) == json.loads(mutated_out)


def test_admission_review_input_prints_the_webhook_response() -> None:
    status, out, _ = run_cli(
        "mutate", "-f", str(EXAMPLES / "admission-review.json"), "--platforms", PLATFORMS, "-o", "json"
    )
    assert status == 0
    review = json.loads(out)
    request = json.loads((EXAMPLES / "admission-review.json").read_text())["request"]
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    assert review["response"]["uid"] == request["uid"]
    assert review["response"]["allowed"] is True
    assert review["response"]["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(review["response"]["patch"]))
    assert allowed_arches(apply_patch(request["object"], patch)) == {"amd64", "arm64", "arm"}


def test_pod_update_review_is_left_alone(tmp_path: Path) -> None:
    pod = testing.pod(images=["nginx:1.27"])
    review = testing.admission_review(pod, operation="UPDATE")
    status, out, _ = run_cli("mutate", "-f", write(tmp_path, "r.json", review), "--platforms", PLATFORMS, "-o", "json")
    assert status == 0
    response = json.loads(out)["response"]
    assert response["allowed"] is True
    assert "patch" not in response


def test_denied_pod_exits_3_with_the_message_on_stderr(tmp_path: Path) -> None:
    pod = testing.pod(images=["registry.corp/team/arm-worker:1.4.0", "registry.corp/team/x86-encoder:2.3.1"])
    status, _, err = run_cli("mutate", "-f", write(tmp_path, "pod.json", pod), "--platforms", PLATFORMS)
    assert status == 3
    assert "arm-worker" in err and "x86-encoder" in err
    assert "arm64" in err and "amd64" in err
    assert len(err.strip().splitlines()) == 1


def test_image_missing_from_platforms_file_warns_and_never_touches_the_network(tmp_path: Path) -> None:
    pod = testing.pod(images=["nginx:1.27", "unlisted.example.invalid/x:1"])
    status, out, _ = run_cli(
        "mutate", "-f", write(tmp_path, "pod.json", pod), "--platforms", PLATFORMS, "--explain", "-o", "json"
    )
    assert status == 0
    explained = json.loads(out)
    assert any("unlisted.example.invalid/x:1" in w for w in explained["warnings"])
    assert explained["commonArchitectures"] == ["386", "amd64", "arm", "arm64"]


def test_strict_namespace_denies_an_uninspectable_image(tmp_path: Path) -> None:
    pod = testing.pod(images=["nginx:1.27", "registry.corp/team/flaky-sidecar:0.9"], namespace="payments")
    status, _, err = run_cli(
        "mutate", "-f", write(tmp_path, "pod.json", pod), "--platforms", PLATFORMS, "--strict-namespaces", "payments"
    )
    assert status == 3
    assert "flaky-sidecar" in err


def test_go_style_flags_and_environment_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pod_file = str(EXAMPLES / "pod.yaml")
    status, out, _ = run_cli(
        "mutate", "-f", pod_file, "-platforms", PLATFORMS, "-preferred-arch=arm64", "-preference-mode", "required"
    )
    assert status == 0
    assert yaml.safe_load(out)["spec"]["nodeSelector"] == {"kubernetes.io/arch": "arm64"}
    monkeypatch.setenv("NOE_PREFERRED_ARCH", "arm64")
    monkeypatch.setenv("NOE_PREFERENCE_MODE", "required")
    status, out, _ = run_cli("mutate", "-f", pod_file, "--platforms", PLATFORMS)
    assert status == 0
    assert yaml.safe_load(out)["spec"]["nodeSelector"] == {"kubernetes.io/arch": "arm64"}


def test_workload_templates_are_mutated_like_their_pods(tmp_path: Path) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "worker", "namespace": "jobs"},
        "spec": {
            "selector": {"matchLabels": {"app": "worker"}},
            "template": {
                "metadata": {"labels": {"app": "worker"}},
                "spec": {"containers": [{"name": "w", "image": "registry.corp/team/arm-worker:1.4.0"}]},
            },
        },
    }
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "worker"}, "spec": {"ports": []}}
    text = yaml.safe_dump_all([deployment, service])
    status, out, _ = run_cli("mutate", "-f", "-", "--platforms", PLATFORMS, stdin=text)
    assert status == 0
    docs = list(yaml.safe_load_all(out))
    assert len(docs) == 2
    template = docs[0]["spec"]["template"]
    assert allowed_arches({"spec": template["spec"]}) == {"arm64"}
    assert docs[1] == service


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json: [", "neither JSON nor valid YAML"),
        ("", "holds no object"),
        ("- just\n- a list\n", "Kubernetes object"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"image": 5}]}}), "image"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}), "uid"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path, content: str, expected: str) -> None:
    status, out, err = run_cli("mutate", "-f", write(tmp_path, "bad.yaml", content), "--platforms", PLATFORMS)
    assert status == 2
    assert out == ""
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_bad_settings_and_files_exit_2(tmp_path: Path) -> None:
    pod_file = str(EXAMPLES / "pod.yaml")
    status, _, err = run_cli(
        "mutate",
        "-f",
        pod_file,
        "--platforms",
        PLATFORMS,
        "--preferred-arch",
        "arm64",
        "--cluster-schedulable-archs",
        "amd64",
    )
    assert status == 2 and "--preferred-arch" in err
    status, _, err = run_cli("mutate", "-f", str(tmp_path / "missing.yaml"), "--platforms", PLATFORMS)
    assert status == 2 and "cannot read" in err
    status, _, err = run_cli("mutate", "-f", pod_file, "--platforms", write(tmp_path, "p.json", {"x": 3}))
    assert status == 2 and "p.json" in err
    status, _, err = run_cli("mutate", "-f", pod_file, "--platforms", PLATFORMS, "--preferred-arch-weight", "0")
    assert status == 2 and "--preferred-arch-weight" in err


def test_without_platforms_file_images_are_read_from_the_registry(
    tmp_path: Path, registry: Any, pushed_images: dict[str, Any]
) -> None:
    """Same registry flags as noe serve: a multi-arch list and a single-arch config blob intersect to arm64."""
    multi = pushed_images["docker-manifest-list"].reference
    single_arm64 = pushed_images["docker-single-arm64"].reference
    pod = testing.pod(images=[multi, single_arm64])
    mark = registry.mark()
    status, out, err = run_cli(
        "mutate",
        "-f",
        write(tmp_path, "pod.json", pod),
        "--insecure-registries",
        registry.host,
        "--explain",
        "-o",
        "json",
    )
    assert status == 0, err
    explained = json.loads(out)
    assert explained["commonArchitectures"] == ["arm64"]
    assert not explained.get("warnings")
    assert registry.count(method="GET", path_contains="/manifests/", since=mark) == 2


def test_a_fallback_architecture_for_images_that_cannot_be_inspected(tmp_path: Path) -> None:
    """Rule 13a offline: the flaky sidecar of the example platforms file cannot be inspected."""
    doc = testing.pod(["nginx:1.27", "registry.corp/team/flaky-sidecar:0.9"])
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(doc))
    status, out, err = run_cli(
        "mutate", "-f", str(path), "--platforms", PLATFORMS, "--fallback-arch", "arm64", "-o", "json"
    )
    assert status == 0, err
    mutated = json.loads(out)
    assert mutated["metadata"]["labels"]["arch.noe.adevinta.com/fallback"] == "true"
    grid = [testing.node(f"n-{arch}", arch) for arch in ("amd64", "arm64", "386")]
    assert [n["metadata"]["name"] for n in grid if testing.schedulable(mutated, n)] == ["n-arm64"]
    status, out, err = run_cli("mutate", "-f", str(path), "--platforms", PLATFORMS, "-o", "json")
    assert status == 0 and "fallback" not in out
