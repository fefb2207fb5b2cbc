"""Cost of tracing per admission: off (no exporter), SDK spans dropped, and exported over OTLP/HTTP, in one run.

Run: ``python bench/bench_tracing.py [ROUNDS]``. Starts Debian's docker-registry and
a local OTLP/HTTP receiver on 127.0.0.1, pushes a manifest list and a single-arch
image, then sends ``POST /mutate`` (a pod naming both, with the API server's
``traceparent``) through the webhook's Flask app, in process, with each tracing:

* ``null``    — ``NULL_TRACER`` / ``NO_TRACING`` handed in directly: the baseline;
* ``off``     — what ``noe serve`` opens when no ``OTEL_*`` variable names an exporter
  (``open_tracing(read_tracing(environ))``): must cost what ``null`` costs;
* ``dropped`` — an OpenTelemetry provider with no span processor: spans are made,
  sampled and dropped (the SDK's own cost, no export);
* ``otlp``    — the provider ``noe serve`` starts for ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``:
  batched export to the receiver on its own thread.

Three kinds of admission:

* ``cold``  — a fresh resolver each time (built outside the timing): TLS probe, manifests,
  HEADs of the list's entries, config blob, every one a span; noisy (a new TLS context
  and new connections each time), so fewer rounds;
* ``check`` — the tags' freshness expired (``cache_ttl`` 0): per image a lookup span
  and one ``HEAD`` re-validating the tag on a kept-alive connection, content from memory;
* ``warm``  — answered from the resolver's memory: the admission span alone.

Variants are interleaved, so a noisy neighbour hurts all alike. Prints median and p90
per admission, the ratio of each variant to ``null``, the spans per admission, and
what the disabled hooks cost.
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import propagate
from opentelemetry.sdk.trace import TracerProvider

from noe_core.policies.settings import PolicySettings
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.tracer import NULL_TRACER
from noe_core.registry.transport import make_session
from noe_core.testing import admission_review, pod
from noe_web.metrics import Metrics
from noe_web.tracing.config import open_tracing, read_tracing
from noe_web.tracing.hooks import NO_TRACING, WebhookTracing
from noe_web.tracing.otel import OtelTracing
from noe_web.webhook.admission import AdmissionService
from noe_web.webhook.app import Services, create_app
from tests.support.images import push_docker_manifest_list, push_docker_single
from tests.support.otlp_receiver import OtlpReceiver, start_otlp_receiver
from tests.support.registry_server import start_registry

SETTINGS = RegistrySettings(insecure_registries=("127.0.0.1:*",))
EXPIRED = RegistrySettings(insecure_registries=("127.0.0.1:*",), cache_ttl=0)


def tracings(otlp: OtlpReceiver) -> dict[str, WebhookTracing]:
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = otlp.endpoint
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "100"  # export often, so counting spans waits little
    config = read_tracing(os.environ)
    assert config.enabled, config
    exported = open_tracing(config)
    off = open_tracing(read_tracing({}))
    dropped = OtelTracing(TracerProvider(shutdown_on_exit=False), propagate.get_global_textmap())
    return {"null": NO_TRACING, "off": off, "dropped": dropped, "otlp": exported}


class Admissions:
    """One variant's app; ``cold`` builds a fresh resolver and service for each admission."""

    def __init__(self, tracing: WebhookTracing, review: dict[str, Any]) -> None:
        self.tracing = tracing
        self.review = review
        self.session = make_session(SETTINGS)
        self.warm_client = create_app(self._services()).test_client()
        self.check_client = create_app(self._services(EXPIRED)).test_client()

    def _services(self, settings: RegistrySettings = SETTINGS) -> Services:
        tracer = NULL_TRACER if self.tracing is NO_TRACING else self.tracing
        resolver = Resolver(self.session, settings=settings, tracer=tracer)
        service = AdmissionService(
            policy=PolicySettings(), metrics=METRICS, resolver=resolver, pool_size=8, tracing=self.tracing
        )
        return Services(service)

    def _post(self, client: Any) -> float:
        headers = {"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"}
        started = time.perf_counter()
        resp = client.post("/mutate", json=self.review, headers=headers)
        elapsed = time.perf_counter() - started
        assert resp.status_code == 200 and "patch" in resp.get_json()["response"], resp.get_data()
        return elapsed

    def cold(self) -> float:
        services = self._services()
        try:
            return self._post(create_app(services).test_client())
        finally:
            services.admission._pool.shutdown(wait=True)  # not close(): that would shut the tracing down

    def check(self) -> float:
        return self._post(self.check_client)

    def warm(self) -> float:
        return self._post(self.warm_client)


