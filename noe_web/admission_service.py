"""One admission, start to finish: lookups within the deadline, policy, Events, log line.

The web layer hands a decoded AdmissionReview to :meth:`AdmissionService.review`
and serialises what comes back. Every step that can be slow is bounded by one
:class:`~noe_core.deadline.Deadline` of ``--admission-deadline`` seconds:

The admission itself is :func:`noe_core.admission.admit`, the same function
``noe mutate`` calls; this service supplies its ``inspect``:

1. ``admit`` reads the object once and asks for the images the policy needs;
2. ``--image-platforms`` answers first; for the rest, the pod's
   ``imagePullSecrets`` are read through the Kubernetes API (missing or
   forbidden → a warning and anonymous access) and the images resolved in
   parallel, each on its own thread; lookups still running at the deadline are
   abandoned and become ``LookupFailure("timed out after Ns")`` (shared with
   ``noe mutate`` in :mod:`noe_core.registry.inspection`), which the
   policy turns into a warning (or a deny in a strict namespace);
3. ``admit`` places the pod and builds the response from the policy's own patch;
4. Events are queued (never written on the request path, never on dry-run);
5. one JSON log line and the metrics.

Nothing here logs a credential or a Secret's content: Secrets are turned into
keychains at once and only their namespace/name appear in messages.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from noe_core.admission import Admission, AdmissionRequest, admit, parse_admission_review
from noe_core.deadline import Deadline
from noe_core.gate import OnLookupFailure
from noe_core.lookup import LookupFailure, LookupRequest, LookupResult
from noe_core.platforms_file import StaticPlatforms
from noe_core.registry.inspection import ImageInspector, PlatformResolver
from noe_core.settings import PolicySettings
from noe_web.events import (
    NORMAL,
    REASON_FAILED,
    REASON_INJECTED,
    WARNING,
    EventRecorder,
    EventRequest,
    controller_owner,
    object_ref,
)
from noe_web.kube import KubeClient
from noe_web.metrics import Metrics
from noe_web.pull_secrets import MAX_PULL_SECRETS, pull_secret_keychain
from noe_web.serve import ADMISSION_UID

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
    kube: KubeClient | None = None
    events: EventRecorder | None = None
    pool_size: int = 32
    on_lookup_failure: OnLookupFailure = "allow"
    lookup_share: int = 0
    """Lookups one admission may have in the pool at a time (0: a quarter of it), so no pod starves the others."""
    _pool: concurrent.futures.ThreadPoolExecutor = field(init=False, repr=False)
    _inspector: ImageInspector = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.pool_size, thread_name_prefix="noe-lookup")
        share = self.lookup_share or max(1, self.pool_size // 4)
        self._inspector = ImageInspector(static=self.static, resolver=self.resolver, executor=self._pool, share=share)

    def close(self) -> None:
        if self.events is not None:
            self.events.stop(timeout=2.0)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.kube is not None:
            self.kube.close()
        close = getattr(self.resolver, "close", None)
        if callable(close):
            close()

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
                self.policy,
                lambda lookup: self._inspect(request, lookup, deadline, stats),
                on_lookup_failure=self.on_lookup_failure,
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
            return admission.response
        finally:
            ADMISSION_UID.reset(token)

    # ------------------------------------------------------------------ lookups
    def _inspect(
        self, request: AdmissionRequest, lookup: LookupRequest, deadline: Deadline, stats: AdmissionStats
    ) -> LookupResult:
        images = lookup.images
        static = self.static
        warnings: list[str] = []
        needs_registry = self.resolver is not None and (
            static is None or any(static.get(image) is None for image in images)
        )
        keychain = self._pull_secret_keychain(request, lookup, deadline, warnings) if needs_registry else None
        context = contextvars.copy_context()
        context.run(_current_stats.set, stats)
        try:
            inspection = context.run(self._inspector.inspect, images, deadline=deadline, keychain=keychain)
        except Exception as exc:  # a bug in a lookup must not fail the admission
            log.exception("image lookups failed unexpectedly")
            failed = LookupFailure(f"internal error ({type(exc).__name__})")
            return LookupResult(dict.fromkeys(images, failed), tuple(warnings))
        if inspection.declared:
            self.metrics.static_lookups.inc(len(inspection.declared))
        return LookupResult(inspection.lookups, tuple(warnings))

    def _pull_secret_keychain(
        self, request: AdmissionRequest, lookup: LookupRequest, deadline: Deadline, warnings: list[str]
    ) -> Any:
        budget = min(deadline.remaining() * _SECRET_SHARE, _SECRET_CAP)
        namespace = lookup.namespace
        return pull_secret_keychain(
            self.kube,
            namespace,
            lookup.pull_secrets,
            pool=self._pool,
            warnings=warnings,
            budget=budget,
            on_unusable=lambda count: self.metrics.pull_secrets_failed(namespace, count),
        )

    # ------------------------------------------------------------------ events and logs
    def _record_events(self, admission: Admission) -> None:
        request, decision = admission.request, admission.decision
        if self.events is None or not request.namespace or admission.label == "skipped":
            return
        if not decision.allowed:
            kind, reason, message = WARNING, REASON_FAILED, decision.message or "denied"
        elif decision.changed and decision.common:
            kind, reason = NORMAL, REASON_INJECTED
            message = f"required kubernetes.io/arch in [{', '.join(decision.common)}]"
        elif decision.warnings:
            kind, reason, message = WARNING, REASON_FAILED, "; ".join(decision.warnings)
        else:
            return
        target = object_ref(request.obj, kind=request.kind, namespace=request.namespace)
        self.events.record(EventRequest(target, kind, reason, message))
        owner = controller_owner(request.obj, request.namespace)
        if owner is not None:
            what = f"{request.kind.lower()}s of {owner.kind} {owner.name}"
            self.events.record(EventRequest(owner, kind, reason, f"{what}: {message}", is_owner=True))

    def _log(self, admission: Admission, seconds: float, stats: AdmissionStats) -> None:
        if not log.isEnabledFor(logging.INFO):
            return  # the fields below cost more than the line's absence
        request, decision = admission.request, admission.decision
        meta = request.obj.get("metadata") if isinstance(request.obj.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        fields: dict[str, Any] = {
            "event": "admission",
            "uid": request.uid,
            "namespace": request.namespace,
            "name": meta.get("name") or (request.name if request.name != meta.get("generateName") else None) or None,
            "generateName": meta.get("generateName") or None,
            "kind": request.kind,
            "operation": request.operation,
            "dry_run": request.dry_run,
            "images": list(admission.images),
            "decision": admission.label,
            "common": list(decision.common) if decision.common is not None else None,
            "warnings": list(decision.warnings),
            "message": decision.message,
            "failed_lookups": sorted(i for i, v in admission.lookups.items() if isinstance(v, LookupFailure)),
            "duration_ms": round(seconds * 1000, 2),
            "cache_hits": stats.cache_hits,
            "cache_misses": stats.cache_misses,
            "coalesced": stats.coalesced,
            "registry_requests": stats.registry_requests,
        }
        log.info("admission", extra={"fields": fields})
