"""The one placement pipeline: the inputs of one pod → its :class:`~noe_core.policy.Decision`.

Every path of noe that asks where a pod may run calls it, with the same inputs
built the same way: the webhook and ``noe mutate`` (through
:func:`noe_core.admission.admit`), ``noe policy explain``, ``noe controller``'s
misplaced check, its gated-pod placement and its PolicyReports, ``noe report``,
``noe why`` and :mod:`noe_core.testing`. So they cannot disagree: a pod the
webhook placed is never judged misplaced by the controller for want of a
podSelector's declared platforms, and an architecture an ``exec format error``
disproved is left out by every path alone.

The inputs (:class:`PodInputs`): the pod as read once (labels, owner,
namespace, containers, image volumes: a :class:`~noe_core.workload.Workload`),
the flags, the placement policies with their namespaces' labels, the learned
platforms, and — for an admission — its uid (the rollout draw) and operation.
Two pure steps, with the lookups between them (the only I/O, the caller's):

1. :func:`prepare` merges the flags with the policies that match the pod
   (their declared ``imagePlatforms`` included) and says which images to look
   up (:attr:`Prepared.request`);
2. :meth:`Prepared.decide` takes the lookups, takes learned architectures out
   of them, applies the placement contract's rules (:func:`noe_core.policy.apply_rules`),
   the rollout draw, gate mode and the decision trail, and builds the
   :class:`~noe_core.policy.Decision` once.

``stage`` says which moment of a pod's life is decided: ``admission`` (the
webhook, ``noe mutate``), ``gate`` (the controller finishing a gated pod: no
second gate, no rollout draw, as at admission for gated pods), or ``running``
(a pod already bound to a node: every image is looked up, nothing is placed,
the decision's lookups are what the misplaced check judges the node by), or
``admitted`` (a live pod as it was admitted, noe's terms taken out: its rollout
group read from its label instead of drawn, no gate; ``noe why`` and the
controller's ``NoMatchingNode`` check, :mod:`noe_core.placement.admitted`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from noe_core.image.image_platforms import Inspect, LookupRequest, LookupResult, Lookups, declared_first
from noe_core.image.learned import LearnedPlatforms
from noe_core.k8s.object_meta import label_operations as set_label
from noe_core.k8s.workload import Workload, read_workload
from noe_core.placement.gate import gate_parts, held_back
from noe_core.placement.rules import Decision, Label, acts_on, apply_rules, lookup_images, skipped
from noe_core.placement.session import PlacementSession
from noe_core.policies.merge import MergedSettings, PolicySource
from noe_core.policies.objects import GROUP
from noe_core.policies.rollout import ROLLOUT_LABEL, draw_for, label_operations
from noe_core.policies.settings import PolicySettings
from noe_core.policies.trail import trail_operations

FALLBACK_LABEL = f"{GROUP}/fallback"
"""Rule 13a: ``"true"`` on a pod required onto its fallback architecture because an image could not be inspected."""

Stage = Literal["admission", "gate", "running", "admitted"]
"""Which moment of a pod's life is decided (the module docstring)."""

NO_LEARNED = LearnedPlatforms()


@dataclass(frozen=True)
class PodInputs:
    """Everything one decision reads: the pod as read once, and what the cluster says around it.

    ``flags`` are the process's settings (the command line); ``policies`` the
    placement policies and their namespaces' labels (``None``: the flags alone);
    ``learned`` the architectures ``exec format error`` disproved. ``uid`` and
    ``operation`` are the admission's (``uid`` draws the rollout cohort).
    """

    workload: Workload
    namespace: str
    flags: PolicySettings
    policies: PolicySource | None = None
    learned: LearnedPlatforms = NO_LEARNED
    uid: str = ""
    operation: str = "CREATE"
    stage: Stage = "admission"


