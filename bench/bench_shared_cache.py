"""The shared registry cache, measured in one run (issue 9).

Run: ``python bench/bench_shared_cache.py [REQUESTS] [CONCURRENCY] [ROUNDS] [replicas]``
(``replicas``: only the figures of 5.). Starts Debian's
docker-registry on 127.0.0.1 and ``noe serve`` (2 gthread workers x 8 threads, TLS), then prints:

1. manifest (and blob) GETs in the registry's access log for 50 concurrent admissions of an
   image no worker has seen (target: 1 manifest GET);
2. manifest and blob GETs when the same pods are admitted after a restart on the same
   ``--cache-dir`` (target: 0);
3. warm served throughput (``ab``, keep-alive, alternating rounds) of that server as a ratio to
   the same server whose cache directory is unusable, so it keeps the in-process cache alone
   (target: >= 0.95);
4. RSS growth and cache-file size for 10,000 cached images (an index of 4 platforms and one
   tag each), written through a resolver backed by the store;
5. the replicas sharing one Redis (``--cache-url``, Debian's redis-server on 127.0.0.1), issue 23:
   manifest GETs for 60 concurrent admissions of one new image over 3 replicas (target 1);
   after restarting all replicas with empty local caches (target 0); and warm admission
   latency p50/p99, one client, keep-alive, alternating rounds, of a replica with Redis and
   one with its local cache alone (target: no measurable difference: the local level answers
   first).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
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
from bench.bench_throughput import ab, wait_ready
from noe_core.testing import admission_review, pod
from noe_web.server.tls import ServingFiles, ensure_self_signed
from tests.support.images import image_config, push_docker_manifest_list, push_image
from tests.support.redis_server import start_redis
from tests.support.registry_server import RegistryServer, start_registry

ROOT = Path(__file__).resolve().parent.parent
METRICS: dict[str, str] = {}
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_"))}

_FILL = """
import os, sys, time
from pathlib import Path
from noe_core.image.platform import Platform
from noe_core.registry.cache.sqlite import open_store
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.registry.resolver import Resolver
from noe_core.registry.transport import make_session
from noe_core.registry.settings import RegistrySettings

def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

count = int(sys.argv[2])
settings = RegistrySettings(max_cached_images=count, max_cached_tags=count)
store = open_store(Path(sys.argv[1]), max_images=count, max_tags=count)
resolver = Resolver(make_session(settings), settings=settings, store=store)
platforms = [Platform.of("linux", a, v) for a, v in (("amd64", ""), ("arm64", ""), ("arm", "v7"), ("s390x", ""))]
before = rss()
for i in range(count):
    context = "registry.example.com/team-%d/app" % (i % 500)
    digest = "sha256:%064x" % i
    found = ImagePlatforms(tuple(platforms), digest, "application/vnd.oci.image.index.v1+json",
                           tuple("sha256:%063x%d" % (i, n) for n in range(len(platforms))))
    resolver.caches.put_content(context, digest, found)
    resolver.caches.put_tag(context, "v%d" % i, digest, 3600, fetched=True)
after = rss()
resolver.close()
print(after - before)
"""


_HOT = """
import statistics, sys, time
from pathlib import Path
from noe_core.util.deadline import Deadline
from noe_core.registry.cache.sqlite import open_store
from noe_core.registry.resolver import Resolver
from noe_core.registry.transport import make_session
from noe_core.registry.settings import RegistrySettings
settings = RegistrySettings(insecure_registries=("127.0.0.1:*",))
ref = sys.argv[1]
memory = Resolver(make_session(settings), settings=settings)
shared = Resolver(make_session(settings), settings=settings,
                  store=open_store(Path(sys.argv[2]), max_images=100, max_tags=100))
times = {"memory": [], "shared": []}
for resolver in (memory, shared):
    resolver.resolve(ref, deadline=Deadline.after(10))
for _ in range(20):
    for name, resolver in (("memory", memory), ("shared", shared)):
        start = time.perf_counter()
        for _ in range(2000):
            assert resolver.cached(ref) is not None
        times[name].append((time.perf_counter() - start) / 2000 * 1e6)
m, s = statistics.median(times["memory"]), statistics.median(times["shared"])
print(f"in-process only {m:.1f} us, shared {s:.1f} us (x{m / s:.2f})")
"""


def _disk_lookups(metrics_url: str) -> int:
    """Disk-layer hits and misses counted so far by the server's /metrics."""
    text = requests.get(metrics_url, timeout=10).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith(
            ('noe_registry_cache_hits_total{kind="disk"}', 'noe_registry_cache_misses_total{kind="disk"}')
        )
    )


