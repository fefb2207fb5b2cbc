"""One admission, start to finish: lookups within the deadline, policy, Events, log line.

The web layer hands a decoded AdmissionReview to :meth:`AdmissionService.review`
and serialises what comes back. Every step that can be slow is bounded by one
:class:`~noe_core.util.deadline.Deadline` of ``--admission-deadline`` seconds:

The admission itself is :func:`noe_core.admission.admitting.admit`, the same function
``noe mutate`` calls; this service supplies its ``inspect``:

1. ``admit`` reads the object once, gets the pod's settings from the flags and
   the placement policies that match it (``policies``: the cluster's, watched by
   :mod:`noe_web.kube.policy_watch`, or ``--policy`` files), and asks for the
   images the policy needs;
2. :class:`~noe_core.registry.lookup_service.LookupService` answers it with the
   one rule the controller, ``noe report`` and ``noe mutate`` follow too:
   ``--image-platforms`` first, then what the cache may give this pod without
   its credentials; only if some image still needs the registry are the pod's
   ``imagePullSecrets`` read (missing or forbidden → a warning, and the lookup
   goes on without it), within 40% of what remains of the deadline (at most
   2 s), and the rest resolved in parallel; lookups still running at the
   deadline are abandoned and become ``LookupFailure("timed out after Ns")``,
   which the policy turns into a warning (or a deny in a strict namespace);
3. ``admit`` places the pod and builds the response from the policy's own patch (for ``kubectl
   debug``'s ephemeral containers, rule 18, it checks them against the pod's Node instead, read
   through a small cache, :class:`~noe_web.kube.nodes.KubeNodes`, within the same deadline);
4. Events are queued (never written on the request path, never on dry-run);
5. one JSON log line and the metrics; the log line and the Events name the
   placement policies applied.

Nothing here logs a credential or a Secret's content: Secrets are turned into
keychains at once and only their namespace/name appear in messages.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from noe_core.admission.admitting import Admission, admit
from noe_core.admission.review import parse_admission_review, review_response
from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import LookupFailure, LookupRequest, LookupResult
from noe_core.policies.merge import PolicySource
from noe_core.policies.settings import OnLookupFailure, PolicySettings
from noe_core.registry.lookup_service import LookupService, PlatformResolver
from noe_core.util.deadline import Deadline
from noe_web import json_codec
from noe_web.kube.client import KubeClient
from noe_web.kube.events import (
    NORMAL,
    REASON_FAILED,
    REASON_FALLBACK,
    REASON_INJECTED,
    WARNING,
    EventRecorder,
    EventRequest,
    controller_ref,
    fallback_message,
    object_ref,
)
from noe_web.kube.nodes import KubeNodes
from noe_web.kube.pull_secrets import MAX_PULL_SECRETS, KubePullSecrets
from noe_web.logs import ADMISSION_UID, log_fields
from noe_web.metrics import Metrics
from noe_web.tracing.hooks import NO_TRACING, WebhookTracing

log = logging.getLogger("noe.admission")

__all__ = ["MAX_PULL_SECRETS", "AdmissionService", "AdmissionStats", "ObserverTee"]

# The share of the deadline pull Secrets may take before lookups go ahead without them.
_SECRET_SHARE = 0.4
_SECRET_CAP = 2.0


@dataclass
class AdmissionStats:
    """Per-admission counts, filled by :class:`ObserverTee` on whichever thread does the lookup."""

    cache_hits: int = 0
    cache_misses: int = 0
    coalesced: int = 0
    registry_requests: int = 0


_current_stats: contextvars.ContextVar[AdmissionStats | None] = contextvars.ContextVar(
    "noe_admission_stats", default=None
)


class ObserverTee:
    """A ``RegistryObserver`` feeding the process metrics and the current admission's counts."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def request(self, registry: str, method: str, status: int) -> None:
        self._metrics.request(registry, method, status)
        stats = _current_stats.get()
        if stats is not None:
            stats.registry_requests += 1

    def cache_hit(self, kind: str) -> None:
        self._metrics.cache_hit(kind)
        stats = _current_stats.get()
        if stats is not None:
            stats.cache_hits += 1

    def cache_miss(self, kind: str) -> None:
        self._metrics.cache_miss(kind)
        stats = _current_stats.get()
        if stats is not None:
            stats.cache_misses += 1

    def coalesced(self, kind: str) -> None:
        self._metrics.coalesced(kind)
        stats = _current_stats.get()
        if stats is not None:
            stats.coalesced += 1

    def token_fetch(self, registry: str, outcome: str) -> None:
        self._metrics.token_fetch(registry, outcome)

    def rate_limit(self, registry: str, remaining: int, limit: int) -> None:
        self._metrics.rate_limit(registry, remaining, limit)

    def error(self, registry: str, kind: str) -> None:
        self._metrics.error(registry, kind)


