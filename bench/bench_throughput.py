"""Warm served throughput of ``noe serve`` as a ratio to a bare Flask app under the same gunicorn.

Run: ``python bench/bench_throughput.py [REQUESTS] [CONCURRENCY] [ROUNDS]``. Starts Debian's
docker-registry on 127.0.0.1, pushes a manifest list and a single-arch image,
then starts, with one self-signed certificate, 2 gthread workers x 8 threads each:

* ``noe serve`` at its defaults (registry lookups, caches warmed on both workers, one JSON log line
  per admission at level INFO; gunicorn's access lines are written at debug only);
* ``bench/bare_app.py``: the same gunicorn application class answering the same
  AdmissionReview with a fixed body, no admission work.

``ab`` (Debian ``apache2-utils``) sends REQUESTS keep-alive POSTs of the
AdmissionReview with CONCURRENCY connections to each, ROUNDS rounds alternating
(default 5). Each round's ratio compares two runs made seconds apart, so load
from elsewhere on a shared machine affects both sides alike; the median of the
rounds' ratios is the figure, with the median requests/s of each side. The servers' CPU time
per request (user + system, from /proc, master and workers) is printed too: it is the cost
itself, which a busy machine distorts far less than a rate.

Extra arguments after ROUNDS are passed to ``noe serve`` (e.g. ``--log-level WARNING``).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from bench.bench_admission import free_port
from noe_core.testing import admission_review, pod
from noe_web.tls import ensure_self_signed
from tests.support.images import push_docker_manifest_list, push_docker_single
from tests.support.registry_server import start_registry

ROOT = Path(__file__).resolve().parent.parent
WORKERS, THREADS = "2", "8"


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its children (gunicorn's master and workers), from /proc."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        pending.extend(int(child) for child in children)
    return total


def ab(url: str, body: Path, requests_count: int, concurrency: int) -> float:
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
            url + "/mutate",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    non2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
    if (failed and int(failed.group(1))) or non2xx:
        raise SystemExit(f"ab saw failures against {url}:\n{out}")
    match = re.search(r"Requests per second:\s+([\d.]+)", out)
    assert match, out
    return float(match.group(1))


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_"))}
    with tempfile.TemporaryDirectory() as tmp_name, start_registry(Path(tmp_name) / "reg") as reg:
        tmp = Path(tmp_name)
        multi = push_docker_manifest_list(reg, "bench/multi", "v1")
        arm = push_docker_single(reg, "bench/arm", "v1")
        tls = ensure_self_signed(tmp / "tls")
        body = tmp / "review.json"
        body.write_bytes(json.dumps(admission_review(pod([multi.reference, arm.reference]), uid="bench")).encode())
        noe_port, bare_port = free_port(), free_port()
        noe = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "noe_web",
                "serve",
                "--bind",
                f"127.0.0.1:{noe_port}",
                "--tls-cert-file",
                str(tls.cert_file),
                "--tls-key-file",
                str(tls.key_file),
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
        logged = drain(noe)
        bare = None
        try:
            noe_url, bare_url = f"https://127.0.0.1:{noe_port}", f"https://127.0.0.1:{bare_port}"
            wait_ready(noe_url, tls.ca_file, noe)
            session = requests.Session()
            session.trust_env = False
            for _ in range(20):  # fresh connections land on either worker: warm both caches
                with requests.Session() as fresh:
                    fresh.trust_env = False
                    answer = fresh.post(
                        noe_url + "/mutate",
                        data=body.read_bytes(),
                        verify=str(tls.ca_file),
                        headers={"Content-Type": "application/json"},
                        timeout=10,
                    ).json()
            assert answer["response"]["allowed"] and "patch" in answer["response"], answer
            assert "warnings" not in answer["response"], answer
            fixed = tmp / "answer.json"
            fixed.write_bytes(json.dumps(answer).encode())
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
            ab(noe_url, body, 200, concurrency)  # warm-up of both
            ab(bare_url, body, 200, concurrency)
            noe_rps, bare_rps, noe_cpu, bare_cpu = [], [], [], []
            for _ in range(rounds):
                for url, proc, rps, cpu in ((noe_url, noe, noe_rps, noe_cpu), (bare_url, bare, bare_rps, bare_cpu)):
                    before = cpu_seconds(proc.pid)
                    rps.append(ab(url, body, count, concurrency))
                    cpu.append((cpu_seconds(proc.pid) - before) / count * 1e6)
        finally:
            for proc in (noe, bare):
                if proc is not None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
    noe_median, bare_median = statistics.median(noe_rps), statistics.median(bare_rps)
    ratios = [n / b for n, b in zip(noe_rps, bare_rps, strict=True)]
    print(
        f"{count} keep-alive POSTs x {rounds} rounds, {concurrency} connections, "
        f"{WORKERS} workers x {THREADS} threads, TLS on 127.0.0.1"
    )
    print(f"noe serve (warm, 2 registry images)  {noe_median:8.0f} req/s   rounds {[round(r) for r in noe_rps]}")
    print(f"bare Flask app (fixed answer)        {bare_median:8.0f} req/s   rounds {[round(r) for r in bare_rps]}")
    print(
        f"server CPU per request: noe {statistics.median(noe_cpu):.0f} us, bare {statistics.median(bare_cpu):.0f} us "
        f"(noe / bare x{statistics.median(n / b for n, b in zip(noe_cpu, bare_cpu, strict=True)):.2f}; "
        "CPU time is what load elsewhere on the machine disturbs least)"
    )
    print(f"noe serve wrote {logged[0]} log lines (one per admission at INFO), read through a pipe")
    print(
        f"noe / bare: x{statistics.median(ratios):.2f} (median of the rounds' ratios "
        f"{', '.join(f'{r:.2f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
