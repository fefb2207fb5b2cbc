"""Warm served throughput of ``noe serve`` as a ratio to a bare Flask app under plain gunicorn gthread.

Run: ``python bench/bench_throughput.py [REQUESTS] [CONCURRENCY] [SEGMENTS] [noe serve flags...]``.
Starts Debian's docker-registry on 127.0.0.1, pushes a manifest list and a
single-arch image, then starts, with one self-signed certificate, 2 workers x 8 threads each:

* ``noe serve`` at its defaults (registry lookups, caches warmed on both workers, one JSON log line
  per admission at level INFO, read through a pipe as a container runtime would);
* ``bench/bare_app.py``: a Flask app answering the same AdmissionReview with a fixed body, no
  admission work, under *plain* gunicorn (the stock gthread worker, gunicorn's TLS): the bar a
  webhook is measured against, slow-client protection included.

``ab`` (Debian ``apache2-utils``) sends REQUESTS keep-alive POSTs of the AdmissionReview over
CONCURRENCY connections (default 32: enough that both workers of each server get an even share;
with 8, a worker could hold 5 and the other 3), after a warm-up, in SEGMENTS segments per server
(default 7), alternating noe, bare, bare, noe, ... so that load from elsewhere on a shared machine
and any drift weigh on both sides alike. Printed: the median of the segments' throughput ratios and
their range, each side's median p99 latency (``ab -e``'s percentile table), the servers' CPU time
per request (user + system of master and workers, from /proc: the cost itself, which a busy
machine distorts far less than a rate) and the busiest worker's share of that CPU (how evenly the
connections landed).
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from bench.bench_admission import free_port
from noe_core.testing import admission_review, pod
from noe_web.server.tls import ensure_self_signed
from tests.support.images import push_docker_manifest_list, push_docker_single
from tests.support.registry_server import start_registry

ROOT = Path(__file__).resolve().parent.parent
WORKERS, THREADS = "2", "8"


@dataclass(frozen=True)
class Segment:
    """One ab run against one server."""

    rps: float
    p99_ms: float
    cpu_us: float  # server CPU (master + workers) per request
    busiest_worker: float  # the busiest worker's share of the workers' CPU


def wait_ready(url: str, ca: Path, proc: subprocess.Popen[bytes]) -> None:
    session = requests.Session()
    session.trust_env = False
    deadline = time.monotonic() + 60
    while True:
        try:
            if session.get(url + "/livez", verify=str(ca), timeout=2).ok:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"{url} did not start")
        time.sleep(0.1)


def drain(proc: subprocess.Popen[bytes]) -> list[int]:
    """Read a server's output as a container runtime would (a pipe, not a file on a busy disk); count lines."""
    count = [0]

    def read() -> None:
        assert proc.stdout is not None
        for _ in proc.stdout:
            count[0] += 1

    threading.Thread(target=read, daemon=True).start()
    return count


def _stat_cpu(pid: int) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cpu_seconds(pid: int) -> dict[int, float]:
    """User + system CPU time of gunicorn's master ``pid`` and of each of its workers, from /proc."""
    out = {}
    for current in [pid, *_children(pid)]:
        try:
            out[current] = _stat_cpu(current)
        except OSError:
            continue
    return out


