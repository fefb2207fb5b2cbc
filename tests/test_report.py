"""``noe report`` on files: a generated 5,000-pod cluster checked against an independent computation.

The generator (tests/support/cluster.py) knows each workload's pods, integer
requests and each image's usable architectures before it writes them out in
mixed units and noisy platform lists; the expected report here is computed from
that truth alone, without noe code.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import ARCHS, TrueWorkload, Truth, generate
from tests.test_mutate_cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
MEMORY_BOUND_MB = 400


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Truth]:
    return generate(tmp_path_factory.mktemp("cluster"))


def run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """``noe`` in-process: exit status, standard output, standard error."""
    return run_cli(*argv, stdin=stdin)


# ------------------------------------------------------------------ the independent computation


def expected_status(work: TrueWorkload, truth: Truth, arch: str) -> str:
    known = [truth.support[i] for i in work.images if truth.support[i] is not None]
    if any(arch not in archs for archs in known if archs is not None):
        return "blocked"
    return "unknown" if len(known) < len(work.images) else "runnable"


def figures(items: list[TrueWorkload]) -> dict[str, Any]:
    cpu = sum(w.cpu_millis for w in items)
    return {
        "workloads": len(items),
        "pods": sum(w.pods for w in items),
        "cpu_cores": cpu // 1000 if cpu % 1000 == 0 else cpu / 1000,
        "memory_bytes": sum(w.memory_bytes for w in items),
    }


def expected_totals(items: list[TrueWorkload], truth: Truth) -> dict[str, Any]:
    return {
        **figures(items),
        "runnable": {a: figures([w for w in items if expected_status(w, truth, a) == "runnable"]) for a in ARCHS},
        "blocked": {a: figures([w for w in items if expected_status(w, truth, a) == "blocked"]) for a in ARCHS},
        "unknown": figures([w for w in items if any(truth.support[i] is None for i in w.images)]),
    }


def test_5000_pods_match_the_independent_computation(cluster: tuple[Path, Path, Truth], tmp_path: Path) -> None:
    cluster_file, platforms, truth = cluster
    assert truth.pods == 5000 and len({w.namespace for w in truth.workloads.values()}) == 40
    # A separate process, so its peak memory is its own (os.wait4 gives that child's rusage).
    started = time.monotonic()
    out_file = tmp_path / "report.json"
    with out_file.open("w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "noe_web",
                "report",
                "-f",
                str(cluster_file),
                "--platforms",
                str(platforms),
                "-o",
                "json",
            ],
            stdout=sink,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    with proc.stderr:
        errors = proc.stderr.read()
    assert proc.returncode == 0, errors
    peak_mb = usage.ru_maxrss / 1024
    print(f"\n5,000 pods: {seconds:.2f} s, peak RSS {peak_mb:.0f} MB")
    assert peak_mb < MEMORY_BOUND_MB
    report = json.loads(out_file.read_text())

    assert report["architectures"] == list(ARCHS)
    items = list(truth.workloads.values())
    assert report["totals"] == expected_totals(items, truth)
    by_ns: dict[str, list[TrueWorkload]] = {}
    for w in items:
        by_ns.setdefault(w.namespace, []).append(w)
    assert report["namespaces"] == {ns: expected_totals(ws, truth) for ns, ws in sorted(by_ns.items())}

    got = {(w["namespace"], w["kind"], w["name"]): w for w in report["workloads"]}
    assert set(got) == set(truth.workloads)
    assert [(w["namespace"], w["kind"], w["name"]) for w in report["workloads"]] == sorted(truth.workloads)
    for key, work in truth.workloads.items():
        row = got[key]
        assert row["pods"] == work.pods, key
        assert round(row["cpu_cores"] * 1000) == work.cpu_millis, key
        assert row["memory_bytes"] == work.memory_bytes, key
        assert row["images"] == work.images, key
        for arch in ARCHS:
            assert row["status"][arch] == expected_status(work, truth, arch), (key, arch)
            blockers = [i for i in work.images if truth.support[i] is not None and arch not in truth.support[i]]
            assert row["blocking"][arch] == blockers, (key, arch)
        unknown = [i for i in work.images if truth.support[i] is None]
        if unknown:
            assert row["architectures"] is None
            assert all(image in row["error"] for image in unknown)
        else:
            assert "error" not in row
            known = [truth.support[i] or frozenset() for i in work.images]
            # no --cluster-schedulable-archs: every architecture of the system OS is listed
            assert set(row["architectures"]) & set(ARCHS) == frozenset.intersection(*known)

    # images: what they offer or why not, who uses them, and the CPU they block from each architecture
    images = {i["image"]: i for i in report["images"]}
    used = {i for w in items for i in w.images}
    assert set(images) == used
    for image in used:
        archs = truth.support[image]
        if archs is None:
            assert "error" in images[image] and "architectures" not in images[image]
        else:
            assert set(images[image]["architectures"]) & set(ARCHS) == archs
        users = sorted((w.namespace, w.kind, w.name) for w in items if image in w.images)
        assert [(u["namespace"], u["kind"], u["name"]) for u in images[image]["workloads"]] == users
        for arch in ARCHS:
            blocked = [w for w in items if archs is not None and arch not in archs and image in w.images]
            if blocked:
                assert images[image]["blocking"][arch] == figures(blocked)
            else:
                assert arch not in images[image]["blocking"]
    # rule 4: unknown/unknown dropped, arm/v7 read as arm, windows entries of other images ignored
    assert images["docker.io/library/nginx:1.27"]["architectures"] == ["amd64", "arm", "arm64"]
    assert images["ghcr.io/org/win-only:1"]["architectures"] == []
    # the flaky image is declared as failing, the unlisted one is not declared at all
    assert "503" in images["registry.corp/team/flaky:0.9"]["error"]
    assert "no platforms declared" in images["quay.io/unlisted/tool:1"]["error"]


def test_table_ranks_the_images_that_block_most_cpu_from_arm64(cluster: tuple[Path, Path, Truth]) -> None:
    cluster_file, platforms, truth = cluster
    code, out, err = run(["report", "-f", str(cluster_file), "--platforms", str(platforms), "--top", "3"])
    assert code == 0 and err == ""
    items = list(truth.workloads.values())
    cpu_blocked: dict[str, int] = {}
    for w in items:
        for image in w.images:
            archs = truth.support[image]
            if archs is not None and "arm64" not in archs:
                cpu_blocked[image] = cpu_blocked.get(image, 0) + w.cpu_millis
    ranked = sorted(cpu_blocked, key=lambda i: (-cpu_blocked[i], i))[:3]
    section = out.split("Images that block the most CPU from arm64:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in section[1:]] == ranked
    assert f"{cpu_blocked[ranked[0]] / 1000:g}" in section[1]
    assert "Images that could not be inspected (2):" in out
    header = out.splitlines()[0].split()
    assert header[:6] == ["NAMESPACE", "KIND", "NAME", "PODS", "CPU", "MEMORY"] and "ARM64" in header


def _pod(name: str, image: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", **meta},
        "spec": {"containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "1"}}}]},
    }


def test_yaml_documents_on_stdin_with_the_owners_they_carry(tmp_path: Path) -> None:
    platforms = tmp_path / "p.json"
    platforms.write_text(json.dumps({"arm:1": ["linux/arm64"], "multi:1": ["linux/amd64", "linux/arm64"]}))
    import yaml

    docs = [
        _pod(
            "web-abc-1",
            "arm:1",
            labels={"pod-template-hash": "abc"},
            ownerReferences=[{"kind": "ReplicaSet", "name": "web-abc", "controller": True}],
        ),
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-abc",
                "namespace": "shop",
                "ownerReferences": [{"kind": "Rollout", "name": "web"}],
            },
        },
        _pod("solo", "multi:1"),
        {"kind": "Service", "metadata": {"name": "web", "namespace": "shop"}},
    ]
    code, out, err = run(
        ["report", "-f", "-", "--platforms", str(platforms), "-o", "json"], stdin=yaml.safe_dump_all(docs)
    )
    assert code == 0
    assert "skipped 1 objects that are not Pods, ReplicaSets or Jobs (Service: 1)" in err
    report = json.loads(out)
    rows = {(w["kind"], w["name"]): w for w in report["workloads"]}
    assert rows[("Rollout", "web")]["status"] == {"amd64": "blocked", "arm64": "runnable"}
    assert rows[("Rollout", "web")]["blocking"] == {"amd64": ["arm:1"], "arm64": []}
    assert rows[("Pod", "solo")]["architectures"] == ["amd64", "arm64"]
    assert report["totals"]["runnable"]["arm64"] == {"workloads": 2, "pods": 2, "cpu_cores": 2, "memory_bytes": 0}


def test_schedulable_archs_and_system_os_are_the_webhooks_flags(tmp_path: Path) -> None:
    platforms = tmp_path / "p.json"
    platforms.write_text(json.dumps({"a:1": ["linux/amd64", "windows/arm64", "linux/riscv64"]}))
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(_pod("x", "a:1")))
    code, out, _ = run(
        [
            "report",
            "-f",
            str(pod),
            "--platforms",
            str(platforms),
            "-o",
            "json",
            "--cluster-schedulable-archs",
            "arm64,riscv64",
        ]
    )
    assert code == 0
    report = json.loads(out)
    assert report["architectures"] == ["arm64", "riscv64"]
    assert report["workloads"][0]["status"] == {"arm64": "blocked", "riscv64": "runnable"}
    code, out, _ = run(
        ["report", "-f", str(pod), "--platforms", str(platforms), "-o", "json", "--system-os", "windows"]
    )
    assert json.loads(out)["workloads"][0]["status"] == {"amd64": "blocked", "arm64": "runnable"}


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, [], "cannot read"),
        ("{not json: [", [], "neither JSON nor valid YAML"),
        (
            json.dumps(
                _pod("x", "a:1")
                | {"spec": {"containers": [{"image": "a", "resources": {"requests": {"memory": "12 GB"}}}]}}
            ),
            [],
            "Pod shop/x: spec.containers[0].resources.requests.memory",
        ),
        (json.dumps({"kind": "Pod", "metadata": {}}), [], "a Pod has no metadata.name"),
        (json.dumps(_pod("x", "a:1")), ["--concurrency", "0"], "argument --concurrency: '0' must be from 1 to 256"),
        (
            json.dumps(_pod("x", "a:1")),
            ["--platforms", "/nonexistent.json"],
            "--platforms: '/nonexistent.json' is not an existing file",
        ),
        (json.dumps(_pod("x", "a:1")), ["--cluster-schedulable-archs", "arm 64"], "--cluster-schedulable-archs"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: str | None, args: list[str], message: str) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run(["report", "-f", str(path), *args])
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("noe report: ") and message in err, err


def test_progress_bar_only_on_a_terminal(cluster: tuple[Path, Path, Truth]) -> None:
    cluster_file, platforms, truth = cluster
    args = [
        sys.executable,
        "-m",
        "noe_web",
        "report",
        "-f",
        str(cluster_file),
        "--platforms",
        str(platforms),
        "-o",
        "json",
    ]
    piped = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, check=False)
    assert piped.returncode == 0 and piped.stderr == ""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a real terminal has a size
    try:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=slave, cwd=ROOT)
        os.close(slave)
        seen = b""
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(60) == 0
    finally:
        os.close(master)
    count = len({image for w in truth.workloads.values() for image in w.images})
    assert b"noe report: images" in seen, seen[-300:]
    assert f"0/{count} ".encode() in seen, seen[-300:]  # the bar, with the number of images to look up


def test_html_without_the_report_extra_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pygal", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "noe_web.report_html", raising=False)
    path, platforms = tmp_path / "pod.json", tmp_path / "p.json"
    path.write_text(json.dumps(_pod("x", "a:1")))
    platforms.write_text(json.dumps({"a:1": ["linux/amd64"]}))
    code, out, err = run(["report", "-f", str(path), "--platforms", str(platforms), "--html", str(tmp_path / "r.html")])
    assert code == 2 and out == ""
    assert err == "noe report: needs the report extra: pip install 'noe-webhook[report]' (module pygal is missing)\n"
