"""Admission latency through the real server, warm cache, against baselines from the same run.

Run: ``python bench/bench_admission.py [ROUNDS]``. Starts Debian's docker-registry
and ``noe serve`` (2 gthread workers, self-signed TLS) on 127.0.0.1, pushes a
manifest list and a single-arch image, warms the resolver caches, then times
sequential keep-alive requests:

* ``livez``   — ``GET /livez``: TLS + gunicorn + Flask, no admission work;
* ``static``  — an admission answered from ``--image-platforms`` (no registry);
* ``warm``    — an admission of two registry images, both in the resolver cache.

and prints p50/p99 for each and the ratios warm/livez and warm/static. Both
workers are warmed (each has its own cache), so "warm" is warm everywhere.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from noe_core.testing import admission_review, pod
from tests.support.images import push_docker_manifest_list, push_docker_single
from tests.support.registry_server import start_registry

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(session: requests.Session, rounds: int, send: Any) -> list[float]:
    out: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        with send(session) as resp:
            resp.raise_for_status()
            resp.content  # noqa: B018 - read the whole answer
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    with tempfile.TemporaryDirectory() as tmp, start_registry(Path(tmp) / "reg") as reg:
        multi = push_docker_manifest_list(reg, "bench/multi", "v1")
        arm = push_docker_single(reg, "bench/arm", "v1")
        platforms = Path(tmp) / "platforms.json"
        platforms.write_text(json.dumps({"static.example/*": ["linux/amd64", "linux/arm64"]}))
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_"))}
        log = (Path(tmp) / "noe.log").open("wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "noe_web",
                "serve",
                "--bind",
                f"127.0.0.1:{port}",
                "--metrics-addr",
                f"127.0.0.1:{free_port()}",
                "--state-dir",
                str(Path(tmp) / "state"),
                "--image-platforms",
                str(platforms),
                "--insecure-registries",
                "127.0.0.1:*",
                "--workers",
                "2",
                "--threads",
                "8",
                "--log-level",
                "WARNING",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
        )
        ca = Path(tmp) / "state" / "ca.crt"
        url = f"https://127.0.0.1:{port}"
        try:
            session = requests.Session()
            session.trust_env = False
            deadline = time.monotonic() + 60
            while True:
                try:
                    if ca.exists() and session.get(url + "/livez", verify=str(ca), timeout=2).ok:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("noe serve did not start")
                time.sleep(0.1)
            session.verify = str(ca)

            def review(images: list[str]) -> bytes:
                return json.dumps(admission_review(pod(images), uid=str(uuid.uuid4()))).encode()

            warm_body = review([multi.reference, arm.reference])
            static_body = review(["static.example/app:1"])
            headers = {"Content-Type": "application/json"}

            # warm both workers' caches: fresh connections land on either worker
            for _ in range(20):
                with requests.Session() as fresh:
                    fresh.trust_env = False
                    fresh.post(url + "/mutate", data=warm_body, headers=headers, verify=str(ca), timeout=10).close()
            answer = session.post(url + "/mutate", data=warm_body, headers=headers, timeout=10).json()
            assert answer["response"]["allowed"] and "warnings" not in answer["response"], answer

            results = {
                "livez": timed(session, rounds, lambda s: s.get(url + "/livez", timeout=10)),
                "static": timed(
                    session, rounds, lambda s: s.post(url + "/mutate", data=static_body, headers=headers, timeout=10)
                ),
                "warm": timed(
                    session, rounds, lambda s: s.post(url + "/mutate", data=warm_body, headers=headers, timeout=10)
                ),
            }
            session.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()
    print(f"{rounds} sequential keep-alive requests each, 2 workers x 8 threads, TLS on 127.0.0.1")
    print(f"{'case':8} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name, values in results.items():
        print(
            f"{name:8} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f} {statistics.fmean(values):8.2f}"
        )
    for base in ("livez", "static"):
        p50 = percentile(results["warm"], 0.5) / percentile(results[base], 0.5)
        p99 = percentile(results["warm"], 0.99) / percentile(results[base], 0.99)
        print(f"warm/{base}: p50 x{p50:.2f}  p99 x{p99:.2f}")


if __name__ == "__main__":
    main()
