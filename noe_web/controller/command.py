"""``noe controller``: validate the flags, connect, elect a leader, reconcile until SIGTERM.

Start-up problems (a bad flag combination, no Kubernetes API, a port in use)
are one line on stderr and exit status 2. The process logs JSON lines like
``noe serve``. On SIGTERM or SIGINT it stops its workers, writes the Events
still queued and releases the leader Lease, so a successor takes over at once.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noe_core.cli.flags import add_flags, require
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.errors import InvalidSettings
from noe_core.settings import PolicySettings
from noe_web.controller.flags import CONTROLLER_FLAGS, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD
from noe_web.flags import IMAGE_PLATFORMS, KUBECONFIG

log = logging.getLogger("noe.controller")

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
JITTER = 1.2


def add_controller_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    parser = subparsers.add_parser(
        "controller",
        help="repair misplaced pods, report exec format errors, finish gated pods",
        description="Watch Pods and Nodes; while leader, evict misplaced owned pods, report exec format "
        "errors and place pods the webhook gated. Every flag is also a NOE_* variable.",
    )
    add_flags(parser.add_argument_group("controller"), CONTROLLER_FLAGS)
    add_policy_arguments(parser)
    add_registry_arguments(parser)
    parser.set_defaults(run=run_controller)


def own_namespace(path: Path = NAMESPACE_FILE) -> str:
    """The pod's namespace from its service-account mount, else ``default``."""
    try:
        return path.read_text().strip() or "default"
    except OSError:
        return "default"


@dataclass(frozen=True)
class ControllerConfig:
    policy: PolicySettings
    registry: Any
    node_keychain: Any
    kubeconfig: Path | None
    image_platforms: Path | None
    leader_elect: bool
    lease_namespace: str
    lease_name: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    eviction_backoff: float
    gate_timeout: float
    dry_run: bool
    metrics_addr: tuple[str, int] | None
    pull_secret_cache_ttl: float
    lookup_timeout: float
    log_level: str

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> ControllerConfig:
        from noe_core.cli.registry_options import (  # noqa: PLC0415
            node_keychain_from_args,
            registry_settings_from_args,
        )
        from noe_core.platforms_file import StaticPlatforms  # noqa: PLC0415

        lease, renew, retry = ns.lease_duration, ns.renew_deadline, ns.retry_period
        if not 0 < retry * JITTER < renew < lease:
            raise InvalidSettings(
                f"{LEASE_DURATION.name} {lease:g}s, {RENEW_DEADLINE.name} {renew:g}s and {RETRY_PERIOD.name} "
                f"{retry:g}s must satisfy lease > renew > {JITTER} x retry > 0 (as client-go requires)"
            )
        platforms = require(ns, IMAGE_PLATFORMS)
        if platforms is not None:
            StaticPlatforms.load(platforms)
        return cls(
            policy=policy_settings_from_args(ns),
            registry=registry_settings_from_args(ns),
            node_keychain=node_keychain_from_args(ns),
            kubeconfig=require(ns, KUBECONFIG),
            image_platforms=platforms,
            leader_elect=ns.leader_elect,
            lease_namespace=ns.leader_election_namespace or own_namespace(),
            lease_name=ns.leader_election_id,
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
            eviction_backoff=ns.eviction_backoff,
            gate_timeout=ns.gate_timeout,
            dry_run=ns.dry_run,
            metrics_addr=ns.metrics_addr,
            pull_secret_cache_ttl=ns.pull_secret_cache_ttl,
            lookup_timeout=ns.lookup_timeout,
            log_level=ns.log_level,
        )


@dataclass
class Running:
    """The parts of a started controller, stopped in order by :meth:`stop`."""

    controller: Any
    elector: Any
    events: Any
    health: Any
    kube: Any
    pool: Any

    def stop(self) -> None:
        self.controller.stop()
        if self.elector is not None:
            self.elector.stop(release=True)
        self.events.stop(timeout=5.0)
        if self.health is not None:
            self.health.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.kube.close()