def run_ab(url: str, body: Path, requests_count: int, concurrency: int) -> tuple[float, float]:
    """Requests per second and p99 latency (ms) of ``requests_count`` keep-alive POSTs of ``body``."""
    with tempfile.NamedTemporaryFile(suffix=".csv") as table:
        out = subprocess.run(
            [
                "ab",
                "-q",
                "-k",
                "-n",
                str(requests_count),
                "-c",
                str(concurrency),
                "-p",
                str(body),
                "-T",
                "application/json",
                "-e",
                table.name,
                url + "/mutate",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        percentiles = dict(line.split(",") for line in Path(table.name).read_text().splitlines()[1:])
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    non2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
    if (failed and int(failed.group(1))) or non2xx:
        raise SystemExit(f"ab saw failures against {url}:\n{out}")
    match = re.search(r"Requests per second:\s+([\d.]+)", out)
    assert match, out
    return float(match.group(1)), float(percentiles["99"])


def ab(url: str, body: Path, requests_count: int, concurrency: int) -> float:
    """Requests per second of ``requests_count`` keep-alive POSTs of ``body``."""
    return run_ab(url, body, requests_count, concurrency)[0]


def segment(url: str, pid: int, body: Path, requests_count: int, concurrency: int) -> Segment:
    before = cpu_seconds(pid)
    rps, p99 = run_ab(url, body, requests_count, concurrency)
    after = cpu_seconds(pid)
    spent = {p: after[p] - before.get(p, 0.0) for p in after}
    workers = [spent[p] for p in spent if p != pid]
    return Segment(
        rps=rps,
        p99_ms=p99,
        cpu_us=sum(spent.values()) / requests_count * 1e6,
        busiest_worker=max(workers) / sum(workers) if sum(workers) else 1.0,
    )


def start_noe(port: int, cert: Path, key: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "noe_web",
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--metrics-addr",
            f"127.0.0.1:{free_port()}",
            "--insecure-registries",
            "127.0.0.1:*",
            "--workers",
            WORKERS,
            "--threads",
            THREADS,
            *sys.argv[4:],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env=env,
    )


def warm_noe(url: str, body: bytes, ca: Path) -> bytes:
    """Admit the review on fresh connections until both workers have the images cached; the answer."""
    answer = {}
    for _ in range(20):  # fresh connections land on either worker
        with requests.Session() as fresh:
            fresh.trust_env = False
            answer = fresh.post(
                url + "/mutate", data=body, verify=str(ca), headers={"Content-Type": "application/json"}, timeout=10
            ).json()
    assert answer["response"]["allowed"] and "patch" in answer["response"], answer
    assert "warnings" not in answer["response"], answer
    return json.dumps(answer).encode()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    segments = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_"))}
    with tempfile.TemporaryDirectory() as tmp_name, start_registry(Path(tmp_name) / "reg") as reg:
        tmp = Path(tmp_name)
        multi = push_docker_manifest_list(reg, "bench/multi", "v1")
        arm = push_docker_single(reg, "bench/arm", "v1")
        tls = ensure_self_signed(tmp / "tls")
        body = tmp / "review.json"
        body.write_bytes(json.dumps(admission_review(pod([multi.reference, arm.reference]), uid="bench")).encode())
        noe_port, bare_port = free_port(), free_port()
        noe = start_noe(noe_port, tls.cert_file, tls.key_file, env)
        logged = drain(noe)
        bare = None
        try:
            noe_url, bare_url = f"https://127.0.0.1:{noe_port}", f"https://127.0.0.1:{bare_port}"
            wait_ready(noe_url, tls.ca_file, noe)
            fixed = tmp / "answer.json"
            fixed.write_bytes(warm_noe(noe_url, body.read_bytes(), tls.ca_file))
            bare = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "bench" / "bare_app.py"),
                    f"127.0.0.1:{bare_port}",
                    str(tls.cert_file),
                    str(tls.key_file),
                    WORKERS,
                    THREADS,
                    str(fixed),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=env,
            )
            drain(bare)
            wait_ready(bare_url, tls.ca_file, bare)
            sides = {"noe": (noe_url, noe.pid), "bare": (bare_url, bare.pid)}
            for url, _ in sides.values():  # warm-up: imports, caches, TLS sessions, CPU frequency
                run_ab(url, body, max(1000, count // 4), concurrency)
            results: dict[str, list[Segment]] = {"noe": [], "bare": []}
            for index in range(segments):
                order = ("noe", "bare") if index % 2 == 0 else ("bare", "noe")  # noe, bare, bare, noe, ...
                for name in order:
                    url, pid = sides[name]
                    results[name].append(segment(url, pid, body, count, concurrency))
        finally:
            for proc in (noe, bare):
                if proc is not None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
    report(results, count, concurrency, segments, logged[0])


def report(results: dict[str, list[Segment]], count: int, concurrency: int, segments: int, logged: int) -> None:
    noe, bare = results["noe"], results["bare"]
    ratios = [n.rps / b.rps for n, b in zip(noe, bare, strict=True)]
    cpu_ratios = [n.cpu_us / b.cpu_us for n, b in zip(noe, bare, strict=True)]

    def med(side: list[Segment], attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in side)

    print(
        f"{count} keep-alive POSTs x {segments} segments per server (alternating), {concurrency} connections, "
        f"{WORKERS} workers x {THREADS} threads, TLS on 127.0.0.1"
    )
    for label, side in (("noe serve (warm, 2 registry images)", noe), ("bare Flask app, plain gthread", bare)):
        print(
            f"{label:38} {med(side, 'rps'):7.0f} req/s  p99 {med(side, 'p99_ms'):6.1f} ms  "
            f"CPU {med(side, 'cpu_us'):5.0f} us/req  busiest worker {med(side, 'busiest_worker'):.0%}  "
            f"segments {[round(s.rps) for s in side]}"
        )
    print(f"noe serve wrote {logged} log lines (one per admission at INFO), read through a pipe")
    print(
        f"p99 noe / bare: x{med(noe, 'p99_ms') / med(bare, 'p99_ms'):.2f}   "
        f"CPU per request noe / bare: x{statistics.median(cpu_ratios):.2f}"
    )
    print(
        f"throughput noe / bare: x{statistics.median(ratios):.2f} (median of the segments' ratios; "
        f"range {min(ratios):.2f}-{max(ratios):.2f}: {', '.join(f'{r:.2f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
