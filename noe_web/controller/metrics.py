"""The controller's metrics and its small HTTP server: ``/metrics``, ``/livez``, ``/readyz``.

The controller is one process, so it uses a plain registry (not gunicorn's
multiprocess directory). The registry client's metrics are the webhook's own
(:class:`noe_web.metrics.Metrics`, the ``RegistryObserver``), registered in the
same registry. Every label takes values from a fixed set (an action, an
outcome, a resource): no pod, image or namespace ever becomes a label value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

from noe_web.metrics import Metrics

MISPLACED_ACTIONS = ("evicted", "refused_by_budget", "event_only", "left_ready", "backoff", "dry_run")
GATE_OUTCOMES = ("placed", "no_common_architecture", "timed_out", "fallback", "conflict_retried", "dry_run")


class ControllerMetrics:
    """Counters and gauges of one controller process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.registry_metrics = Metrics(r)  # the registry client's observer, as in the webhook
        self.pods_examined = Counter(
            "noe_controller_pods_examined_total",
            "Pods the leader examined (misplacement, exec format errors, gates).",
            registry=r,
        )
        self.misplaced = Counter(
            "noe_controller_misplaced_pods_total",
            "Pods found on a node their images do not support, by what was done.",
            ["action"],
            registry=r,
        )
        self.exec_format_errors = Counter(
            "noe_controller_exec_format_errors_total",
            "Containers found failing with exec format error, by where it was seen.",
            ["source"],
            registry=r,
        )
        self.gated_pending = Gauge(
            "noe_controller_gated_pods", "Pods waiting behind noe's scheduling gate.", registry=r
        )
        self.gated_oldest = Gauge(
            "noe_controller_gated_pod_oldest_age_seconds",
            "Age of the oldest pod waiting behind noe's scheduling gate.",
            registry=r,
        )
        self.no_matching_node = Counter(
            "noe_controller_no_matching_node_total",
            "Pending pods noe placed that no Ready, schedulable node satisfies (one NoMatchingNode Event each).",
            registry=r,
        )
        self.unsatisfiable = Gauge(
            "noe_controller_unsatisfiable_pods",
            "Pods noe placed that are Pending now because no Ready, schedulable node satisfies noe's terms.",
            registry=r,
        )
        self.gate_outcomes = Counter(
            "noe_controller_gate_outcomes_total", "Gated pods finished, by outcome.", ["outcome"], registry=r
        )
        self.leader = Gauge("noe_controller_leader", "1 while this process holds the leader Lease.", registry=r)
        self.watch_restarts = Counter(
            "noe_controller_watch_restarts_total",
            "Watches started again, by resource and reason (ended, gone, error).",
            ["resource", "reason"],
            registry=r,
        )
        self.placement_policies = Gauge(
            "noe_controller_placement_policies",
            "Placement policies in the cluster, by state (accepted: applied; invalid: ignored whole).",
            ["state"],
            registry=r,
        )
        self.api_writes = Counter(
            "noe_controller_api_writes_total",
            "Writes sent to the Kubernetes API, by verb (evict, patch, event, policyreport, status).",
            ["verb"],
            registry=r,
        )
        self.rollbacks = Counter(
            "noe_controller_rollout_rollbacks_total",
            "Workloads whose rollout the leader rolled back, by reason (ExecFormatError, CohortFailing).",
            ["reason"],
            registry=r,
        )
        self.rollout_pods = Gauge(
            "noe_controller_rollout_pods",
            "Pods of each placement policy's rollout, by group (cohort, control) and state (placed, failing).",
            ["policy", "group", "state"],
            registry=r,
        )
        self.rollout_evictions = Counter(
            "noe_controller_rollout_evictions_total",
            "Evictions of rolled-back workloads' cohort pods, by outcome (evicted, refused_by_budget, dry_run, …).",
            ["outcome"],
            registry=r,
        )
        for action in MISPLACED_ACTIONS:
            self.misplaced.labels(action)
        for outcome in GATE_OUTCOMES:
            self.gate_outcomes.labels(outcome)
        for source in ("status", "previous_log"):
            self.exec_format_errors.labels(source)
        for state in ("accepted", "invalid"):
            self.placement_policies.labels(state)
        for reason in ("ExecFormatError", "CohortFailing"):
            self.rollbacks.labels(reason)


class HealthServer:
    """``/metrics``, ``/livez`` (the process answers) and ``/readyz`` (caches filled) on plain HTTP."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry, ready: Callable[[], bool]) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    code, body, ctype = 200, generate_latest(registry), "text/plain; version=0.0.4"
                elif path == "/livez":
                    code, body, ctype = 200, b"ok\n", "text/plain"
                elif path == "/readyz":
                    ok = outer.ready()
                    code, body, ctype = (200, b"ok\n", "text/plain") if ok else (503, b"not synced\n", "text/plain")
                else:
                    code, body, ctype = 404, b"not found\n", "text/plain"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.ready = ready
        self.httpd = ThreadingHTTPServer((host or "0.0.0.0", port), Handler)  # noqa: S104
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="noe-health", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
