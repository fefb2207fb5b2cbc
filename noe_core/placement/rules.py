"""The placement contract (``docs/placement.md``): which nodes a pod may run on.

:func:`place` is a pure function of a :class:`~noe_core.k8s.workload.Workload`
(the object read once), the image lookups and the settings. It records each
edit it makes as an RFC 6902 operation (:class:`~noe_core.util.json_patch.Edits`), so
the webhook's patch is what the policy did, not a diff found afterwards; it
never edits its input and does no I/O. The webhook, ``noe mutate`` and users'
own tests reach it through :func:`noe_core.admission.admitting.admit` or
:func:`decide`, and so get the same answer. The rules are applied in the
contract's order; the numbers in comments refer to them.

The edits are made through one :class:`~noe_core.placement.session.PlacementSession`
per admission, and warnings and deny messages are shaped by
:mod:`noe_core.placement.messages` (whose limits and ``limit_warning`` are re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import Lookup, LookupFailure, Lookups
from noe_core.image.node_platform import ARCH_LABEL, BETA_OS_LABEL, OS_LABEL
from noe_core.image.offer import Offer, PlatformScope
from noe_core.image.platform import normalize_arch_name
from noe_core.k8s.workload import DAEMON_SET, PLACEMENT_ANNOTATION, POD, Workload, check_nesting, read_workload
from noe_core.placement.image_reading import (
    Artifact,
    Reading,
    deny_message,
    note_images,
    read_image,
    read_images,
    strict_problems,
    warn_levels,
)
from noe_core.placement.messages import MAX_WARNING, Notes, joined, limit_warning
from noe_core.placement.needs import node_terms, shared
from noe_core.placement.scheduling import prefer, require, require_any, requirement, select, tolerate
from noe_core.placement.session import PlacementSession
from noe_core.policies.rollout import RolloutArm, RolloutDraw
from noe_core.policies.settings import PREFERRED_ARCH_LABEL, PolicySettings, WeightedArchitecture
from noe_core.util.fields import json_type
from noe_core.util.json_patch import Edits, Operation, apply_patch
from noe_core.util.printable import shorten

__all__ = [
    "MAX_WARNING",
    "PLACEMENT_ANNOTATION",
    "Decision",
    "acts_on",
    "images_to_inspect",
    "limit_warning",
    "lookup_images",
    "place",
    "skipped",
]

_ACTS_ON = {POD: frozenset({"CREATE"}), DAEMON_SET: frozenset({"CREATE", "UPDATE"})}


Label = Literal["mutated", "allowed", "denied", "skipped", "gated"]
"""How an admission is counted (the metrics' ``decision`` label)."""


@dataclass(frozen=True)
class Decision:
    """The answer for one pod: allow (possibly with a patch) or deny with a message, and what it rests on.

    ``patch`` holds the RFC 6902 operations noe makes, relative to ``original``
    (the object as sent); ``obj`` is the result of applying them, computed only
    when asked for. ``common`` is the set of architectures every image offers, or
    ``None`` when noe made no architecture decision (pinned pod, no images,
    nothing inspected). ``nodes`` is the set of nodes the decision allows (OS,
    architecture, Windows build, x86-64 level), after the schedulable list, a
    rollout group and a pinned preference (``None``: noe requires nothing).
    ``rollout`` is the rollout group the pod was placed in (``None``: no
    rollout affected it). ``lookups`` holds each image's answer as the decision
    read it (declared, registry or cache, with learned architectures taken
    out), ``sources`` where each came from (``declared``, ``cache``,
    ``registry``, ``learned``); ``gated`` the images gate mode waits for;
    ``policies`` the placement policies applied, in order.
    """

    allowed: bool
    original: Mapping[str, Any] = field(repr=False)
    patch: tuple[Operation, ...] = ()
    warnings: tuple[str, ...] = ()
    message: str | None = None
    reasons: tuple[str, ...] = ()
    common: tuple[str, ...] | None = None
    rollout: RolloutArm | None = None
    nodes: Offer | None = field(default=None, compare=False)
    lookups: Lookups = field(default_factory=dict, compare=False, repr=False)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    gated: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    label: Label | None = None
    fallback: str = ""
    """Rule 13a: the architecture the pod was required onto because an image could not be inspected."""
    """How the admission is counted: ``denied``, ``gated``, ``skipped``, ``mutated`` (the rules changed the
    pod: the policies' annotation alone is no placement) or ``allowed``; given when built, else derived."""

    def __post_init__(self) -> None:
        if self.label is None:
            derived = "denied" if not self.allowed else "mutated" if self.patch else "allowed"
            object.__setattr__(self, "label", derived)

    @property
    def changed(self) -> bool:
        return bool(self.patch)

    @cached_property
    def obj(self) -> dict[str, Any]:
        """The object with the patch applied (a new copy: the original is never touched)."""
        return apply_patch(self.original, self.patch)


def acts_on(kind: str, operation: str, sub_resource: str = "") -> bool:
    """Rule 11: Pods on CREATE; DaemonSets (their template) on CREATE and UPDATE; nothing else."""
    return not sub_resource and operation in _ACTS_ON.get(kind, frozenset())


def skipped(obj: Mapping[str, Any], kind: str, operation: str, sub_resource: str = "") -> Decision:
    """The answer to a request noe does not act on (rule 11): allowed, untouched.

    Raises :class:`InvalidObject` when ``obj`` is not an object or nests too deep to be answered safely.
    """
    if not isinstance(obj, Mapping):
        raise InvalidObject(f"the {kind} must be an object, not {json_type(obj)}")
    check_nesting(obj)
    what = f"{kind}/{sub_resource}" if sub_resource else kind
    return Decision(True, obj, reasons=(f"{what} {operation}: not a request noe acts on",), label="skipped")


def lookup_images(workload: Workload, session: PlacementSession | None = None) -> tuple[str, ...]:
    """The images whose platforms :func:`place` will need; empty when it will not look at any.

    ``session`` is the admission's own (:func:`noe_core.admission.admitting.admit` builds one and hands
    it to :func:`place` as well), so the pod's architecture selection is read once.
    """
    if workload.node_name:
        return ()
    if (session or PlacementSession.of(workload)).selection:
        return ()
    return workload.images


def images_to_inspect(obj: Mapping[str, Any], *, kind: str, operation: str, sub_resource: str = "") -> list[str]:
    """The images whose platforms :func:`decide` will need; empty when it will not look at any.

    Raises :class:`InvalidObject` for a malformed object noe would act on.
    """
    if not acts_on(kind, operation, sub_resource):
        return []
    return list(lookup_images(read_workload(obj, kind)))


def architectures(found: Lookup | None, settings: PolicySettings) -> frozenset[str] | LookupFailure:
    """Rule 4: the architectures an image offers on the system OSes and the schedulable list.

    Reads the offer the :class:`ImagePlatforms` computed once for these settings
    (:mod:`noe_core.placement.image_reading`); an image without a lookup, whose lookup
    failed, that is an artifact, or whose manifest names no usable platform
    gives the :class:`LookupFailure` saying why.
    """
    reading = read_image(found, settings.scope)
    if isinstance(reading, Artifact):
        return LookupFailure(f"it is an artifact ({reading.artifact_type}), not a container image")
    if isinstance(reading, LookupFailure):
        return reading
    return frozenset(reading.architectures)


def image_architectures(image: str, lookups: Lookups, settings: PolicySettings) -> frozenset[str] | LookupFailure:
    """Rule 4 for one image of ``lookups``, for callers other than :func:`decide` (``noe report``).

    The same answer :func:`decide` reads: the architectures, or why the image is left out.
    """
    return architectures(lookups.get(image), settings)


def pod_scope(workload: Workload, settings: PolicySettings) -> PlatformScope:
    """The nodes this pod can have: the cluster's, narrowed to the OS its nodeSelector pins when the
    cluster has several (a Windows pod's ``kubernetes.io/os: windows``), so its terms name no other."""
    scope = settings.scope
    if not scope.multi_os:
        return scope
    pinned = workload.node_selector.get(OS_LABEL) or workload.node_selector.get(BETA_OS_LABEL)
    if pinned in scope.oses:
        return PlatformScope((pinned,), scope.architectures, scope.levels)
    return scope


def _require_platforms(
    edits: Edits, common: Offer, scope: PlatformScope, out: Notes, *, why: str = "supported by every image"
) -> dict[str, Any]:
    """Rules 8 and 14-16: require the nodes every image can run on (or a rollout group's part of them),
    ANDed into every existing term.

    Returns what was added (the DaemonSet placement record): ``required`` (the
    architectures) when that is one ``kubernetes.io/arch`` expression, as it always
    was, else ``terms``.
    """
    added: dict[str, Any] = {}
    if not scope.multi_os and common.plain:
        # The common case (one OS, no Windows build, no level): one term of architectures, as ever.
        archs = list(common.architectures)
        if require(edits, requirement(ARCH_LABEL, "In", archs)):
            added["required"] = archs
        out.reasons.append(f"required {ARCH_LABEL} in {', '.join(archs)} ({why})")
        return added
    terms = [term.expressions(scope) for term in node_terms(common)]
    if require_any(edits, terms):
        added["terms"] = terms
    shown = " or ".join("(" + ", ".join(f"{e['key']} in {','.join(e['values'])}" for e in term) + ")" for term in terms)
    out.reasons.append(f"required {shown} ({why})")
    return added


def _preferences(
    labels: Mapping[str, str], common: frozenset[str], settings: PolicySettings, out: Notes
) -> tuple[WeightedArchitecture, ...]:
    """Rule 7: the pod's label when it can be honoured, else the configured preferences.

    The label replaces the whole preference by its one architecture at the highest weight
    (:func:`_highest_weight`); when it cannot be honoured it is warned about and the configured
    preferences (the flag's one, or the placement policies' list) apply.
    """
    wanted = labels.get(PREFERRED_ARCH_LABEL, "").strip()
    if wanted:
        arch = normalize_arch_name(wanted)
        if not settings.is_schedulable(arch):
            out.reasons.append(f"label {PREFERRED_ARCH_LABEL}={wanted} is not a schedulable architecture")
        elif arch not in common:
            out.reasons.append(f"label {PREFERRED_ARCH_LABEL}={wanted} is not supported by every image")
        else:
            out.reasons.append(f"preferred architecture {arch} comes from label {PREFERRED_ARCH_LABEL}")
            return (WeightedArchitecture(arch, _highest_weight(settings)),)
        out.warn(f"could not select preferred arch: {shorten(wanted, 60)}")
    return settings.preferred


def _highest_weight(settings: PolicySettings) -> int:
    """The weight the pod's label gets: the highest configured one, else ``--preferred-arch-weight``."""
    return max((p.weight for p in settings.preferred), default=settings.preferred_arch_weight)


def _pinned(usable: tuple[WeightedArchitecture, ...]) -> str:
    """Preference mode ``required``: the highest-weight preferred architecture (ties: list order)."""
    return max(usable, key=lambda p: p.weight).architecture


def _prefer_each(edits: Edits, usable: tuple[WeightedArchitecture, ...], added: dict[str, Any], out: Notes) -> None:
    """Preference mode ``soft``: one preferred term per architecture, with its weight, in list order."""
    recorded: list[str] = []
    for preference in usable:
        arch, weight = preference.architecture, preference.weight
        if prefer(edits, requirement(ARCH_LABEL, "In", [arch]), weight):
            recorded.append(arch)
        out.reasons.append(f"preferred {ARCH_LABEL}={arch} with weight {weight}")
    if recorded:
        # one architecture is recorded as a name, as before several could be preferred
        added["preferred"] = recorded[0] if len(recorded) == 1 else recorded


def _place(
    edits: Edits,
    labels: Mapping[str, str],
    common: frozenset[str],
    settings: PolicySettings,
    out: Notes,
) -> dict[str, Any]:
    """Rules 8 and 10: apply the preferences among ``common``, tolerate the allowed arch taints
    (the requirement itself is :func:`_require_platforms`'s).

    With a rollout group, ``common`` is already that group's architectures. Returns what was added
    (the DaemonSet placement record).
    """
    added: dict[str, Any] = {}
    allowed = common
    preferences = _preferences(labels, common, settings, out)
    usable = tuple(p for p in preferences if p.architecture in common)
    if usable and settings.preference_mode == "required":
        pinned = _pinned(usable)
        if select(edits, ARCH_LABEL, pinned):
            added["nodeSelector"] = pinned
        allowed = frozenset({pinned})
        out.reasons.append(f"nodeSelector {ARCH_LABEL}={pinned} (preference mode required)")
    elif usable and len(common) > 1:
        _prefer_each(edits, usable, added, out)
    elif usable:
        out.reasons.append(f"{usable[0].architecture} is the only common architecture: no preference needed")
    for preference in preferences:
        if preference.architecture not in common:
            out.reasons.append(f"preferred architecture {preference.architecture} is not supported by every image")
    _tolerate(edits, allowed, settings, out, added)
    return added


def _tolerate(
    edits: Edits, allowed: frozenset[str], settings: PolicySettings, out: Notes, added: dict[str, Any]
) -> None:
    """Rule 10: tolerate the taints of the architectures the pod is now allowed on."""
    for arch_toleration in settings.arch_tolerations:
        toleration = arch_toleration.to_toleration()
        if arch_toleration.arch in allowed and tolerate(edits, toleration):
            added.setdefault("tolerations", []).append(toleration)
            out.reasons.append(f"tolerate the {arch_toleration.arch} taint ({arch_toleration})")


def _fallback_arch(workload: Workload, readings: Mapping[str, Reading], settings: PolicySettings) -> str:
    """Rule 13a's architecture when it may apply: a Pod with ``--fallback-arch`` (or a policy's) and an image
    left out because it could not be inspected; ``""`` otherwise.

    DaemonSet templates are never fallen back: one architecture for a whole DaemonSet would take its pods off
    every other node, where it may well run.
    """
    if not settings.fallback_arch or workload.kind != POD:
        return ""
    if any(isinstance(reading, LookupFailure) for reading in readings.values()):
        return settings.fallback_arch
    return ""


def _fall_back(
    edits: Edits,
    arch: str,
    offer: Offer,
    *,
    readings: Mapping[str, Reading],
    settings: PolicySettings,
    scope: PlatformScope,
    out: Notes,
) -> None:
    """Rule 13a: require the fallback architecture (with what the inspected images need of its nodes), tolerate
    its taint; preferences add nothing."""
    failed = [image for image, reading in readings.items() if isinstance(reading, LookupFailure)]
    why = f"fallback architecture: {', '.join(failed)} could not be inspected"
    _require_platforms(edits, offer, scope, out, why=why)
    _tolerate(edits, frozenset({arch}), settings, out, {})


def _match_node_labels(edits: Edits, labels: Mapping[str, str], settings: PolicySettings, out: Notes) -> None:
    """Rule 9: the node must carry the same value for each configured label the pod has."""
    for key in settings.match_node_labels:
        if key not in labels:
            continue
        value = labels[key]
        selector = edits.get(("nodeSelector",)) or {}
        if selector.get(key) == value:
            continue
        if key in selector:
            out.warn(f"nodeSelector {key}={selector[key]} conflicts with pod label {key}={value}")
        if require(edits, requirement(key, "In", [value])):
            out.reasons.append(f"required node label {key}={value} (match-node-labels)")


@dataclass
class Placement:
    """What rules 1-10 (and 14-18) decided for one workload, before the pipeline adds the gate, the trail and the
    rollout label and builds the one :class:`Decision` (:mod:`noe_core.pipeline`)."""

    allowed: bool
    operations: tuple[Operation, ...] = ()
    notes: Notes = field(default_factory=Notes)
    message: str | None = None
    common: tuple[str, ...] | None = None
    arm: RolloutArm | None = None
    nodes: Offer | None = None
    """The nodes the placement allows: the images' shared offer, narrowed to a rollout group or a pinned
    preference (``None``: noe requires nothing of the node's platform)."""
    fallback: str = ""
    """Rule 13a's architecture, when an image could not be inspected and the pod was required onto it."""

    def decision(self, original: Mapping[str, Any]) -> Decision:
        """This placement as the answer, when nothing is added to it."""
        notes = self.notes
        if not self.allowed:
            reasons = (*notes.reasons, self.message) if self.message else tuple(notes.reasons)
            return Decision(
                False, original, (), notes.warning_list(), self.message, reasons, self.common, None, nodes=self.nodes
            )
        return Decision(
            True,
            original,
            self.operations,
            notes.warning_list(),
            None,
            tuple(notes.reasons),
            self.common,
            self.arm,
            nodes=self.nodes,
        )


def place(
    workload: Workload,
    *,
    namespace: str,
    lookups: Lookups,
    settings: PolicySettings,
    session: PlacementSession | None = None,
    rollout: RolloutDraw | None = None,
) -> Decision:
    """Apply the placement contract to a Pod or DaemonSet template that noe acts on (rules 1-10).

    The rules alone; :func:`noe_core.placement.pipeline.decide` adds what placement policies, learned platforms and gate
    mode add, and is what every path of noe calls.
    """
    placed = apply_rules(
        workload, namespace=namespace, lookups=lookups, settings=settings, session=session, rollout=rollout
    )
    return placed.decision(workload.obj)


def apply_rules(
    workload: Workload,
    *,
    namespace: str,
    lookups: Lookups,
    settings: PolicySettings,
    session: PlacementSession | None = None,
    rollout: RolloutDraw | None = None,
) -> Placement:
    """Rules 1-10 with 14-17 for a Pod or DaemonSet template that noe acts on.

    ``session`` is the edit session :func:`lookup_images` was given, if any (it is used up here).
    ``rollout`` is the placement policies' rollout a Pod CREATE is subject to (``docs/policies.md``):
    when ``common`` holds its architecture and another, the group it draws replaces ``common`` in the
    requirement, and the preferences apply within it.
    """
    out = Notes()
    if workload.node_name:
        out.reasons.append(f"spec.nodeName is {workload.node_name}: left untouched")
        return Placement(True, notes=out)
    placement = session or PlacementSession.of(workload)
    if placement.withdrawn:
        out.reasons.append("noe's earlier placement of this template withdrawn: deciding afresh")
    common: tuple[str, ...] | None = None
    arm: RolloutArm | None = None
    nodes: Offer | None = None
    fallback = ""
    selection = placement.selection
    images = workload.images
    if selection:
        out.reasons.append(f"{selection}: architecture left as chosen")
    elif not images:
        out.reasons.append("no container image: architecture left open")
    else:
        scope = pod_scope(workload, settings)
        readings = read_images(images, lookups, scope, workload.volume_images)
        if namespace in settings.strict_namespaces:
            problems = strict_problems(readings, lookups)
            if problems:
                message = joined(f"namespace {namespace} is strict: ", problems, "problems")
                return Placement(False, notes=Notes(), message=message)
        inspected, leveled = note_images(readings, lookups, scope, out)
        if not inspected and placement.withdrawn:
            # A registry outage must not strip a DaemonSet of the placement it already had.
            placement = PlacementSession.of(workload, withdraw_previous=False)
            out.reasons.append("no image could be inspected: noe's earlier placement kept")
        elif not inspected:
            arch = _fallback_arch(workload, readings, settings)
            if arch and (not scope.architectures or arch in scope.architectures):
                nodes = Offer.anywhere(frozenset((os_name, arch) for os_name in scope.oses))
                _fall_back(
                    placement.spec_edits, arch, nodes, readings=readings, settings=settings, scope=scope, out=out
                )
                fallback = arch
            else:
                out.reasons.append("no image could be inspected: architecture left open")
        else:
            both = shared(inspected)
            if not both:
                message = deny_message(readings, lookups, scope)
                return Placement(False, notes=out, message=message, common=())
            if leveled and not scope.levels:
                warn_levels(leveled, lookups, both, out)
            common = both.architectures
            arch = _fallback_arch(workload, readings, settings)
            if arch and arch in common:  # rule 13a; the schedulable list already narrowed `common`
                nodes = both.only(frozenset({arch}))
                _fall_back(
                    placement.spec_edits, arch, nodes, readings=readings, settings=settings, scope=scope, out=out
                )
                fallback = arch
                rollout = None
            arm = rollout.arm(frozenset(common)) if rollout is not None and workload.kind == POD else None
            if not fallback:
                why = "supported by every image"
                if arm is not None and rollout is not None:
                    out.reasons.append(rollout.reason(arm))
                    both, why = both.only(arm.allowed), f"rollout group {arm.label}"
                added = _require_platforms(placement.spec_edits, both, scope, out, why=why)
                pinned = _place(placement.spec_edits, workload.labels, frozenset(both.architectures), settings, out)
                added.update(pinned)
                nodes = both.only(frozenset({pinned["nodeSelector"]})) if "nodeSelector" in pinned else both
                if workload.kind == DAEMON_SET and added:
                    placement.record(added)
    _match_node_labels(placement.spec_edits, workload.labels, settings, out)
    patch = placement.operations()
    if not patch:
        out.reasons.append("nothing to change")
    return Placement(True, patch, out, None, common, arm, nodes, fallback)
