"""``noe report`` on files: a generated 5,000-pod cluster checked against an independent computation.

The generator (tests/support/cluster.py) knows each workload's pods, integer
requests and each image's usable architectures before it writes them out in
mixed units and noisy platform lists; the expected report here — verdicts,
totals, monthly costs and savings, the rebuild plan (a naive greedy that
recomputes every gain at every step), the CSV rows and the PolicyReports — is
computed from that truth alone, without noe code.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.cluster import ARCHS, TrueWorkload, Truth, generate
from tests.support.paths import ROOT

MEMORY_BOUND_MB = 400
_OWN_PEAK = """
import atexit, runpy, sys

peak_file = sys.argv.pop(1)


def write_peak() -> None:
    with open("/proc/self/status") as status, open(peak_file, "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))


atexit.register(write_peak)
sys.argv[0] = "noe"
runpy.run_module("noe_web", run_name="__main__", alter_sys=True)
"""
"""``python -m noe_web`` that writes its peak resident memory (kB, VmHWM) to the file given first."""
CPU_PRICES = {"amd64": Fraction("0.0464"), "arm64": Fraction("0.0368")}
MEMORY_PRICES = {"amd64": Fraction("0.0058")}  # arm64 has none: its memory costs nothing
PRICE_ARGS = ["--prices", "amd64=0.0464,arm64=0.0368", "--memory-prices", "amd64=0.0058"]
TARGET = "arm64"  # the cheapest priced architecture
POLICY_REPORT_SCHEMA = json.loads(
    (ROOT / "tests" / "fixtures" / "crds" / "policyreport-v1alpha2.schema.json").read_text()
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Truth]:
    return generate(tmp_path_factory.mktemp("cluster"))


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
        # no generated image needs an x86-64 level or a Windows build: none runs on only some nodes
        "limited": {a: figures([w for w in items if expected_status(w, truth, a) == "limited"]) for a in ARCHS},
    }


def canonical(image: str) -> str:
    """The generator's image names fully spelled, by hand: Docker Hub's library, and the digest alone."""
    name, _, digest = image.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first):
        name = f"docker.io/{'library/' if '/' not in name else ''}{name}"
    return f"{name.rsplit(':', 1)[0]}@{digest}" if digest else name


def known(work: TrueWorkload, truth: Truth) -> list[frozenset[str]] | None:
    sets = [truth.support[i] for i in work.images]
    return None if any(s is None for s in sets) else [s for s in sets if s is not None]


def monthly(work: TrueWorkload, arch: str) -> Fraction:
    hourly = Fraction(work.cpu_millis, 1000) * CPU_PRICES[arch]
    hourly += Fraction(work.memory_bytes, 2**30) * MEMORY_PRICES.get(arch, Fraction(0))
    return 730 * hourly


def runnable_archs(work: TrueWorkload, truth: Truth) -> list[str]:
    sets = known(work, truth)
    return [] if sets is None else [a for a in ARCHS if all(a in s for s in sets)]


def saving(work: TrueWorkload, truth: Truth) -> Fraction:
    others = [monthly(work, a) for a in runnable_archs(work, truth) if a != TARGET]
    return max(others) - monthly(work, TARGET) if others else Fraction(0)


def cents(amount: Fraction) -> float:
    """Half away from zero, from the exact amount."""
    return math.copysign(math.floor(abs(amount) * 100 + Fraction(1, 2)) / 100, amount)


def expected_plan(truth: Truth) -> list[tuple[str, int, int, int, Fraction]]:
    """(image, workloads unlocked, CPU unlocked, runnable CPU after, saving after) per step, naively."""
    waiting = {}
    for key, work in truth.workloads.items():
        sets = known(work, truth)
        if sets is not None and any(TARGET not in s for s in sets):
            waiting[key] = {canonical(i) for i in work.images if TARGET not in (truth.support[i] or ())}
    ready = [w for w in truth.workloads.values() if TARGET in runnable_archs(w, truth)]
    cpu = sum(w.cpu_millis for w in ready)
    money = sum((saving(w, truth) for w in ready), Fraction(0))
    done: set[str] = set()
    left = set().union(*waiting.values())
    steps = []
    while left:

        def rank(image: str) -> tuple[int, int, str]:
            gain = sum(truth.workloads[k].cpu_millis for k, images in waiting.items() if images - done == {image})
            total = sum(truth.workloads[k].cpu_millis for k, images in waiting.items() if image in images)
            return -gain, -total, image

        best = min(left, key=rank)
        unlocked = [k for k, images in waiting.items() if images - done == {best}]
        done.add(best)
        left.discard(best)
        cpu += sum(truth.workloads[k].cpu_millis for k in unlocked)
        money += sum((saving(truth.workloads[k], truth) for k in unlocked), Fraction(0))
        steps.append((best, len(unlocked), sum(truth.workloads[k].cpu_millis for k in unlocked), cpu, money))
    return steps


def test_5000_pods_match_the_independent_computation(cluster: tuple[Path, Path, Truth], tmp_path: Path) -> None:
    cluster_file, platforms, truth = cluster
    assert truth.pods == 5000 and len({w.namespace for w in truth.workloads.values()}) == 40
    # A separate process, so its peak memory is its own. Not os.wait4's ru_maxrss: Linux carries a forked
    # child's high-water mark across exec, so that figure starts at this pytest process's size (over 400 MB
    # late in a full run). VmHWM, read by the child at exit, is its own memory since exec.
    started = time.monotonic()
    out_file = tmp_path / "report.json"
    peak_file = tmp_path / "peak-kb"
    with out_file.open("w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _OWN_PEAK,
                str(peak_file),
                "report",
                "-f",
                str(cluster_file),
                "--platforms",
                str(platforms),
                "-o",
                "json",
                *PRICE_ARGS,
            ],
            stdout=sink,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        _, errors_bytes = proc.communicate()
    seconds = time.monotonic() - started
    errors = errors_bytes.decode(errors="replace")
    assert proc.returncode == 0, errors
    peak_mb = int(peak_file.read_text()) / 1024
    print(f"\n5,000 pods with prices and plan: {seconds:.2f} s, peak RSS {peak_mb:.0f} MB")
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

    # money: each workload's cost where it runs, its saving on arm64, today's per namespace and in total
    for key, work in truth.workloads.items():
        row = got[key]
        assert row["monthly_cost"] == {a: cents(monthly(work, a)) for a in runnable_archs(work, truth)}, key
        assert row["monthly_saving"] == cents(saving(work, truth)), key
    ready = [w for w in items if TARGET in runnable_archs(w, truth)]
    assert report["savings"] == {
        "target": TARGET,
        "monthly": cents(sum((saving(w, truth) for w in ready), Fraction(0))),
        "by_namespace": {
            ns: cents(sum((saving(w, truth) for w in ws if w in ready), Fraction(0)))
            for ns, ws in sorted(by_ns.items())
        },
    }
    # the plan: every blocking image once, in the naive greedy's order, today's figures first
    plan = report["plan"]
    assert plan["target"] == TARGET and plan["monthly_saving"] == report["savings"]["monthly"]
    assert plan["runnable_cpu_cores"] == report["totals"]["runnable"][TARGET]["cpu_cores"]
    steps = expected_plan(truth)
    assert len(steps) >= 5  # enough images to order
    got_steps = [
        (
            s["image"],
            s["unlocked_workloads"],
            round(s["unlocked_cpu_cores"] * 1000),
            round(s["runnable_cpu_cores"] * 1000),
        )
        for s in plan["steps"]
    ]
    assert got_steps == [(image, count, cpu, runnable) for image, count, cpu, runnable, _ in steps]
    assert [s["monthly_saving"] for s in plan["steps"]] == [cents(amount) for *_, amount in steps]
    assert all(s["upgrade"] is None for s in plan["steps"])  # --platforms: no registry, so no hint
    # not the ranking by CPU blocked: a workload blocked by two images counts for both there
    blocked_cpu = {
        canonical(i): d["blocking"][TARGET]["cpu_cores"] for i, d in images.items() if TARGET in d["blocking"]
    }
    assert [s["image"] for s in plan["steps"]] != sorted(blocked_cpu, key=lambda i: (-blocked_cpu[i], i))


def test_table_ranks_the_images_that_block_most_cpu_from_arm64(cluster: tuple[Path, Path, Truth]) -> None:
    cluster_file, platforms, truth = cluster
    code, out, err = run_cli(*["report", "-f", str(cluster_file), "--platforms", str(platforms), "--top", "3"])
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


def test_table_shows_the_whole_plan_and_the_savings(cluster: tuple[Path, Path, Truth]) -> None:
    cluster_file, platforms, truth = cluster
    code, out, err = run_cli(
        *["report", "-f", str(cluster_file), "--platforms", str(platforms), "--top", "1", *PRICE_ARGS]
    )
    assert code == 0 and err == ""
    steps = expected_plan(truth)
    ready = [w for w in truth.workloads.values() if TARGET in runnable_archs(w, truth)]
    today = cents(sum((saving(w, truth) for w in ready), Fraction(0)))
    head, _, rest = out.partition("Rebuild plan toward arm64 (")
    assert rest.startswith(
        f"{sum(w.cpu_millis for w in ready) / 1000:g} cores runnable today, saving {today:,.2f} a month"
    )
    lines = rest.split("\n\n", 1)[0].splitlines()[2:]
    assert len(lines) == len(steps)  # the whole plan, not cut by --top
    for line, (image, count, cpu, runnable, amount) in zip(lines, steps, strict=True):
        assert line.split()[:6] == [
            str(steps.index((image, count, cpu, runnable, amount)) + 1),
            image,
            str(count),
            f"{cpu / 1000:g}",
            f"{runnable / 1000:g}",
            f"{cents(amount):,.2f}",
        ]
    assert "SAVING/MONTH ON ARM64" in head


def test_csv_is_one_row_per_workload(cluster: tuple[Path, Path, Truth]) -> None:
    cluster_file, platforms, truth = cluster
    code, out, err = run_cli(
        *["report", "-f", str(cluster_file), "--platforms", str(platforms), "-o", "csv", *PRICE_ARGS]
    )
    assert code == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == [
        "namespace",
        "kind",
        "name",
        "pods",
        "cpu_cores",
        "memory_bytes",
        "runnable_amd64",
        "runnable_arm64",
        "blocking_images_amd64",
        "blocking_images_arm64",
        "error",
        "monthly_cost_amd64",
        "monthly_cost_arm64",
        "monthly_saving",
    ]
    assert [(r["namespace"], r["kind"], r["name"]) for r in rows] == sorted(truth.workloads)
    mark = {"runnable": "yes", "blocked": "no", "unknown": "unknown"}
    for row in rows:
        work = truth.workloads[(row["namespace"], row["kind"], row["name"])]
        assert int(row["pods"]) == work.pods and int(row["memory_bytes"]) == work.memory_bytes
        assert round(float(row["cpu_cores"]) * 1000) == work.cpu_millis
        for arch in ARCHS:
            assert row[f"runnable_{arch}"] == mark[expected_status(work, truth, arch)]
            blockers = [i for i in work.images if truth.support[i] is not None and arch not in truth.support[i]]
            assert row[f"blocking_images_{arch}"] == " ".join(blockers)
            runs = arch in runnable_archs(work, truth)
            assert row[f"monthly_cost_{arch}"] == (f"{cents(monthly(work, arch)):.2f}" if runs else "")
        assert row["monthly_saving"] == f"{cents(saving(work, truth)):.2f}"
        assert bool(row["error"]) == any(truth.support[i] is None for i in work.images)


def test_policyreports_one_per_namespace_ready_to_apply(cluster: tuple[Path, Path, Truth]) -> None:
    cluster_file, platforms, truth = cluster
    code, out, err = run_cli(*["report", "-f", str(cluster_file), "--platforms", str(platforms), "-o", "policyreport"])
    assert code == 0 and err == ""
    docs = list(yaml.safe_load_all(out))
    namespaces = sorted({w.namespace for w in truth.workloads.values()})
    assert [d["metadata"]["namespace"] for d in docs] == namespaces
    for doc in docs:
        jsonschema.validate(doc, POLICY_REPORT_SCHEMA)
        assert doc["metadata"]["name"] == "noe-arm64"
        ns = doc["metadata"]["namespace"]
        works = sorted((k, w) for k, w in truth.workloads.items() if w.namespace == ns)
        assert [(r["resources"][0]["kind"], r["resources"][0]["name"]) for r in doc["results"]] == [
            (k[1], k[2]) for k, _ in works
        ]
        expected = {"runnable": "pass", "blocked": "fail", "unknown": "error"}
        outcomes = [expected[expected_status(w, truth, TARGET)] for _, w in works]
        assert [r["result"] for r in doc["results"]] == outcomes
        assert doc["summary"] == {o: outcomes.count(o) for o in ("pass", "fail", "warn", "error", "skip")}
        for result, (_, work) in zip(doc["results"], works, strict=True):
            blockers = [i for i in work.images if truth.support[i] is not None and TARGET not in truth.support[i]]
            unknown = [i for i in work.images if truth.support[i] is None]
            if result["result"] == "fail":
                assert result["message"].startswith(f"blocked on arm64 by {', '.join(blockers)}")
                assert all(f"cannot inspect {i}" in result["message"] for i in unknown)  # named too
            if result["result"] == "error":
                assert all(f"cannot inspect {i}" in result["message"] for i in unknown)


def test_a_policyreport_needs_a_target(tmp_path: Path) -> None:
    platforms = tmp_path / "p.json"
    platforms.write_text(json.dumps({"a:1": ["linux/amd64"]}))
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(_pod("x", "a:1")))
    archs = ["--cluster-schedulable-archs", "amd64,riscv64"]
    code, out, err = run_cli(*["report", "-f", str(pod), "--platforms", str(platforms), "-o", "policyreport", *archs])
    assert (code, out) == (2, "") and err == "noe report: -o policyreport needs a target architecture: give --target\n"
    code, out, err = run_cli(
        *["report", "-f", str(pod), "--platforms", str(platforms), "-o", "policyreport", *archs, "--target", "amd64"]
    )
    assert code == 0 and yaml.safe_load(out)["results"][0]["result"] == "pass"


def test_prices_widen_the_architectures_of_interest(tmp_path: Path) -> None:
    platforms = tmp_path / "p.json"
    platforms.write_text(json.dumps({"a:1": ["linux/amd64", "linux/riscv64"]}))
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(_pod("x", "a:1")))
    code, out, err = run_cli(
        *["report", "-f", str(pod), "--platforms", str(platforms), "-o", "json", "--prices", "amd64=0.04,riscv64=0.01"]
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["architectures"] == ["amd64", "arm64", "riscv64"]
    assert report["plan"]["target"] == "riscv64"  # the cheapest
    assert report["workloads"][0]["monthly_cost"] == {"amd64": 29.2, "riscv64": 7.3}
    assert report["savings"]["monthly"] == 21.9


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
    code, out, err = run_cli(
        *["report", "-f", "-", "--platforms", str(platforms), "-o", "json"], stdin=yaml.safe_dump_all(docs)
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
    code, out, _ = run_cli(
        *[
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
    code, out, _ = run_cli(
        *["report", "-f", str(pod), "--platforms", str(platforms), "-o", "json", "--system-os", "windows"]
    )
    assert json.loads(out)["workloads"][0]["status"] == {"amd64": "blocked", "arm64": "runnable"}


def test_levels_and_windows_builds_in_every_output(tmp_path: Path) -> None:
    platforms = tmp_path / "p.json"
    platforms.write_text(
        json.dumps(
            {
                "fast:1": ["linux/amd64/v3", "linux/arm64"],
                "iis:1": ["windows(10.0.20348.1)/amd64"],
                "model:1": {"artifactType": "application/vnd.example.model.v1"},
            }
        )
    )
    pods = tmp_path / "pods.json"
    pods.write_text(
        json.dumps({"kind": "List", "items": [_pod("fast", "fast:1"), _pod("iis", "iis:1"), _pod("m", "model:1")]})
    )
    base = ["report", "-f", str(pods), "--platforms", str(platforms), "--system-os", "linux,windows"]
    code, out, _ = run_cli(*base, "-o", "json")
    assert code == 0
    rows = {w["name"]: w for w in json.loads(out)["workloads"]}
    assert rows["fast"]["status"] == {"amd64": "limited", "arm64": "runnable"}
    assert rows["fast"]["needs"] == {"amd64": "linux/amd64 v3+"}
    assert rows["iis"]["needs"] == {"amd64": "windows/amd64 build 10.0.20348"}
    assert rows["m"]["status"] == {"amd64": "runnable", "arm64": "runnable"}
    code, out, _ = run_cli(*base)
    assert code == 0
    fast = next(line for line in out.splitlines() if " fast " in line).split()
    assert fast[6:8] == ["v3+", "yes"]
    code, out, _ = run_cli(*base, "-o", "csv")
    assert "limited: linux/amd64 v3+" in out and "limited: windows/amd64 build 10.0.20348" in out


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
        (json.dumps(_pod("x", "a:1")), ["--prices", "arm64=-1"], "argument --prices: 'arm64=-1' is not valid"),
        (json.dumps(_pod("x", "a:1")), ["--memory-prices", "arm64=1"], "--memory-prices names arm64, which --prices"),
        (
            json.dumps(_pod("x", "a:1")),
            ["--prices", "s390x=1", "--cluster-schedulable-archs", "amd64,arm64"],
            "--prices prices s390x, not among the architectures of interest",
        ),
        (
            json.dumps(_pod("x", "a:1")),
            ["--target", "s390x", "--cluster-schedulable-archs", "amd64,arm64"],
            "--target s390x is not among the architectures of interest",
        ),
        (json.dumps(_pod("x", "a:1")), ["--prices", "amd64=1", "--target", "arm64"], "--target arm64 has no price"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: str | None, args: list[str], message: str) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(*["report", "-f", str(path), *args])
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
    monkeypatch.delitem(sys.modules, "noe_web.report.html", raising=False)
    path, platforms = tmp_path / "pod.json", tmp_path / "p.json"
    path.write_text(json.dumps(_pod("x", "a:1")))
    platforms.write_text(json.dumps({"a:1": ["linux/amd64"]}))
    code, out, err = run_cli(
        *["report", "-f", str(path), "--platforms", str(platforms), "--html", str(tmp_path / "r.html")]
    )
    assert code == 2 and out == ""
    assert err == "noe report: needs the report extra: pip install 'noe-webhook[report]' (module pygal is missing)\n"
