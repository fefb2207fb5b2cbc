"""What rules 14-18 cost per admission, and that the common linux-only case costs what it did.

Run: ``python bench/bench_platforms.py [ROUNDS] [--base REV]``. Two parts:

1. **before / after** — the 3-container pod of ``bench_admit.py`` (warm lookups, default settings:
   ``--system-os linux``, levels off) through :func:`noe_core.admission.admitting.admit`, in this tree and in
   REV (default: the merge base with ``main``, exported with ``git archive`` to a temporary
   directory), each in its own process, alternately, 5 times. Each process gives admit's time as a
   ratio to ``json.loads + json.dumps`` of the same review (the floor every webhook pays), which a
   shared machine's load weighs on alike; the line printed is the median of after/before.
2. **each rule** — in this process, the same admission with one new thing at a time, as a ratio to
   the linux-only case timed alongside it (medians of 7 interleaved rounds): several OSes, Windows
   images with builds, levels on (``nfd``) and off (the warning), an image volume, an artifact
   volume, and ``kubectl debug`` checks (pinned pod: no Node read; a Node from the webhook's cache).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noe_core import testing  # noqa: E402
from noe_core.admission.admitting import admit  # noqa: E402
from noe_core.admission.review import parse_admission_review  # noqa: E402
from noe_core.image.image_platforms import ImagePlatforms, fixed  # noqa: E402
from noe_core.image.node_platform import NodePlatform  # noqa: E402
from noe_core.placement.ephemeral import NodeFailure  # noqa: E402
from noe_core.policies.settings import PolicySettings  # noqa: E402

# The pod and platforms of bench_admit.py, so both benches time the same common case.
MEASURE_ONE = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import importlib.util
spec = importlib.util.spec_from_file_location("bench_admit", sys.argv[1] + "/bench/bench_admit.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
from noe_core.policies.settings import PolicySettings
rounds = int(sys.argv[2])
body = bench._review_bytes()
run = bench._admit_callable(PolicySettings())
doc = json.loads(body)
run(doc)
ratios = []
for _ in range(7):
    floor = bench._median_us(lambda: json.dumps(json.loads(body)), rounds)
    ratios.append(bench._median_us(lambda: run(doc), rounds) / floor)
print(statistics.median(ratios))
"""