METRICS = Metrics()


def settled(otlp: OtlpReceiver) -> int:
    """Spans received once the exporter has sent what it batched (no new one for half a second)."""
    count = -1
    while count != len(otlp.spans()):
        count = len(otlp.spans())
        time.sleep(0.5)
    return count


def null_hook_ns(calls: int = 200_000) -> float:
    """One disabled span (``with tracer.span(name, attributes) as s: s.set(...)``), in nanoseconds."""
    attributes = {"http.request.method": "GET"}
    started = time.perf_counter()
    for _ in range(calls):
        with NULL_TRACER.span("registry GET", attributes, client=True) as span:
            span.set("http.response.status_code", 200)
    return (time.perf_counter() - started) / calls * 1e9


def report(kind: str, results: dict[str, list[float]], spans: float) -> None:
    base = statistics.median(results["null"])
    for name, times in results.items():
        times.sort()
        median = statistics.median(times)
        print(
            f"{kind:5s} {name:7s} median {median * 1000:8.3f} ms   p90 {times[int(len(times) * 0.9)] * 1000:8.3f} ms"
            f"   x{median / base:.3f} of null   {(median - base) * 1e6:+8.1f} us   ({len(times)} admissions)"
        )
    print(f"{kind:5s} {spans:.1f} spans exported per admission")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    with tempfile.TemporaryDirectory() as tmp, start_registry(Path(tmp) / "reg") as reg, start_otlp_receiver() as otlp:
        multi = push_docker_manifest_list(reg, "bench/multi", "v1").reference
        single = push_docker_single(reg, "bench/single", "v1", "arm64").reference
        review = admission_review(pod([multi, single], namespace="bench"))
        variants = {name: Admissions(tracing, review) for name, tracing in tracings(otlp).items()}
        kinds: dict[str, tuple[int, Callable[[Admissions], float]]] = {
            "cold": (max(4, rounds // 8), Admissions.cold),
            "check": (rounds, Admissions.check),
            "warm": (rounds, Admissions.warm),
        }
        for admissions in variants.values():  # connections, imports, caches
            for _, run in kinds.values():
                for _ in range(5):
                    run(admissions)
        times: dict[str, dict[str, list[float]]] = {kind: {} for kind in kinds}
        spans: dict[str, float] = {}
        for kind, (count, run) in kinds.items():
            exported = settled(otlp)
            for _ in range(4):  # interleaved quarters
                for name, admissions in variants.items():
                    times[kind].setdefault(name, []).extend(run(admissions) for _ in range(count // 4))
            spans[kind] = (settled(otlp) - exported) / (4 * (count // 4))
    for kind in kinds:
        report(kind, times[kind], spans[kind])
    hook = null_hook_ns()
    cold_spans = spans["cold"]
    cold_null = statistics.median(times["cold"]["null"])
    print(
        f"disabled hook: {hook:.0f} ns per span; x{cold_spans:.0f} spans of a cold admission = "
        f"{hook * cold_spans / 1000:.1f} us ({hook * cold_spans / 1e9 / cold_null * 100:.3f}% of it)"
    )


if __name__ == "__main__":
    main()
