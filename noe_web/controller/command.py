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

from noe_core.cli.flags import IMAGE_PLATFORMS
from noe_core.cli.parser import add_flags, require
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.errors import InvalidSettings
from noe_core.policies.settings import PolicySettings
from noe_web.controller.flags import (
    CONTROLLER_FLAGS,
    LEASE_DURATION,
    POLICY_REPORT_INTERVAL,
    RENEW_DEADLINE,
    RETRY_PERIOD,
)
from noe_web.flags import KUBECONFIG, SHARED_CACHE_BOUNDED_FLAGS
from noe_web.kube.namespace import own_namespace

log = logging.getLogger("noe.controller")

JITTER = 1.2
MIN_POLICY_REPORT_INTERVAL = 1.0
DEFAULT_POLICY_REPORT_TARGET = "arm64"
SWITCH_INTERVAL = 0.05
"""Seconds a thread holds the interpreter before another may take it (Python's default: 0.005).

Why: while a list runs, the informer decodes pods and four workers examine them, all bound by the CPU.
At 5 ms the interpreter changed hands about 200 times a second between five runnable threads, each
worker woken for a pod or two: the workers spent twice the CPU their examinations cost, and the
first full reconcile of 60,000 pods took 9.9 s; at 50 ms, 7.4 s (bench/bench_controller.py). A thread
whose answer came (the lease, a registry lookup, a probe) waits about 50 ms at most for the
interpreter while another computes, well inside every deadline the controller keeps (leases of
seconds, probes of one). The webhook keeps the default: it answers admissions in milliseconds.
"""