def _export(rev: str) -> Path:
    """The tree of ``rev`` in a temporary directory (never a git worktree: nothing of the repository changes)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    target = Path(tempfile.mkdtemp(prefix="noe-bench-base-"))
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def _ratio_in(tree: Path, rounds: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE_ONE, str(tree), str(rounds)], check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip())


def before_after(rev: str, rounds: int) -> None:
    base = _export(rev)
    pairs = []
    for _ in range(5):
        before, after = _ratio_in(base, rounds), _ratio_in(ROOT, rounds)
        pairs.append((before, after))
    ratio = statistics.median(a / b for b, a in pairs)
    print(f"linux-only common case (admit / json floor), {rev[:12]} vs this tree, 5 alternations:")
    print(
        f"  before x{statistics.median(b for b, _ in pairs):.2f}   after x{statistics.median(a for _, a in pairs):.2f}"
    )
    print(f"  after / before: x{ratio:.3f}")


# --- part 2: each rule, in this process ------------------------------------------------------

LINUX = ["linux/amd64", "linux/arm64/v8", "linux/arm/v7"]
PLATFORMS: dict[str, Any] = {
    "registry.example/app:1": ImagePlatforms.of(*LINUX),
    "registry.example/sidecar:2": ImagePlatforms.of("linux/amd64", "linux/arm64"),
    "registry.example/init:3": ImagePlatforms.of("linux/amd64", "linux/arm64", "unknown/unknown"),
    "registry.example/fast:1": ImagePlatforms.of("linux/amd64/v3", "linux/arm64"),
    "registry.example/iis:1": ImagePlatforms.of("windows(10.0.17763.5458)/amd64", "windows(10.0.20348.2227)/amd64"),
    "registry.example/agent:1": ImagePlatforms.of("windows(10.0.20348.2227)/amd64", "linux/amd64", "linux/arm64"),
    "registry.example/model:1": ImagePlatforms.artifact("application/vnd.example.model.v1"),
    "registry.example/data:1": ImagePlatforms.of("linux/amd64", "linux/arm64"),
    "registry.example/busybox:1": ImagePlatforms.of("linux/amd64", "linux/arm64/v8"),
}
INSPECT = fixed(PLATFORMS)
APP, SIDECAR, INIT = "registry.example/app:1", "registry.example/sidecar:2", "registry.example/init:3"


def _review(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return json.loads(json.dumps(testing.admission_review(obj, uid="bench", **kw)))


def _pod(images: list[str], **kw: Any) -> dict[str, Any]:
    pod = testing.pod(images=images[:2], init_images=images[2:], labels={"app": "web"}, **kw)
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return pod


def _debug_review(**pod_kw: Any) -> dict[str, Any]:
    running = _pod([APP, SIDECAR, INIT], node_name="node-a", **pod_kw)
    after = json.loads(json.dumps(running))
    after["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "registry.example/busybox:1"}]
    return _review(after, operation="UPDATE", old_object=running, sub_resource="ephemeralcontainers")


def _case(doc: dict[str, Any], settings: PolicySettings) -> Callable[[], Any]:
    def run() -> Any:
        return admit(parse_admission_review(doc), settings, INSPECT, nodes=_node).response

    return run


def _node(name: str) -> NodePlatform | NodeFailure:
    return NodePlatform("linux", "arm64")


def each_rule(rounds: int) -> None:
    default = PolicySettings()
    mixed = PolicySettings(system_os="linux,windows")
    cases: dict[str, Callable[[], Any]] = {
        "linux-only (today)": _case(_review(_pod([APP, SIDECAR, INIT])), default),
        "--system-os linux,windows, same pod": _case(_review(_pod([APP, SIDECAR, INIT])), mixed),
        "Windows pod, 2 images with builds": _case(
            _review(_pod(["registry.example/iis:1", "registry.example/agent:1"])), mixed
        ),
        "v3-only image, --x86-64-levels nfd": _case(
            _review(_pod([APP, "registry.example/fast:1", INIT])), PolicySettings(x86_64_levels="nfd")
        ),
        "v3-only image, levels off (warning)": _case(_review(_pod([APP, "registry.example/fast:1", INIT])), default),
        "+1 image volume": _case(
            _review(_pod([APP, SIDECAR, INIT], volume_images=["registry.example/data:1"])), default
        ),
        "+1 artifact image volume": _case(
            _review(_pod([APP, SIDECAR, INIT], volume_images=["registry.example/model:1"])), default
        ),
        "kubectl debug, pod pinned (no Node read)": _case(
            _debug_review(node_selector={"kubernetes.io/arch": "arm64"}), default
        ),
        "kubectl debug, Node from the cache": _case(_debug_review(), default),
    }
    for run in cases.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(7):
        for name, run in cases.items():
            samples = []
            for _ in range(rounds):
                start = time.perf_counter_ns()
                run()
                samples.append(time.perf_counter_ns() - start)
            times[name].append(statistics.median(samples) / 1000)
    base = times["linux-only (today)"]
    print(f"\neach rule, admit() on a decoded review, medians of {rounds} calls, 7 interleaved rounds:")
    for name, values in times.items():
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"  {name:42} {statistics.median(values):7.1f} us   x{ratio:.2f} of linux-only")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rounds", nargs="?", type=int, default=1000)
    parser.add_argument("--base", default="", help="the revision to compare with (default: merge base with main)")
    parser.add_argument("--skip-before-after", action="store_true")
    ns = parser.parse_args()
    if not ns.skip_before_after:
        rev = (
            ns.base
            or subprocess.run(
                ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], check=True, capture_output=True, text=True
            ).stdout.strip()
        )
        before_after(rev, ns.rounds)
    each_rule(ns.rounds)


if __name__ == "__main__":
    main()
