"""Prometheus metrics of the webhook, correct across gunicorn worker processes.

Under ``noe serve`` the master sets ``PROMETHEUS_MULTIPROC_DIR`` before this
module (and so ``prometheus_client``) is imported: every worker then writes its
values to files there and the master's ``/metrics`` server sums them with a
``MultiProcessCollector``. Gauges carry a ``multiprocess_mode``.

Names follow the Go Noe where its family has a meaning here (docs/metrics.md
maps every one). Each label name means one thing in every family:
``resource_namespace`` / ``resource_kind`` are the admitted object's (not
``namespace``, which Prometheus' Kubernetes discovery sets to the target's own
namespace; only the Go families ``noe_hook_arch_selector_injected_total`` and
``noe_hook_image_pull_secret_failed_total`` keep Noe's ``namespace`` label,
hence ``honorLabels`` in the chart's monitors),
``lookup`` is a cache step (tag, digest, negative, revalidated, image),
``reason`` a failure reason, ``registry`` a registry host.

Label values are bounded: a registry host or a namespace (each capped at
:data:`MAX_LABEL_VALUES` distinct values per process, the rest counted as
``other``), a kind (Pod, DaemonSet and at most :data:`MAX_KIND_VALUES`
others), a decision, an HTTP method or status. Never an image.
"""

from __future__ import annotations

import os
import platform
import threading
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.exposition import generate_latest

