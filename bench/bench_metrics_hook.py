"""Cost of timing every registry request (noe_registry_request_duration_seconds), against the same run without it.

Run: ``python bench/bench_metrics_hook.py [ROUNDS]``. Starts Debian's docker-registry on
127.0.0.1, pushes a manifest list, then resolves it ROUNDS times with a fresh resolver
each time (so every round sends its registry requests) through:

* ``plain``        — the registry session as noe_core makes it;
* ``instrumented`` — the same session with ``Metrics.instrument_session``'s response hook.

Prints the median and p90 per resolve for each, and the ratio instrumented/plain.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.util.deadline import Deadline
from noe_web.metrics import Metrics
from tests.support.images import push_docker_manifest_list
from tests.support.registry_server import start_registry


def resolve_times(reference: str, rounds: int, instrument: bool) -> list[float]:
    settings = RegistrySettings(insecure_registries=("127.0.0.1:*",))
    session = make_session(settings)
    if instrument:
        Metrics().instrument_session(session)
    times = []
    try:
        for _ in range(rounds):
            resolver = Resolver(session, settings=settings)
            started = time.perf_counter()
            resolver.resolve(reference, deadline=Deadline.after(10))
            times.append(time.perf_counter() - started)
    finally:
        session.close()
    return times


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    with tempfile.TemporaryDirectory() as tmp, start_registry(Path(tmp) / "reg") as reg:
        image = push_docker_manifest_list(reg, "bench/multi", "v1")
        resolve_times(image.reference, 20, True)  # warm up connections and imports
        results = {}
        # interleaved halves, so a noisy neighbour hurts both the same
        for name, flag in (("plain", False), ("instrumented", True), ("plain", False), ("instrumented", True)):
            results.setdefault(name, []).extend(resolve_times(image.reference, rounds // 2, flag))
    for name, times in results.items():
        times.sort()
        print(
            f"{name:13s} median {statistics.median(times) * 1000:7.3f} ms   "
            f"p90 {times[int(len(times) * 0.9)] * 1000:7.3f} ms   ({len(times)} cold resolves)"
        )
    ratio = statistics.median(results["instrumented"]) / statistics.median(results["plain"])
    print(f"instrumented/plain median ratio: {ratio:.3f}")


if __name__ == "__main__":
    main()
