"""Cold, warm, re-validated and coalesced lookups against a local real registry.

Run: ``python bench/bench_resolver.py``. Starts Debian's docker-registry on
127.0.0.1 (tests/support), pushes a Docker manifest list of five platforms,
and prints wall-clock figures and the registry's own request counts. Ratios
are computed within the same run, so they compare like with like.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from tests.support.images import push_docker_manifest_list
from tests.support.registry_server import start_registry

ROUNDS = 20


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def main() -> None:
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",), cache_ttl=3600)
    with tempfile.TemporaryDirectory() as tmp, start_registry(Path(tmp)) as reg, make_session(settings) as session:
        images = [push_docker_manifest_list(reg, f"bench/app{i}", "v1") for i in range(ROUNDS + 1)]
        clock = Clock()
        with Resolver(session, settings=settings, clock=clock) as resolver:
            # warm up the connection pool and the scheme choice
            resolver.resolve(images[ROUNDS].reference, deadline=Deadline.after(10))

            cold: list[float] = []
            mark = reg.mark()
            for img in images[:ROUNDS]:
                start = time.perf_counter()
                resolver.resolve(img.reference, deadline=Deadline.after(10))
                cold.append(time.perf_counter() - start)
            cold_requests = reg.count(since=mark) / ROUNDS

            warm: list[float] = []
            mark = reg.mark()
            for _ in range(50):
                for img in images[:ROUNDS]:
                    start = time.perf_counter()
                    resolver.resolve(img.reference, deadline=Deadline.after(10))
                    warm.append(time.perf_counter() - start)
            warm_requests = reg.count(since=mark)

            clock.offset += 3601
            revalidated: list[float] = []
            mark = reg.mark()
            for img in images[:ROUNDS]:
                start = time.perf_counter()
                resolver.resolve(img.reference, deadline=Deadline.after(10))
                revalidated.append(time.perf_counter() - start)
            revalidated_requests = reg.count(since=mark) / ROUNDS

        # 50 concurrent lookups of one new image vs one sequential cold lookup, fresh resolvers.
        fresh = [push_docker_manifest_list(reg, f"bench/burst{i}", "v1") for i in range(5)]
        burst: list[float] = []
        burst_requests: list[int] = []
        for img in fresh:
            with Resolver(session, settings=settings) as resolver:
                barrier = threading.Barrier(51)

                def look(r: Resolver = resolver, ref: str = img.reference, b: threading.Barrier = barrier) -> None:
                    b.wait()
                    r.resolve(ref, deadline=Deadline.after(10))

                threads = [threading.Thread(target=look) for _ in range(50)]
                for t in threads:
                    t.start()
                mark = reg.mark()
                barrier.wait()
                start = time.perf_counter()
                for t in threads:
                    t.join()
                burst.append(time.perf_counter() - start)
                burst_requests.append(reg.count(since=mark))

    med = statistics.median
    print(f"image: Docker manifest list, 5 platforms; {ROUNDS} images; registry {reg.host} (local)")
    print(f"cold lookup         median {med(cold) * 1e3:8.3f} ms   requests/lookup {cold_requests:.1f}")
    print(
        f"warm lookup         median {med(warm) * 1e6:8.1f} us   requests total  {warm_requests} ({len(warm)} lookups)"
    )
    print(f"re-validated lookup median {med(revalidated) * 1e3:8.3f} ms   requests/lookup {revalidated_requests:.1f}")
    print(f"50 concurrent new   median {med(burst) * 1e3:8.3f} ms   requests/burst  {burst_requests}")
    print(f"ratio warm/cold            {med(warm) / med(cold):.5f}  (cold is {med(cold) / med(warm):.0f}x warm)")
    print(f"ratio revalidated/cold     {med(revalidated) / med(cold):.3f}")
    print(f"ratio 50-concurrent/1-cold {med(burst) / med(cold):.2f}  (50 sequential cold would be 50.0)")


if __name__ == "__main__":
    main()