def start(config: ControllerConfig, api: Any) -> Running:
    """Build and start everything (raises ``OSError`` when the metrics port cannot be bound)."""
    import concurrent.futures  # noqa: PLC0415

    from noe_core.platforms_file import StaticPlatforms  # noqa: PLC0415
    from noe_core.registry.resolver import Resolver  # noqa: PLC0415
    from noe_core.registry.transport import make_session  # noqa: PLC0415
    from noe_web.controller.actions import Actions, EvictionLimiter  # noqa: PLC0415
    from noe_web.controller.gates import GateFinisher  # noqa: PLC0415
    from noe_web.controller.leader import LeaderElector, LeaseSettings  # noqa: PLC0415
    from noe_web.controller.lookups import PodLookups  # noqa: PLC0415
    from noe_web.controller.metrics import ControllerMetrics, HealthServer  # noqa: PLC0415
    from noe_web.controller.reconciler import Controller  # noqa: PLC0415
    from noe_web.events import EventRecorder  # noqa: PLC0415
    from noe_web.kube import KubeClient  # noqa: PLC0415

    metrics = ControllerMetrics()
    kube = KubeClient(api, secret_cache_ttl=config.pull_secret_cache_ttl, timeout=10.0)
    resolver = Resolver(
        make_session(config.registry),
        settings=config.registry,
        keychain=config.node_keychain,
        observer=metrics.registry_metrics,
    )
    static = StaticPlatforms.load(config.image_platforms) if config.image_platforms else None
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="noe-lookup")
    lookups = PodLookups(static, resolver, kube, pool, timeout=config.lookup_timeout)
    events = EventRecorder(
        kube,
        on_written=lambda outcome: metrics.registry_metrics.events.labels(outcome).inc(),
        on_drop=lambda reason: metrics.registry_metrics.events.labels("dropped").inc(),
    )
    holder: dict[str, Any] = {}

    def started() -> None:
        holder["controller"].started_leading()

    def stopped() -> None:
        holder["controller"].stopped_leading()

    elector = None
    if config.leader_elect:
        elector = LeaderElector(
            kube,
            LeaseSettings(
                config.lease_namespace,
                config.lease_name,
                config.lease_duration,
                config.renew_deadline,
                config.retry_period,
            ),
            on_started=started,
            on_stopped=stopped,
        )
    is_leader = elector.is_leader if elector is not None else (lambda: True)
    actions = Actions(
        kube, events, metrics, EvictionLimiter(config.eviction_backoff), is_leader, dry_run=config.dry_run
    )
    gates = GateFinisher(kube, lookups, config.policy, actions, metrics, gate_timeout=config.gate_timeout)
    controller = Controller(kube, lookups=lookups, actions=actions, gates=gates, metrics=metrics)
    holder["controller"] = controller
    health = None
    if config.metrics_addr is not None:
        health = HealthServer(config.metrics_addr[0], config.metrics_addr[1], metrics.registry, controller.ready)
        health.start()
    events.start()
    controller.start()
    if elector is not None:
        elector.start()
    else:
        controller.started_leading()
    return Running(controller, elector, events, health, kube, pool)


def run_controller(ns: argparse.Namespace) -> int:
    from noe_web.kube import build_ssl_context, discover  # noqa: PLC0415
    from noe_web.serve import configure_logging  # noqa: PLC0415

    configure_logging(ns.log_level)
    try:
        config = ControllerConfig.from_args(ns)
        api = discover(config.kubeconfig)
        if api is None:
            raise InvalidSettings("no Kubernetes API: give --kubeconfig, or run in a pod with a service account")
        build_ssl_context(api)
    except InvalidSettings as exc:
        print(f"noe controller: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        running = start(config, api)
    except OSError as exc:
        host, port = config.metrics_addr or ("", 0)
        print(
            f"noe controller: --metrics-addr {host}:{port}: cannot listen ({exc.strerror})", file=sys.stderr, flush=True
        )
        return 2
    print(
        json.dumps(
            {
                "event": "startup",
                "msg": "noe controller starting",
                "kubernetes_api": api.describe(),
                "leader_elect": config.leader_elect,
                "lease": f"{config.lease_namespace}/{config.lease_name}",
                "dry_run": config.dry_run,
                "gate_timeout": config.gate_timeout,
                "eviction_backoff": config.eviction_backoff,
                "metrics_port": running.health.port if running.health is not None else None,
                "holder": running.elector.holder if running.elector is not None else None,
            },
            default=str,
            separators=(",", ":"),
        ),
        flush=True,
    )
    done = threading.Event()

    def stop(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    done.wait()
    log.info("stopping")
    running.stop()
    return 0