MAX_LABEL_VALUES = 200
MAX_KIND_VALUES = 20
MAX_LABEL_LENGTH = 253
OTHER = "other"
REDIS_BUCKETS = (0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DISTRIBUTION = "noe-webhook"


def package_version() -> str:
    """The installed distribution's version ("unknown" when run from a bare source tree)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


class _Bounded:
    """Passes through the first ``limit`` distinct values, then answers ``other``.

    ``always`` values pass without taking a place; values longer than
    :data:`MAX_LABEL_LENGTH` (no namespace, kind or registry host is) answer ``other`` too.
    """

    def __init__(self, limit: int = MAX_LABEL_VALUES, always: tuple[str, ...] = ()) -> None:
        self._seen: set[str] = set(always)
        self._limit = limit + len(self._seen)
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        value = value or "none"
        if value in self._seen:
            return value
        if len(value) > MAX_LABEL_LENGTH:
            return OTHER
        with self._lock:
            if len(self._seen) < self._limit:
                self._seen.add(value)
                return value
        return OTHER


class _Children:
    """A family's children by label values, looked up in a dict.

    ``labels()`` takes the family's lock and builds its key on every call
    (~1.6 us, as much as the increment itself); the hot paths call it several
    times per admission. The label values reaching here are already bounded, so
    the dict is too.
    """

    def __init__(self, family: Any) -> None:
        self._family = family
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._family.labels(*values)
        return child


class Metrics:
    """All metrics of one worker process; also a :class:`noe_core.registry.observer.RegistryObserver`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self._registry_label = _Bounded()
        self._namespace_label = _Bounded()
        # the kind comes from the request, so any client can send any string
        self._kind_label = _Bounded(MAX_KIND_VALUES, always=("Pod", "DaemonSet"))
        self.build_info = Gauge(
            "noe_build_info",
            "Always 1; the labels say which noe runs.",
            ["version", "python_version"],
            multiprocess_mode="max",
            registry=r,
        )
        self.build_info.labels(package_version(), platform.python_version()).set(1)
        self.registry_errors = Counter(
            "noe_hook_registry_errors_total", "Failed registry lookup steps.", ["registry", "reason"], registry=r
        )
        self.injected = Counter(
            "noe_hook_arch_selector_injected_total",
            "Admissions whose pod spec was given an architecture requirement (Go Noe's family and labels; "
            "namespace is the admitted object's).",
            ["namespace", "selector"],
            registry=r,
        )
        self.pull_secret_failed = Counter(
            "noe_hook_image_pull_secret_failed_total",
            "imagePullSecrets a pod names that could not be read or used (Go Noe's family and label; "
            "namespace is the pod's).",
            ["namespace"],
            registry=r,
        )
        self.update_skip = Counter(
            "noe_hook_update_skip_total",
            "Admissions the policy did not look at (pod UPDATE, other kinds and operations).",
            ["resource_kind", "operation"],
            registry=r,
        )
        self.registry_requests = Counter(
            "noe_registry_requests_total",
            "HTTP requests to registries and token servers (status 0: no answer).",
            ["registry", "method", "status"],
            registry=r,
        )
        self.registry_request_duration = Histogram(
            "noe_registry_request_duration_seconds",
            "Time from sending a registry or token request to its response headers (answered requests only).",
            ["registry", "method"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.rate_limit_remaining = Gauge(
            "noe_registry_rate_limit_remaining",
            "Last RateLimit-Remaining seen from a registry.",
            ["registry"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.rate_limit_limit = Gauge(
            "noe_registry_rate_limit_limit",
            "Last RateLimit-Limit seen from a registry.",
            ["registry"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.cache_hits = Counter(
            "noe_registry_cache_hits_total", "Lookup steps answered from cache.", ["lookup"], registry=r
        )
        self.cache_misses = Counter(
            "noe_registry_cache_misses_total", "Lookup steps that went to the registry.", ["lookup"], registry=r
        )
        self.cache_coalesced = Counter(
            "noe_registry_cache_coalesced_total",
            "Lookups that waited for an identical one in flight.",
            ["lookup"],
            registry=r,
        )
        # The Go Noe's two cache families, with its labels: every cache consultation, and its answer.
        self.cache_requests = Counter(
            "noe_registry_cache_requests_total", "Lookup steps that consulted the cache.", registry=r
        )
        self.cache_responses = Counter(
            "noe_registry_cache_responses_total", "Cache answers: hit or miss.", ["cache"], registry=r
        )
        self.token_fetches = Counter(
            "noe_registry_token_fetches_total", "Bearer token requests.", ["registry", "outcome"], registry=r
        )
        self.admissions = Counter(
            "noe_admissions_total",
            "Admission reviews answered.",
            ["resource_namespace", "resource_kind", "decision"],
            registry=r,
        )
        self.admission_duration = Histogram(
            "noe_admission_duration_seconds",
            "Time to answer one admission review, lookups included.",
            ["decision"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.static_lookups = Counter(
            "noe_static_platforms_hits_total", "Images answered by --image-platforms.", registry=r
        )
        self.events = Counter("noe_events_total", "Kubernetes Events by outcome.", ["outcome"], registry=r)
        self.bad_requests = Counter(
            "noe_bad_requests_total",
            "Requests to /mutate answered 400 (unparsable or too large), by reason.",
            ["reason"],
            registry=r,
        )
        # --- the shared registry cache (noe_core.registry.cache.sqlite) ---------------------------------
        # Hits and misses by layer are noe_registry_cache_{hits,misses}_total{kind="memory"|"disk"};
        # waits for another worker's fetch are noe_registry_cache_coalesced_total{kind="worker"}.
        self.cache_evictions = Counter(
            "noe_registry_cache_evictions_total",
            "Entries the shared registry cache evicted (least recently used), by table.",
            ["table"],
            registry=r,
        )
        # --- the cache every replica shares (--cache-url, noe_core.registry.cache.redis) ---------------
        # Its hits and misses are noe_registry_cache_{hits,misses}_total{lookup="redis"}; waits for
        # another replica's fetch are noe_registry_cache_coalesced_total{lookup="replica"}.
        self.redis_duration = Histogram(
            "noe_registry_cache_redis_duration_seconds",
            "Time of each call to the shared Redis cache (one round trip), failed ones included.",
            ["call"],
            buckets=REDIS_BUCKETS,
            registry=r,
        )
        self.redis_errors = Counter(
            "noe_registry_cache_redis_errors_total",
            "Calls to the shared Redis cache that failed (refused, timed out, unreachable).",
            ["call"],
            registry=r,
        )
        self.redis_available = Gauge(
            "noe_registry_cache_redis_up",
            "1 while the shared Redis cache answers, 0 while this process uses its local cache alone "
            "(the lowest of the live workers); no series without --cache-url.",
            ["server"],
            multiprocess_mode="livemin",
            registry=r,
        )
        # --- placement policies (noe_web.kube.policy_watch) ---------------------------------------------
        self.policy_watch_stale = Gauge(
            "noe_policy_watch_stale_seconds",
            "Seconds the placement policies and namespace labels in use may be out of date: 0 while every "
            "watch is open; grows while one is broken and the last good set is used (the stalest worker).",
            multiprocess_mode="livemax",
            registry=r,
        )
        # the children the request path increments, looked up without labels() (see _Children)
        self._hits, self._misses = _Children(self.cache_hits), _Children(self.cache_misses)
        self._coalesced = _Children(self.cache_coalesced)
        self._cache_hit = self.cache_responses.labels("hit")
        self._cache_miss = self.cache_responses.labels("miss")
        self._requests = _Children(self.registry_requests)
        self._request_duration = _Children(self.registry_request_duration)
        self._admissions, self._admission_duration = _Children(self.admissions), _Children(self.admission_duration)
        self._injected, self._skipped = _Children(self.injected), _Children(self.update_skip)
        self._redis_duration, self._redis_errors = _Children(self.redis_duration), _Children(self.redis_errors)

    def instrument_session(self, session: requests.Session) -> None:
        """Time every answered request of *session* (the registry client's) into the duration histogram.

        A response hook, so the registry code in ``noe_core`` stays free of Prometheus.
        """

        def observe(response: requests.Response, *args: Any, **kwargs: Any) -> None:
            host = urlsplit(response.url).netloc
            method = response.request.method or "GET"
            self._request_duration(self._registry_label(host), method).observe(response.elapsed.total_seconds())

        session.hooks["response"].append(observe)

    # --- RegistryObserver -------------------------------------------------
    def request(self, registry: str, method: str, status: int) -> None:
        self._requests(self._registry_label(registry), method, str(status)).inc()

    def cache_hit(self, kind: str) -> None:
        self._hits(kind).inc()
        self.cache_requests.inc()
        self._cache_hit.inc()

    def cache_miss(self, kind: str) -> None:
        self._misses(kind).inc()
        self.cache_requests.inc()
        self._cache_miss.inc()

    def coalesced(self, kind: str) -> None:
        self._coalesced(kind).inc()

    def token_fetch(self, registry: str, outcome: str) -> None:
        self.token_fetches.labels(self._registry_label(registry), outcome).inc()

    def rate_limit(self, registry: str, remaining: int, limit: int) -> None:
        label = self._registry_label(registry)
        self.rate_limit_remaining.labels(label).set(remaining)
        self.rate_limit_limit.labels(label).set(limit)

    def error(self, registry: str, kind: str) -> None:
        self.registry_errors.labels(self._registry_label(registry), kind).inc()

    # --- RedisObserver (noe_core.registry.cache.redis) ---------------------
    def redis_call(self, operation: str, seconds: float, *, error: bool) -> None:
        self._redis_duration(operation).observe(seconds)
        if error:
            self._redis_errors(operation).inc()

    def redis_up(self, server: str, up: bool) -> None:
        self.redis_available.labels(server).set(1 if up else 0)

    # --- admissions -------------------------------------------------------
    def admission(self, *, namespace: str, kind: str, decision: str, seconds: float) -> None:
        namespace = self._namespace_label(namespace)
        self._admissions(namespace, self._kind_label(kind), decision).inc()
        self._admission_duration(decision).observe(seconds)
        if decision == "mutated":
            # noe always places through required node affinity: Go Noe's "affinity" selector.
            self._injected(namespace, "affinity").inc()

    def pull_secrets_failed(self, namespace: str, count: int = 1) -> None:
        self.pull_secret_failed.labels(self._namespace_label(namespace)).inc(count)

    def skipped(self, kind: str, operation: str) -> None:
        self._skipped(self._kind_label(kind), operation or "none").inc()


def multiprocess_registry(directory: Path | None = None) -> CollectorRegistry:
    """A registry that reads every worker's files (for the master's ``/metrics``)."""
    registry = CollectorRegistry()
    path = str(directory) if directory else os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    multiprocess.MultiProcessCollector(registry, path=path)
    return registry


def mark_process_dead(pid: int) -> None:
    multiprocess.mark_process_dead(pid)


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
