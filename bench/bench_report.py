"""``noe report`` on a generated 5,000-pod cluster file: run time and peak memory.

Run: ``python bench/bench_report.py [ROUNDS] [PODS]``. Writes the cluster and
platforms files of tests/support/cluster.py (40 namespaces) to a temporary
directory, then runs, each as its own process so its peak RSS is its own:

* ``baseline`` — Python reading the same file with ``json.load`` (the floor any
  reader of it pays: interpreter start-up and parsing);
* ``report``   — ``noe report -f FILE --platforms FILE -o json``;
* ``html``     — the same with ``--html`` (templates and SVG charts).

and prints the median wall time and peak RSS of each and the ratios to the baseline.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.cluster import generate

ROOT = Path(__file__).resolve().parent.parent


def measure(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    with proc.stderr:
        errors = proc.stderr.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {errors}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    pods = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    with tempfile.TemporaryDirectory(prefix="noe-bench-report-") as tmp:
        cluster, platforms, truth = generate(Path(tmp), pods=pods, namespaces=40)
        size = cluster.stat().st_size / 2**20
        print(f"{truth.pods} pods, {len(truth.workloads)} workloads, {cluster.name} {size:.1f} MiB; {rounds} rounds")
        cases = {
            "baseline": [sys.executable, "-c", f"import json; json.load(open({str(cluster)!r}))"],
            "report": [
                sys.executable,
                "-m",
                "noe_web",
                "report",
                "-f",
                str(cluster),
                "--platforms",
                str(platforms),
                "-o",
                "json",
            ],
            "html": [
                sys.executable,
                "-m",
                "noe_web",
                "report",
                "-f",
                str(cluster),
                "--platforms",
                str(platforms),
                "-o",
                "json",
                "--html",
                str(Path(tmp) / "report.html"),
            ],
        }
        results: dict[str, tuple[float, float]] = {}
        for name, argv in cases.items():
            runs = [measure(argv) for _ in range(rounds)]
            results[name] = (statistics.median(r[0] for r in runs), max(r[1] for r in runs))
        base_time, base_rss = results["baseline"]
        for name, (seconds, rss) in results.items():
            print(
                f"{name:9s} {seconds:6.2f} s  peak RSS {rss:6.1f} MiB  "
                f"x{seconds / base_time:5.1f} time, x{rss / base_rss:4.1f} memory vs baseline"
            )


if __name__ == "__main__":
    main()