def serve(
    state: Path, tls: ServingFiles, log: object, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port, metrics_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "noe_web",
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--tls-cert-file",
            str(tls.cert_file),
            "--tls-key-file",
            str(tls.key_file),
            "--metrics-addr",
            f"127.0.0.1:{metrics_port}",
            "--insecure-registries",
            "127.0.0.1:*",
            "--workers",
            "2",
            "--threads",
            "8",
            "--state-dir",
            str(state),
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**ENV, **(env or {})},  # type: ignore[arg-type]
    )
    url = f"https://127.0.0.1:{port}"
    wait_ready(url, tls.ca_file, proc)
    METRICS[url] = f"http://127.0.0.1:{metrics_port}/metrics"
    return proc, url


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def admit_at_once(url: str | list[str], ca: Path, images: list[str], count: int) -> None:
    """``count`` admissions released together, each on its own connection (so every worker gets some),
    dealt round-robin over the servers when ``url`` lists several."""
    urls = [url] if isinstance(url, str) else url
    barrier = threading.Barrier(count)

    def one(i: int) -> None:
        review = admission_review(pod(images, name=f"p-{i}"), uid=f"u-{i}")
        with requests.Session() as s:
            s.trust_env = False
            barrier.wait(60)
            answer = s.post(urls[i % len(urls)] + "/mutate", json=review, verify=str(ca), timeout=60).json()
        assert "patch" in answer["response"] and "warnings" not in answer["response"], answer

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(one, range(count)))


def gets(reg: RegistryServer, mark: int) -> tuple[int, int]:
    return reg.count("GET", "/manifests/", since=mark), reg.count("GET", "/blobs/", since=mark)


