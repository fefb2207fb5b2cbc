"""The placement pipeline with its lookups: one :class:`Decider` per process, for every path that decides pods.

:mod:`noe_core.pipeline` is pure: it says which images a pod's decision reads
and decides from their lookups. A process that decides pods — the webhook,
``noe controller`` (misplaced pods, gated pods, PolicyReports), ``noe report``,
``noe why``, ``noe mutate`` — builds one :class:`Decider` from its flags, its
:class:`~noe_core.registry.lookup_service.LookupService`, the placement
policies and the learned platforms, and asks it; so the inputs of a decision
are assembled in one place, the same way for every path.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from noe_core.image.image_platforms import Lookup, LookupRequest, LookupResult, Lookups
from noe_core.image.learned import LearnedPlatforms
from noe_core.image.offer import Offer
from noe_core.k8s.workload import Workload
from noe_core.placement.admitted import as_admitted, noe_terms
from noe_core.placement.pipeline import NO_LEARNED, PodInputs, Prepared, Stage, prepare
from noe_core.placement.rules import Decision
from noe_core.policies.merge import PolicySource
from noe_core.policies.settings import PolicySettings
from noe_core.util.deadline import Deadline


class Inspected(Protocol):
    """What a lookup gives (``noe_core.registry.lookup_service.Inspection``)."""

    @property
    def result(self) -> LookupResult: ...


class LookupSource(Protocol):
    """The lookups a decision needs (``noe_core.registry.lookup_service.LookupService`` implements it)."""

    def inspect(
        self, request: LookupRequest, *, deadline: Deadline, secret_budget: float | None = None
    ) -> Inspected: ...

    def answer(
        self, request: LookupRequest, known: Mapping[str, Lookup], sources: Mapping[str, str]
    ) -> LookupResult: ...


class LearnedSource(Protocol):
    """Where the learned platforms are read (``noe_web.kube.learned_watch.LearnedWatch``, or a fixed value)."""

    def current(self) -> LearnedPlatforms: ...


@dataclass(frozen=True)
class FixedLearned:
    """Learned platforms that do not change (a ``--learned`` file, tests)."""

    learned: LearnedPlatforms = NO_LEARNED

    def current(self) -> LearnedPlatforms:
        return self.learned


NOTHING_LEARNED = FixedLearned()


@dataclass(frozen=True)
class Decider:
    """Flags, policies, learned platforms and the lookup service of one process: each pod's decision.

    ``lookup_timeout`` bounds a lookup when the caller gives no deadline (the controller, the report).
    """

    flags: PolicySettings
    lookups: LookupSource
    policies: PolicySource | None = None
    learned: LearnedSource = NOTHING_LEARNED
    lookup_timeout: float = 10.0

    def inputs(
        self,
        workload: Workload,
        namespace: str,
        *,
        stage: Stage = "admission",
        uid: str = "",
        operation: str = "CREATE",
    ) -> PodInputs:
        """The pipeline's inputs for one pod, as every path of this process builds them."""
        return PodInputs(workload, namespace, self.flags, self.policies, self.learned.current(), uid, operation, stage)

    def prepare(
        self,
        workload: Workload,
        namespace: str,
        *,
        stage: Stage = "admission",
        uid: str = "",
        operation: str = "CREATE",
    ) -> Prepared:
        return prepare(self.inputs(workload, namespace, stage=stage, uid=uid, operation=operation))

    def look_up(
        self, request: LookupRequest, *, deadline: Deadline | None = None, secret_budget: float | None = None
    ) -> Inspected:
        """The lookups one decision needs (declared platforms, cache, pull Secrets, registry: the service's rule)."""
        bound = deadline if deadline is not None else Deadline.after(self.lookup_timeout)
        return self.lookups.inspect(request, deadline=bound, secret_budget=secret_budget)

    def decide(
        self,
        workload: Workload,
        namespace: str,
        *,
        stage: Stage = "admission",
        uid: str = "",
        operation: str = "CREATE",
        deadline: Deadline | None = None,
    ) -> Decision:
        """Prepare, look up what the decision reads, decide."""
        prepared = self.prepare(workload, namespace, stage=stage, uid=uid, operation=operation)
        return prepared.decide(self.result_for(prepared, deadline=deadline))

    def result_for(self, prepared: Prepared, *, deadline: Deadline | None = None) -> LookupResult | None:
        """The lookups of a prepared decision (``None`` when it reads no image)."""
        if not prepared.images:
            return None
        return self.look_up(prepared.request, deadline=deadline).result

    def admitted(
        self, workload: Workload, namespace: str, *, deadline: Deadline | None = None
    ) -> tuple[Decision, Offer] | None:
        """What noe required of a live pod (:mod:`noe_core.placement.admitted`): the Decision for the pod
        without its platform requirements (as at admission, its rollout group from its label, no gate) and the nodes noe
        required; ``None`` when the pod's platform requirements are not noe's."""
        before = as_admitted(workload)
        if before is None:
            return None
        decision = self.decide(before, namespace, stage="admitted", deadline=deadline)
        terms = noe_terms(decision, workload)
        return None if terms is None else (decision, terms)

    def known(self, workload: Workload, namespace: str, answers: Lookups, sources: Mapping[str, str]) -> Decision:
        """A running pod's decision from answers already obtained for every pod (``noe report``,
        PolicyReports): its own policies' declared platforms first, then ``answers``."""
        prepared = self.prepare(workload, namespace, stage="running")
        return prepared.decide(self.lookups.answer(prepared.request, answers, sources))


@dataclass
class KnownAnswers:
    """Each pod's lookups, decided by the pipeline from one set of answers for every image, remembered per
    (namespace, labels, images): the pods of one workload are decided once (``noe report``, PolicyReports)."""

    decider: Decider
    answers: Lookups
    sources: Mapping[str, str] = field(default_factory=dict)
    _seen: dict[tuple[object, ...], Decision] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def decision(self, workload: Workload, namespace: str) -> Decision:
        key = (namespace, workload.images, workload.node_name == "", tuple(sorted(workload.labels.items())))
        found = self._seen.get(key)
        if found is None:
            found = self.decider.known(workload, namespace, self.answers, self.sources)
            with self._lock:
                self._seen[key] = found
        return found
