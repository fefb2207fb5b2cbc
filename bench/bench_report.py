"""``noe report`` on a generated 5,000-pod cluster file: run time, peak memory, and registry requests.

Run: ``python bench/bench_report.py [ROUNDS] [PODS]``. Writes the cluster and
platforms files of tests/support/cluster.py (40 namespaces) to a temporary
directory, then runs, each as its own process so its peak RSS is its own:

* ``baseline`` — Python reading the same file with ``json.load`` (the floor any
  reader of it pays: interpreter start-up and parsing);
* ``report``   — ``noe report -f FILE --platforms FILE -o json``;
* ``priced``   — the same with ``--prices``/``--memory-prices`` (savings and the rebuild plan);
* ``html``     — the priced report with ``--html`` (templates and SVG charts);

then, against the real registry (Debian's distribution, started here) holding
the same images and newer tags for some blocking ones, with and without arm64
(tests/support/cluster.py's ``NEWER_TAGS``):

* ``registry`` — the priced report reading every image from it, ``--no-upgrade-hints``;
* ``hints``    — the same with newer-tag hints (the default),

and prints the median wall time and peak RSS of each, the ratios to the
baseline, and the requests each registry run cost (from the registry's own
access log): what the hints add is the difference.
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

from tests.support.cluster import generate, push_cluster_images
from tests.support.registry_server import start_registry

ROOT = Path(__file__).resolve().parent.parent


PRICES = ["--prices", "amd64=0.0464,arm64=0.0368", "--memory-prices", "amd64=0.0058,arm64=0.0046"]


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


def against_registry(tmp: Path, rounds: int, pods: int) -> dict[str, tuple[float, float, int, dict[str, int]]]:
    """The registry cases: time, peak RSS, requests in all and by kind (median run's)."""
    out: dict[str, tuple[float, float, int, dict[str, int]]] = {}
    with start_registry(tmp / "registry") as registry:
        (tmp / "on-registry").mkdir()
        cluster, _, truth = generate(tmp / "on-registry", pods=pods, namespaces=40, registry=registry.host)
        push_cluster_images(registry, truth)
        base = [sys.executable, "-m", "noe_web", "report", "-f", str(cluster), "-o", "json", *PRICES]
        base += ["--insecure-registries", registry.host, "--lookup-timeout", "30"]
        for name, extra in (("registry", ["--no-upgrade-hints"]), ("hints", [])):
            runs = []
            for _ in range(rounds):
                mark = registry.mark()
                seconds, rss = measure([*base, *extra])
                asked = registry.requests_since(mark)
                kinds = {
                    "tags/list": sum("/tags/list" in e.path for e in asked),
                    "manifests GET": sum("/manifests/" in e.path and e.method == "GET" for e in asked),
                    "manifests HEAD": sum("/manifests/" in e.path and e.method == "HEAD" for e in asked),
                    "blobs": sum("/blobs/" in e.path for e in asked),
                }
                runs.append((seconds, rss, len(asked), kinds))
            runs.sort(key=lambda r: r[0])
            out[name] = runs[len(runs) // 2]
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    pods = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    with tempfile.TemporaryDirectory(prefix="noe-bench-report-") as tmp:
        cluster, platforms, truth = generate(Path(tmp), pods=pods, namespaces=40)
        size = cluster.stat().st_size / 2**20
        print(f"{truth.pods} pods, {len(truth.workloads)} workloads, {cluster.name} {size:.1f} MiB; {rounds} rounds")
        offline = [sys.executable, "-m", "noe_web", "report", "-f", str(cluster), "--platforms", str(platforms)]
        offline += ["-o", "json"]
        cases = {
            "baseline": [sys.executable, "-c", f"import json; json.load(open({str(cluster)!r}))"],
            "report": offline,
            "priced": [*offline, *PRICES],
            "html": [*offline, *PRICES, "--html", str(Path(tmp) / "report.html")],
        }
        results: dict[str, tuple[float, float]] = {}
        for name, argv in cases.items():
            runs = [measure(argv) for _ in range(rounds)]
            results[name] = (statistics.median(r[0] for r in runs), max(r[1] for r in runs))
        registry_runs = against_registry(Path(tmp), rounds, pods)
        for name, (seconds, rss, _, _) in registry_runs.items():
            results[name] = (seconds, rss)
        base_time, base_rss = results["baseline"]
        for name, (seconds, rss) in results.items():
            print(
                f"{name:9s} {seconds:6.2f} s  peak RSS {rss:6.1f} MiB  "
                f"x{seconds / base_time:5.1f} time, x{rss / base_rss:4.1f} memory vs baseline"
            )
        for name, (_, _, total, kinds) in registry_runs.items():
            print(f"{name:9s} {total:4d} registry requests: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
        (_, _, plain, plain_kinds), (_, _, hinted, hint_kinds) = registry_runs["registry"], registry_runs["hints"]
        added = {k: hint_kinds[k] - plain_kinds[k] for k in hint_kinds}
        print(f"the hints cost {hinted - plain} requests: " + ", ".join(f"{k} {v}" for k, v in added.items()))


if __name__ == "__main__":
    main()