@dataclass(frozen=True)
class Prepared:
    """Step 1 done: the pod's merged settings, and the images whose platforms the rules will read."""

    inputs: PodInputs
    merged: MergedSettings
    images: tuple[str, ...]
    session: PlacementSession | None = field(default=None, compare=False, repr=False)

    @property
    def settings(self) -> PolicySettings:
        return self.merged.settings

    @property
    def request(self) -> LookupRequest:
        """What to ask the lookup service: the images, the pod's pull Secrets, its policies' declarations."""
        workload = self.inputs.workload
        return LookupRequest(self.images, self.inputs.namespace, workload.pull_secrets, self.merged.declared)

    def decide(self, found: LookupResult | None = None) -> Decision:
        """Step 2: the decision, from the lookups of :attr:`request` (``None``: nothing was looked up)."""
        inputs = self.inputs
        workload = inputs.workload
        result = inputs.learned.apply(found) if found is not None else LookupResult({})
        if inputs.stage == "running":  # nothing is placed: the lookups are the answer (the misplaced check's)
            return Decision(
                True,
                workload.obj,
                warnings=result.warnings,
                reasons=("a running pod: its images' platforms, as every path reads them",),
                lookups=result.lookups,
                sources=result.sources,
                policies=self.merged.names,
                label="allowed",
            )
        settings = self.merged.settings
        draw = None
        recorded = workload.labels.get(ROLLOUT_LABEL) if inputs.stage == "admitted" else None
        if inputs.stage == "admission" or recorded is not None:
            draw = draw_for(
                self.merged.rollout,
                self.merged.rollout_source,
                uid=inputs.uid,
                namespace=inputs.namespace,
                workload=workload,
                operation=inputs.operation,
                group=recorded,
            )
        placed = apply_rules(
            workload,
            namespace=inputs.namespace,
            lookups=result.lookups,
            settings=settings,
            session=self.session,
            rollout=draw,
        )
        notes = placed.notes
        # the rules' warnings (capped), then what the lookups said (pull Secrets, learned architectures)
        warnings = dict.fromkeys((*notes.warning_list(), *result.warnings))
        common, arm, nodes = placed.common, placed.arm, placed.nodes
        if not placed.allowed:
            reasons = (*notes.reasons, placed.message) if placed.message else tuple(notes.reasons)
            return Decision(
                False,
                workload.obj,
                (),
                tuple(warnings),
                placed.message,
                reasons,
                common,
                None,
                nodes=nodes,
                lookups=result.lookups,
                sources=result.sources,
                policies=self.merged.names,
            )
        operations = placed.operations
        label: Label = "mutated" if operations else "allowed"
        gated: tuple[str, ...] = ()
        if inputs.stage == "admission" and settings.on_lookup_failure == "gate":
            gated = held_back(workload, namespace=inputs.namespace, lookups=result.lookups, settings=settings)
            if gated:
                operations, note, reason = gate_parts(workload, gated)
                warnings.setdefault(note, None)
                notes.reasons.append(reason)
                common, arm, nodes, label = None, None, None, "gated"
        fallback = "" if gated else placed.fallback
        if self.merged.applied or fallback:
            trail = trail_operations(workload, self.merged, fallback)
            if trail:
                operations = (*operations, *trail)
                if self.merged.applied:
                    notes.reasons.append(f"placement policies applied: {self.merged.trail}")
        if arm is not None and not gated:  # the rollout group, for noe controller to compare
            operations = (*operations, *label_operations(workload.meta, arm.label, operations))
        if fallback:  # rule 13a: the pod says it runs on its fallback architecture
            operations = (*operations, *set_label(workload.meta, FALLBACK_LABEL, "true", operations))
        return Decision(
            True,
            workload.obj,
            operations,
            tuple(warnings),
            None,
            tuple(notes.reasons),
            common,
            arm,
            nodes=nodes,
            lookups=result.lookups,
            sources=result.sources,
            gated=gated,
            policies=self.merged.names,
            label=label,
            fallback=fallback,
        )


_FLAGS_ALONE: dict[int, tuple[PolicySettings, MergedSettings]] = {}
"""The flags as settings of their own, one value per flags value (an explicit cache: a process has one or two)."""


def merged_settings(inputs: PodInputs) -> MergedSettings:
    """The flags with every placement policy that matches the pod (``docs/policies.md``)."""
    if inputs.policies is None:
        found = _FLAGS_ALONE.get(id(inputs.flags))
        if found is None or found[0] is not inputs.flags:
            if len(_FLAGS_ALONE) > 64:  # tests build many settings values: a bound, not a leak
                _FLAGS_ALONE.clear()
            found = _FLAGS_ALONE[id(inputs.flags)] = (inputs.flags, MergedSettings(inputs.flags))
        return found[1]
    return inputs.policies.settings_for(inputs.flags, namespace=inputs.namespace, pod_labels=inputs.workload.labels)


def prepare(inputs: PodInputs) -> Prepared:
    """Step 1: merge the pod's settings and say which images the rules will read.

    At admission (and for a gated pod) the rules read no image of a pod bound to a node or choosing its own
    architecture (rules 1 and 2); a running pod's images are all read, for the misplaced check.
    """
    merged = merged_settings(inputs)
    workload = inputs.workload
    if inputs.stage == "running":
        return Prepared(inputs, merged, workload.images)
    session = PlacementSession.of(workload)
    return Prepared(inputs, merged, lookup_images(workload, session), session)


def decide_pod(inputs: PodInputs, inspect: Inspect | None = None) -> Decision:
    """Both steps, with ``inspect`` answering the lookups (called once, only when there are images to read)."""
    prepared = prepare(inputs)
    if not prepared.images or inspect is None:
        return prepared.decide(None)
    return prepared.decide(inspect(prepared.request))


__all__ = [
    "FALLBACK_LABEL",
    "NO_LEARNED",
    "PodInputs",
    "Prepared",
    "Stage",
    "decide",
    "decide_pod",
    "merged_settings",
    "prepare",
]


def decide(
    obj: Mapping[str, Any],
    *,
    kind: str,
    operation: str,
    namespace: str,
    lookups: Lookups,
    settings: PolicySettings,
    dry_run: bool = False,
    sub_resource: str = "",
    policies: PolicySource | None = None,
    learned: LearnedPlatforms | None = None,
    uid: str = "",
) -> Decision:
    """Apply the placement contract to ``obj`` (a Pod or DaemonSet) without modifying it: the one-call form of
    the pipeline for tests and tools that already hold the lookups (users' own policy tests, ``noe_core.testing``).

    With ``policies`` the pod gets the flags merged with the placement policies that match it (their
    ``imagePlatforms`` answer before ``lookups``), the decision trail, the rollout draw (of ``uid``) and gate
    mode, exactly as the webhook decides; ``learned`` takes out what ``exec format error`` disproved.
    :func:`noe_core.admission.admitting.admit` is the same decision for an AdmissionReview. ``dry_run`` does
    not change the answer (rule 12). Raises :class:`InvalidObject` for an object noe acts on but cannot read.
    """
    del dry_run  # rule 12: same answer either way
    if not acts_on(kind, operation, sub_resource):
        return skipped(obj, kind, operation, sub_resource)
    inputs = PodInputs(read_workload(obj, kind), namespace, settings, policies, learned or NO_LEARNED, uid, operation)
    prepared = prepare(inputs)
    if not prepared.images:
        return prepared.decide(None)
    answers = declared_first(prepared.images, prepared.merged.declared, lookups)
    return prepared.decide(LookupResult(answers))