@dataclass
class AdmissionService:
    """Everything one admission needs; built once per worker process."""

    policy: PolicySettings
    metrics: Metrics
    deadline_seconds: float = 5.0
    static: StaticPlatforms | None = None
    resolver: PlatformResolver | None = None
    tracing: WebhookTracing = NO_TRACING
    """The worker's tracing (the app opens the admission's span; this describes it and flushes it at close)."""
    kube: KubeClient | None = None
    events: EventRecorder | None = None
    pool_size: int = 32
    on_lookup_failure: OnLookupFailure = "allow"
    lookup_share: int = 0
    """Lookups one admission may have in the pool at a time (0: a quarter of it), so no pod starves the others."""
    pull_secrets_hint: str = ""
    """``--pull-secrets-hint``: warned once when a pod's imagePullSecret may not be read."""
    policies: PolicySource | None = None
    """Placement policies (the cluster's watch, or ``--policy`` files); ``None``: the flags alone."""
    learned: Any = None
    """The learned platforms (``noe_web.kube.learned_watch.LearnedWatch``: ``current()``); ``None``: none."""
    _pool: concurrent.futures.ThreadPoolExecutor = field(init=False, repr=False)
    _lookups: LookupService = field(init=False, repr=False)
    _nodes: KubeNodes = field(init=False, repr=False)
    _flags: PolicySettings = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # One settings value for every admission (the flags and --on-lookup-failure): the policies' merge is
        # remembered per settings value, so a value rebuilt per admission would never find it.
        self._flags = replace(self.policy, on_lookup_failure=self.on_lookup_failure)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.pool_size, thread_name_prefix="noe-lookup")
        secrets = KubePullSecrets(
            self.kube,
            self._pool,
            on_unusable=self.metrics.pull_secrets_failed,
            forbidden_hint=self.pull_secrets_hint,
        )
        share = self.lookup_share or max(1, self.pool_size // 4)
        self._lookups = LookupService(self.static, self.resolver, secrets, executor=self._pool, share=share)
        self._nodes = KubeNodes(self.kube)

    def ready(self) -> bool:
        """Ready for admissions: the placement policies have been listed (always, without a watch)."""
        return bool(getattr(self.policies, "ready", True))

    def close(self) -> None:
        for source in (self.policies, self.learned):
            stop = getattr(source, "stop", None)
            if callable(stop):
                stop()
        if self.events is not None:
            self.events.stop(timeout=2.0)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.kube is not None:
            self.kube.close()
        close = getattr(self.resolver, "close", None)
        if callable(close):
            close()
        self.tracing.shutdown()  # last: the Events written above are spans too

    # ------------------------------------------------------------------ the admission
    def review(self, doc: object) -> dict[str, Any]:
        """Answer one decoded AdmissionReview; raises :class:`InvalidObject` for input noe cannot read."""
        started = time.monotonic()
        deadline = Deadline.after(self.deadline_seconds)
        request = parse_admission_review(doc)
        # Every line logged while answering carries the uid; lookup threads run in a copy of this context.
        token = ADMISSION_UID.set(request.uid)
        try:
            stats = AdmissionStats()
            admission = admit(
                request,
                self._flags,
                lambda lookup: self._inspect(lookup, deadline, stats),
                nodes=lambda name: self._nodes.platform(name, deadline),
                policies=self.policies,
                learned=self.learned.current() if self.learned is not None else None,
            )
            if not request.dry_run:
                self._record_events(admission)
            seconds = time.monotonic() - started
            if admission.label == "skipped":
                self.metrics.skipped(request.kind, request.operation)
            self.metrics.admission(
                namespace=request.namespace, kind=request.kind, decision=admission.label, seconds=seconds
            )
            self._log(admission, seconds, stats)
            self.tracing.admitted(admission, stats)
            return review_response(request, admission.decision, encode=json_codec.compact)
        finally:
            ADMISSION_UID.reset(token)

    # ------------------------------------------------------------------ lookups
    def _inspect(self, lookup: LookupRequest, deadline: Deadline, stats: AdmissionStats) -> LookupResult:
        # The admission's counts, for the observer: lookup threads run in copies of this context.
        token = _current_stats.set(stats)
        try:
            budget = min(deadline.remaining() * _SECRET_SHARE, _SECRET_CAP)
            inspection = self._lookups.inspect(lookup, deadline=deadline, secret_budget=budget)
        finally:
            _current_stats.reset(token)
        if inspection.declared:
            self.metrics.static_lookups.inc(len(inspection.declared))
        return inspection.result

    # ------------------------------------------------------------------ events and logs
    def _record_events(self, admission: Admission) -> None:
        request, decision = admission.request, admission.decision
        if self.events is None or not request.namespace or admission.label == "skipped":
            return
        if not decision.allowed:
            kind, reason, message = WARNING, REASON_FAILED, decision.message or "denied"
        elif decision.fallback:
            kind, reason, message = NORMAL, REASON_FALLBACK, fallback_message(decision)
        elif decision.changed and decision.common:
            kind, reason = NORMAL, REASON_INJECTED
            message = f"required kubernetes.io/arch in [{', '.join(decision.common)}]"
        elif decision.warnings:
            kind, reason, message = WARNING, REASON_FAILED, "; ".join(decision.warnings)
        else:
            return
        if admission.policies:
            message = f"{message} (placement policies: {', '.join(admission.policies)})"
        target = object_ref(request.meta, kind=request.kind, namespace=request.namespace)
        self.events.record(EventRequest(target, kind, reason, message))
        owner = controller_ref(request.meta, request.namespace)
        if owner is not None:
            what = f"{request.kind.lower()}s of {owner.kind} {owner.name}"
            self.events.record(EventRequest(owner, kind, reason, f"{what}: {message}", is_owner=True))

    def _log(self, admission: Admission, seconds: float, stats: AdmissionStats) -> None:
        if not log.isEnabledFor(logging.INFO):
            return  # the fields below cost more than the line's absence
        request, decision, meta = admission.request, admission.decision, admission.request.meta
        fields: dict[str, Any] = {
            "event": "admission",
            "uid": request.uid,
            "namespace": request.namespace,
            "name": meta.name or (request.name if request.name != meta.generate_name else None) or None,
            "generateName": meta.generate_name or None,
            "kind": request.kind,
            "operation": request.operation,
            "dry_run": request.dry_run,
            "images": list(admission.images),
            "decision": admission.label,
            "common": list(decision.common) if decision.common is not None else None,
            "warnings": list(decision.warnings),
            "message": decision.message,
            "failed_lookups": sorted(i for i, v in admission.lookups.items() if isinstance(v, LookupFailure)),
            "policies": list(admission.policies),
            "duration_ms": round(seconds * 1000, 2),
            "cache_hits": stats.cache_hits,
            "cache_misses": stats.cache_misses,
            "coalesced": stats.coalesced,
            "registry_requests": stats.registry_requests,
        }
        log_fields(log, logging.INFO, "admission", fields)