def latencies(url: str, ca: Path, body: bytes, count: int) -> list[float]:
    """Seconds of each of ``count`` sequential warm admissions on one keep-alive connection."""
    out = []
    with requests.Session() as s:
        s.trust_env = False
        s.verify = str(ca)
        headers = {"Content-Type": "application/json"}
        for _ in range(count):
            start = time.perf_counter()
            answer = s.post(url + "/mutate", data=body, headers=headers, timeout=30)
            out.append(time.perf_counter() - start)
            assert answer.status_code == 200 and b'"patch"' in answer.content
    return out


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def replica_figures(reg: RegistryServer, tmp: Path, tls: ServingFiles, log: object, rounds: int) -> None:
    """Issue 23's figures: three replicas sharing one redis-server."""
    key = tmp / "fingerprint-key"
    key.write_text(os.urandom(32).hex())
    with start_redis(tmp / "redis") as redis_server:
        env = {"NOE_CACHE_URL": redis_server.url}
        shared = ("--cache-key-file", str(key))
        new = push_image(reg, "bench/replicas", "v1", image_config("linux", "s390x")).reference
        multi = reg.ref("bench/multi", "v1")

        def replicas(generation: str) -> list[tuple[subprocess.Popen[bytes], str]]:
            with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
                return list(pool.map(lambda i: serve(tmp / f"{generation}-{i}", tls, log, *shared, env=env), range(3)))

        first = replicas("replica")
        try:
            mark = reg.mark()
            admit_at_once([url for _, url in first], tls.ca_file, [new], 60)
            burst = gets(reg, mark)
            admit_at_once([url for _, url in first], tls.ca_file, [new, multi], 6)
        finally:
            for proc, _ in first:
                stop(proc)
        print(
            f"replicas: 60 concurrent admissions of a new image over 3 replicas x 2 workers sharing Redis: "
            f"{burst[0]} manifest GETs (target 1), {burst[1]} config blob GETs"
        )
        second = replicas("rollout")
        local_only = None
        try:
            mark = reg.mark()
            admit_at_once([url for _, url in second], tls.ca_file, [new, multi], 30)
            after = gets(reg, mark)
            print(
                f"replicas: after restarting all 3 with empty local caches, 30 admissions: {after[0]} manifest GETs, "
                f"{after[1]} blob GETs (target 0)"
            )
            local_only, local_url = serve(tmp / "local-only", tls, log)
            with_redis = second[0][1]
            body = json.dumps(admission_review(pod([new, multi]), uid="bench")).encode()
            for url in (with_redis, local_url):
                latencies(url, tls.ca_file, body, 200)  # warm both workers' memory, and the connection
            times: dict[str, list[float]] = {"redis": [], "local": []}
            counter = redis_server.client()  # one connection: its handshake is not counted below
            commands_before = int(counter.info("stats")["total_commands_processed"])
            for i in range(rounds * 2):  # ABBA
                order = (("redis", with_redis), ("local", local_url))
                for name, url in order if i % 2 == 0 else order[::-1]:
                    times[name].extend(latencies(url, tls.ca_file, body, 500))
            commands = int(counter.info("stats")["total_commands_processed"]) - commands_before - 1  # less INFO
            counter.close()
        finally:
            for proc, _ in second:
                stop(proc)
            if local_only is not None:
                stop(local_only)
        p50 = {name: percentile(t, 0.50) * 1e3 for name, t in times.items()}
        p99 = {name: percentile(t, 0.99) * 1e3 for name, t in times.items()}
        print(f"replicas: warm admission latency, one keep-alive client, {len(times['redis'])} admissions each:")
        print(f"  with Redis     p50 {p50['redis']:6.2f} ms   p99 {p99['redis']:6.2f} ms")
        print(f"  local only     p50 {p50['local']:6.2f} ms   p99 {p99['local']:6.2f} ms")
        print(f"  commands Redis processed meanwhile: {commands} (the warm path never leaves the process)")
        ratio50, ratio99 = p50["redis"] / p50["local"], p99["redis"] / p99["local"]
        print(f"  with Redis / local only: p50 x{ratio50:.2f}, p99 x{ratio99:.2f} (target: no measurable difference)")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with tempfile.TemporaryDirectory() as tmp_name, start_registry(Path(tmp_name) / "reg") as reg:
        tmp = Path(tmp_name)
        tls = ensure_self_signed(tmp / "tls")
        if sys.argv[4:] == ["replicas"]:
            push_docker_manifest_list(reg, "bench/multi", "v1")
            with (tmp / "replicas.log").open("wb") as replicas_log:
                replica_figures(reg, tmp, tls, replicas_log, rounds)
            return
        log = (tmp / "servers.log").open("wb")
        new = push_image(reg, "bench/new", "v1", image_config("linux", "arm64")).reference
        multi = push_docker_manifest_list(reg, "bench/multi", "v1").reference
        images = [new, multi]
        state = tmp / "state"

        first, url = serve(state, tls, log)
        try:
            mark = reg.mark()
            admit_at_once(url, tls.ca_file, [new], 50)
            burst = gets(reg, mark)
            admit_at_once(url, tls.ca_file, images, 4)  # the manifest list too, before the restart
        finally:
            stop(first)
        print(
            f"50 concurrent admissions of a new image over 2 workers: {burst[0]} manifest GETs (target 1), "
            f"{burst[1]} config blob GETs"
        )

        shared, shared_url = serve(state, tls, log)
        memory_only = None
        try:
            mark = reg.mark()
            admit_at_once(shared_url, tls.ca_file, images, 20)
            after = gets(reg, mark)
            print(
                f"after a restart on the same --cache-dir, 20 admissions: {after[0]} manifest GETs, "
                f"{after[1]} blob GETs (target 0)"
            )
            blocker = tmp / "not-a-directory"
            blocker.write_text("")
            memory_only, memory_url = serve(tmp / "state-2", tls, log, "--cache-dir", str(blocker / "cache"))
            admit_at_once(memory_url, tls.ca_file, images, 20)  # warm both workers' memory
            shared_metrics = METRICS[shared_url]
            body = tmp / "review.json"
            body.write_bytes(json.dumps(admission_review(pod(images), uid="bench")).encode())
            ab(shared_url, body, 200, concurrency)
            ab(memory_url, body, 200, concurrency)
            disk_before = _disk_lookups(shared_metrics)
            shared_rps, memory_rps = [], []
            for i in range(rounds):  # ABBA: neither side always runs first
                if i % 2:
                    memory_rps.append(ab(memory_url, body, count, concurrency))
                    shared_rps.append(ab(shared_url, body, count, concurrency))
                else:
                    shared_rps.append(ab(shared_url, body, count, concurrency))
                    memory_rps.append(ab(memory_url, body, count, concurrency))
            disk_reads = _disk_lookups(shared_metrics) - disk_before
        finally:
            stop(shared)
            if memory_only is not None:
                stop(memory_only)
            log.close()
        ratios = [s / m for s, m in zip(shared_rps, memory_rps, strict=True)]
        print(f"warm throughput, {count} keep-alive POSTs x {rounds} rounds, {concurrency} connections:")
        print(f"  shared cache      {statistics.median(shared_rps):8.0f} req/s  {[round(r) for r in shared_rps]}")
        print(f"  in-process only   {statistics.median(memory_rps):8.0f} req/s  {[round(r) for r in memory_rps]}")
        print(
            f"  shared / in-process: x{statistics.median(ratios):.2f} (rounds "
            f"{', '.join(f'{r:.2f}' for r in ratios)}; target >= 0.95)"
        )
        print(f"  disk lookups by the shared server while ab ran: {disk_reads} (the hot path stays in memory)")
        hot = subprocess.run(
            [sys.executable, "-c", _HOT, reg.ref("bench/multi", "v1"), str(tmp / "hot")],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(f"  Resolver.cached() per call, interleaved x20: {hot}")

        fill = tmp / "fill"
        rss = int(
            subprocess.run(
                [sys.executable, "-c", _FILL, str(fill), "10000"],
                cwd=ROOT,
                env=ENV,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        size = sum(p.stat().st_size for p in fill.glob("registry-cache.sqlite3*"))
        print(
            f"10,000 cached images (4-platform index + 1 tag each): RSS +{rss / 2**20:.1f} MiB, "
            f"cache files {size / 2**20:.1f} MiB"
        )
        with (tmp / "replicas.log").open("wb") as replicas_log:
            replica_figures(reg, tmp, tls, replicas_log, rounds)


if __name__ == "__main__":
    main()