def add_controller_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    parser = subparsers.add_parser(
        "controller",
        help="repair misplaced pods, report exec format errors, finish gated pods",
        description="Watch Pods and Nodes; while leader, evict misplaced owned pods, report exec format "
        "errors and place pods the webhook gated. Every flag is also a NOE_* variable.",
    )
    add_flags(parser.add_argument_group("controller"), CONTROLLER_FLAGS)
    add_flags(parser.add_argument_group("cache shared with noe serve"), SHARED_CACHE_BOUNDED_FLAGS)
    add_policy_arguments(parser)
    add_registry_arguments(parser)
    parser.set_defaults(run=run_controller)


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
    pull_secrets_hint: str
    lookup_timeout: float
    log_level: str
    policy_reports: bool = False
    policy_report_target: str = DEFAULT_POLICY_REPORT_TARGET
    policy_report_interval: float = 60.0
    shared_cache: Any = None  # noe_web.registry_cache.SharedCacheConfig | None
    noe_namespace: str = "default"
    context: str = ""
    """``--context``: the kubeconfig context (empty: its current-context)."""

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> ControllerConfig:
        from noe_core.cli.registry_options import (  # noqa: PLC0415
            node_keychain_from_args,
            registry_settings_from_args,
        )
        from noe_core.image.declared import StaticPlatforms  # noqa: PLC0415

        lease, renew, retry = ns.lease_duration, ns.renew_deadline, ns.retry_period
        if not 0 < retry * JITTER < renew < lease:
            raise InvalidSettings(
                f"{LEASE_DURATION.name} {lease:g}s, {RENEW_DEADLINE.name} {renew:g}s and {RETRY_PERIOD.name} "
                f"{retry:g}s must satisfy lease > renew > {JITTER} x retry > 0 (as client-go requires)"
            )
        platforms = require(ns, IMAGE_PLATFORMS)
        if platforms is not None:
            StaticPlatforms.load(platforms)
        if ns.policy_report_interval < MIN_POLICY_REPORT_INTERVAL:
            raise InvalidSettings(
                f"{POLICY_REPORT_INTERVAL.name} {ns.policy_report_interval:g}s is too short: "
                f"at least {MIN_POLICY_REPORT_INTERVAL:g}s"
            )
        policy = policy_settings_from_args(ns)
        target = ns.target or DEFAULT_POLICY_REPORT_TARGET
        if ns.policy_reports and policy.schedulable_archs and target not in policy.schedulable_archs:
            raise InvalidSettings(
                f"--target {target} is not among --cluster-schedulable-archs "
                f"({', '.join(sorted(policy.schedulable_archs))}): the PolicyReports would judge nothing there"
            )
        from noe_web.registry_cache import shared_cache_config, sized  # noqa: PLC0415

        return cls(
            policy=policy,
            registry=sized(registry_settings_from_args(ns), ns),
            node_keychain=node_keychain_from_args(ns),
            kubeconfig=require(ns, KUBECONFIG),
            context=ns.context,
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
            pull_secrets_hint=ns.pull_secrets_hint,
            lookup_timeout=ns.lookup_timeout,
            log_level=ns.log_level,
            policy_reports=ns.policy_reports,
            policy_report_target=target,
            policy_report_interval=ns.policy_report_interval,
            shared_cache=shared_cache_config(ns),
            noe_namespace=ns.noe_namespace or own_namespace(),
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
    reporter: Any = None
    policies: Any = None
    statuses: Any = None
    rollouts: Any = None
    learned: Any = None

    def stop(self) -> None:
        if self.learned is not None:
            self.learned.stop()
        if self.rollouts is not None:
            self.rollouts.stop()
        if self.reporter is not None:
            self.reporter.stop()
        if self.statuses is not None:
            self.statuses.stop()
        if self.policies is not None:
            self.policies.stop()
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

    from noe_core.image.declared import StaticPlatforms  # noqa: PLC0415
    from noe_core.placement.decider import Decider  # noqa: PLC0415
    from noe_core.registry.lookup_service import LookupService  # noqa: PLC0415
    from noe_core.registry.resolver import Resolver  # noqa: PLC0415
    from noe_core.registry.transport import make_session  # noqa: PLC0415
    from noe_web.controller.actions import Actions, EvictionLimiter  # noqa: PLC0415
    from noe_web.controller.eviction_record import EvictionRecord  # noqa: PLC0415
    from noe_web.controller.gates import GateFinisher  # noqa: PLC0415
    from noe_web.controller.leader import LeaderElector, LeaseSettings  # noqa: PLC0415
    from noe_web.controller.learning import Learning  # noqa: PLC0415
    from noe_web.controller.metrics import ControllerMetrics, HealthServer  # noqa: PLC0415
    from noe_web.controller.policy_reports import PolicyReporter  # noqa: PLC0415
    from noe_web.controller.policy_status import PolicyStatusWriter  # noqa: PLC0415
    from noe_web.controller.reconciler import Controller, ControllerSettings  # noqa: PLC0415
    from noe_web.controller.rollouts import Rollouts  # noqa: PLC0415
    from noe_web.kube.client import KubeClient  # noqa: PLC0415
    from noe_web.kube.events import EventRecorder  # noqa: PLC0415
    from noe_web.kube.learned_watch import LearnedWatch  # noqa: PLC0415
    from noe_web.kube.policy_watch import PolicyWatch  # noqa: PLC0415
    from noe_web.kube.pull_secrets import KubePullSecrets  # noqa: PLC0415

    metrics = ControllerMetrics()
    kube = KubeClient(api, secret_cache_ttl=config.pull_secret_cache_ttl, timeout=10.0)
    from noe_web.registry_cache import open_shared  # noqa: PLC0415

    resolver = Resolver(
        make_session(config.registry),
        settings=config.registry,
        keychain=config.node_keychain,
        observer=metrics.registry_metrics,
        shared=open_shared(config.shared_cache, config.registry, observer=metrics.registry_metrics),
    )
    static = StaticPlatforms.load(config.image_platforms) if config.image_platforms else None
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="noe-lookup")
    # The webhook's rule: warm answers cost no request of any kind; Secrets only for what needs the registry.
    secrets = KubePullSecrets(kube, pool, forbidden_hint=config.pull_secrets_hint)
    lookups = LookupService(static, resolver, secrets, executor=pool)
    events = EventRecorder(
        kube,
        on_written=lambda outcome: metrics.registry_metrics.events.labels(outcome).inc(),
        on_drop=lambda reason: metrics.registry_metrics.events.labels("dropped").inc(),
    )
    holder: dict[str, Any] = {}
    # the placement policies, as the webhook watches them: gated pods are placed with their merged settings,
    # and the leader writes each policy's status
    policies = PolicyWatch(
        KubeClient(api, secret_cache_size=0, timeout=10.0),
        on_restart=lambda resource, reason: metrics.watch_restarts.labels(resource, reason).inc(),
        on_policy_change=lambda: holder["statuses"].changed() if "statuses" in holder else None,
    )

    def started() -> None:
        holder["statuses"].changed()
        holder["controller"].started_leading()
        if holder.get("reporter") is not None:
            holder["reporter"].started_leading()

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
    # the back-off every leader reads: kept in the cluster, so a failover does not forget it
    record = EvictionRecord(
        kube,
        config.noe_namespace,
        config.eviction_backoff,
        on_write=metrics.api_writes.labels("configmap").inc,
    )
    actions = Actions(
        kube,
        events,
        metrics,
        EvictionLimiter(config.eviction_backoff),
        is_leader,
        dry_run=config.dry_run,
        record=record,
    )
    # what exec format errors proved, as every webhook worker reads it: every decision here applies it too
    learned = LearnedWatch(KubeClient(api, secret_cache_size=0, timeout=10.0), config.noe_namespace)
    decider = Decider(config.policy, lookups, policies, learned, lookup_timeout=config.lookup_timeout)
    gates = GateFinisher(kube, decider, actions, metrics, gate_timeout=config.gate_timeout)
    rollouts = Rollouts(policies, actions, metrics, config.policy)
    learning = Learning(kube, actions, config.noe_namespace)
    controller = Controller(
        kube,
        decider=decider,
        actions=actions,
        gates=gates,
        metrics=metrics,
        settings=ControllerSettings(
            keep_requests=config.policy_reports, x86_64_levels=config.policy.x86_64_levels == "nfd"
        ),
        rollouts=rollouts,
        learning=learning,
    )
    holder["controller"] = controller
    statuses = PolicyStatusWriter(policies, actions, metrics)
    holder["statuses"] = statuses
    reporter = None
    if config.policy_reports:
        reporter = PolicyReporter(
            controller.pods,
            decider,
            actions,
            target=config.policy_report_target,
            interval=config.policy_report_interval,
        )
        holder["reporter"] = reporter
    health = None
    if config.metrics_addr is not None:
        health = HealthServer(config.metrics_addr[0], config.metrics_addr[1], metrics.registry, controller.ready)
        health.start()
    events.start()
    policies.start()
    learned.start()
    statuses.start()
    rollouts.start()
    controller.start()
    if reporter is not None:
        reporter.start()
    if elector is not None:
        elector.start()
    else:
        started()
    return Running(controller, elector, events, health, kube, pool, reporter, policies, statuses, rollouts, learned)


def run_controller(ns: argparse.Namespace) -> int:
    from noe_web.kube.config import build_ssl_context, discover  # noqa: PLC0415
    from noe_web.logs import configure_logging  # noqa: PLC0415

    configure_logging(ns.log_level, ns.log_format)
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        config = ControllerConfig.from_args(ns)
        api = discover(config.kubeconfig, context=config.context or None)
        if api is None:
            raise InvalidSettings(
                "no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or run in a pod with a service account"
            )
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
                "policy_reports": config.policy_report_target if config.policy_reports else None,
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
