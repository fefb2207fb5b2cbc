"""``noe report --kubeconfig`` on a live cluster of realistic pods: time and peak memory against a bare client.

Run: ``python bench/bench_report_live.py [PODS] [NODES] [CODE]`` (default 60000 3000; CODE: the
checkout ``noe report`` runs from, for a "before" figure). The stand-in API
(tests/support/served_lists.py) serves realistic pods (tests/support/realistic_cluster.py) from
bytes prepared before the clock starts. Each side runs as its own process, so its peak RSS is its own:

Peak memory is the child's own ``VmHWM`` read as it exits (``ru_maxrss`` of a child starts from the
parent's, which holds the prepared bytes).

* ``bare``   — a minimal client (the same ``KubeClient``) that lists every pod in pages of 500,
  decodes each page with ``json`` and keeps the pods: the floor of any reader that holds them;
* ``report`` — ``noe report --kubeconfig … --platforms … -o json`` (every image answered by the
  platforms file: no registry).

Printed: wall time and peak RSS of each, and the report's as ratios to the bare client's, both
measured in this run.

Figures on the 2-core machine (20,000 pods; measured while a test suite ran on the other core, so
the times are loose; ``noe report``'s lists are unchanged by the watch-cache work: one consistent
paged list, read as "the cluster now")::

    BEFORE (4521330)  bare 5.26 s 426.6 MiB   report 4.01 s 440.1 MiB   (0.76x time, 1.03x memory)
    AFTER             bare 3.96 s 426.6 MiB   report 4.44 s 440.2 MiB   (1.12x time, 1.03x memory)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.certs import make_ca  # noqa: E402
from tests.support.realistic_cluster import platforms_file, realistic_pods  # noqa: E402
from tests.support.served_lists import start_served_cluster  # noqa: E402

TOKEN = "bench-report-token"
PEAK = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write("
    "'\\nPEAK ' + next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1] + '\\n'))\n"
)
REPORT = PEAK + "import runpy; sys.argv = ['noe_web', *sys.argv[1:]]; runpy.run_module('noe_web', run_name='__main__')"
BARE = (
    PEAK
    + """
import sys
from pathlib import Path
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
client = KubeClient(load_kubeconfig(Path(sys.argv[1])), timeout=120)
kept = list(client.list_objects("/api/v1/pods", timeout=120))
print(len(kept))
"""
)


def measured(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) and output of ``command`` run alone."""
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, check=False)
    seconds = time.monotonic() - started
    err = done.stderr.decode(errors="replace")
    peaks = [line.split()[1] for line in err.splitlines() if line.startswith("PEAK ")]
    if done.returncode not in (0, 1) or not peaks:  # 1: the report found pods that cannot move
        raise SystemExit(f"{command[:4]} failed ({done.returncode}): {err[-2000:]}")
    return seconds, int(peaks[-1]) / 1024, done.stdout.decode(errors="replace")


def main() -> None:
    pods = int(sys.argv[1]) if len(sys.argv) > 1 else 60_000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 3_000
    code = Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOE_")}
    env["PYTHONPATH"] = str(code)
    with tempfile.TemporaryDirectory(prefix="noe-bench-report-") as tmp:
        work = Path(tmp)
        with start_served_cluster(make_ca("bench report CA", work), tokens=(TOKEN,)) as cluster:
            cluster.serve("pods", realistic_pods(pods, nodes))
            kubeconfig = cluster.api.write_kubeconfig(work / "kubeconfig", token=TOKEN)
            (work / "platforms.json").write_text(json.dumps(platforms_file()))
            report = [sys.executable, "-c", REPORT, "report", "--kubeconfig", str(kubeconfig)]
            report += ["--platforms", str(work / "platforms.json"), "-o", "json"]
            bare_s, bare_mib, listed = measured([sys.executable, "-c", BARE, str(kubeconfig)], env, code)
            if listed.strip() != str(pods):
                raise SystemExit(f"the bare client listed {listed.strip()!r} pods, not {pods}")
            report_s, report_mib, _ = measured(report, env, code)
    print(f"cluster  {pods} pods (realistic, ~4.7 KB each), served from prepared bytes")
    print(f"bare     {bare_s:7.2f} s  {bare_mib:8.1f} MiB peak   lists and keeps every pod (baseline)")
    print(
        f"report   {report_s:7.2f} s  {report_mib:8.1f} MiB peak   "
        f"({report_s / bare_s:.2f}x time, {report_mib / bare_mib:.2f}x memory)"
    )


if __name__ == "__main__":
    main()
