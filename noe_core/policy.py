"""The placement contract (``docs/placement.md``): which nodes a pod may run on.

:func:`decide` is a pure function of the object, the image lookups and the
settings; it never edits its input and does no I/O, so the webhook, the CLI's
``noe mutate`` and users' own tests all get the same answer. The rules are
applied in the contract's order; the numbers in comments refer to them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.lookup import ImagePlatforms, LookupFailure, Lookups
from noe_core.platform import normalize_os
from noe_core.scheduling import (
    ARCH_LABEL,
    architecture_selection,
    prefer,
    require,
    requirement,
    select,
    tolerate,
    withdraw,
)
from noe_core.settings import PREFERRED_ARCH_LABEL, PolicySettings, normalize_arch_name
from noe_core.workload import (
    DAEMON_SET,
    POD,
    check_depth,
    check_workload,
    images_of,
    pod_labels,
    pod_spec,
    pod_spec_view,
)

PLACEMENT_ANNOTATION = "arch.noe.adevinta.com/placement"
"""Annotation on a DaemonSet's pod template recording what noe added, so an UPDATE is decided afresh."""

MAX_WARNING = 120
"""The API server rejects AdmissionReview warnings longer than this (in characters)."""
_IMAGE_IN_WARNING = 64
_ACTS_ON = {POD: frozenset({"CREATE"}), DAEMON_SET: frozenset({"CREATE", "UPDATE"})}


@dataclass(frozen=True)
class Decision:
    """The webhook's answer: allow (possibly with a mutated object) or deny with a message.

    ``common`` is the set of architectures required of the nodes, or ``None``
    when noe made no architecture decision (pinned pod, no images, nothing inspected).
    """

    allowed: bool
    obj: dict[str, Any]
    changed: bool
    warnings: tuple[str, ...] = ()
    message: str | None = None
    reasons: tuple[str, ...] = ()
    common: tuple[str, ...] | None = None


@dataclass
class _ImageView:
    """One image as the policy sees it after filtering (rule 4)."""

    image: str
    archs: frozenset[str] | None = None
    failure: str | None = None
    offered: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()


@dataclass
class _Outcome:
    warnings: dict[str, None] = field(default_factory=dict)  # an ordered set: a pod may list thousands of images
    reasons: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        self.warnings.setdefault(limit_warning(text), None)


def shorten(text: str, limit: int) -> str:
    """Keep both ends of a long image name (registry and tag/digest carry the meaning)."""
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    tail = limit - 3 - head
    return f"{text[:head]}...{text[-tail:]}"


def limit_warning(text: str) -> str:
    """Cut a warning to :data:`MAX_WARNING` characters, one line, so the API server accepts it."""
    flat = " ".join(text.split())
    if len(flat) <= MAX_WARNING:
        return flat
    return flat[: MAX_WARNING - 3] + "..."


def acts_on(kind: str, operation: str, sub_resource: str = "") -> bool:
    """Rule 11: Pods on CREATE; DaemonSets (their template) on CREATE and UPDATE; nothing else."""
    return not sub_resource and operation in _ACTS_ON.get(kind, frozenset())


def images_to_inspect(
    obj: Mapping[str, Any], *, kind: str, operation: str, sub_resource: str = ""
) -> list[str]:
    """The images whose platforms :func:`decide` will need; empty when it will not look at any.

    Raises :class:`InvalidObject` for a malformed object noe would act on.
    """
    if not acts_on(kind, operation, sub_resource):
        return []
    check_workload(obj, kind)
    spec = pod_spec_view(obj, kind)
    if kind == DAEMON_SET and _placement_record(obj) is not None:
        work = copy.deepcopy(dict(obj))
        _withdraw_previous(work)
        spec = pod_spec_view(work, kind)
    if spec.get("nodeName") or architecture_selection(spec):
        return []
    return images_of(obj, kind)


def _template_metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    template = (obj.get("spec") or {}).get("template") or {}
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    return metadata if isinstance(metadata, Mapping) else {}


def _placement_record(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """What noe recorded on a DaemonSet template when it placed it; ``None`` when absent or unreadable."""
    annotations = _template_metadata(obj).get("annotations")
    raw = annotations.get(PLACEMENT_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _withdraw_previous(work: dict[str, Any]) -> bool:
    """Take noe's earlier placement out of a DaemonSet (its own copy); True when there was one."""
    record = _placement_record(work)
    if record is None:
        return False
    withdraw(pod_spec(work, DAEMON_SET), record)
    metadata = work["spec"]["template"]["metadata"]
    del metadata["annotations"][PLACEMENT_ANNOTATION]
    if not metadata["annotations"]:
        del metadata["annotations"]
    if not metadata:
        del work["spec"]["template"]["metadata"]
    return True


def _record_placement(work: dict[str, Any], record: Mapping[str, Any]) -> None:
    template = work["spec"]["template"]
    metadata = template.get("metadata")
    if not isinstance(metadata, dict):
        metadata = template["metadata"] = {}
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        annotations = metadata["annotations"] = {}
    annotations[PLACEMENT_ANNOTATION] = json.dumps(record, sort_keys=True, separators=(",", ":"))


def _view(image: str, lookups: Lookups, settings: PolicySettings) -> _ImageView:
    """Rule 4: the architectures an image offers on the system OS and the schedulable list."""
    found = lookups.get(image)
    if found is None:
        return _ImageView(image, failure="not inspected")
    if isinstance(found, LookupFailure):
        return _ImageView(image, failure=found.reason or "lookup failed")
    if not isinstance(found, ImagePlatforms):
        raise TypeError(f"lookup for {image!r} is {type(found).__name__}, not a Lookup")
    entries = [p for p in found.platforms if not p.is_unknown]
    incomplete = tuple(str(p) or "(empty)" for p in entries if not p.os or not p.architecture)
    runnable = [p for p in entries if p.architecture]
    offered = tuple(sorted({str(p) for p in runnable}))
    if not runnable:
        return _ImageView(image, failure="its manifest names no platform", incomplete=incomplete)
    archs = frozenset(
        arch
        for arch, os_name in ((normalize_arch_name(p.architecture), normalize_os(p.os)) for p in runnable)
        if (not os_name or os_name == settings.system_os) and settings.is_schedulable(arch)
    )
    return _ImageView(image, archs=archs, offered=offered, incomplete=incomplete)


def image_architectures(image: str, lookups: Lookups, settings: PolicySettings) -> frozenset[str] | LookupFailure:
    """Rule 4 for one image, for callers other than :func:`decide` (``noe report``).

    The architectures the image offers on the system OS and the schedulable list,
    or a :class:`LookupFailure` saying why it cannot be inspected (the same reasons
    :func:`decide` leaves an image out for).
    """
    view = _view(image, lookups, settings)
    if view.archs is None:
        return LookupFailure(view.failure or "not inspected")
    return view.archs


def _deny_message(views: Sequence[_ImageView], settings: PolicySettings) -> str:
    """Rule 6: list every image with the architectures it offers, so the user sees the conflict."""
    scope = f"OS {settings.system_os}"
    if settings.schedulable_archs:
        scope += f", schedulable architectures {', '.join(sorted(settings.schedulable_archs))}"
    parts = []
    for view in views:
        if view.archs is None:
            parts.append(f"{view.image}: not inspected ({view.failure})")
        elif view.archs:
            parts.append(f"{view.image}: {', '.join(sorted(view.archs))}")
        else:
            parts.append(f"{view.image}: none usable (offers {', '.join(view.offered)})")
    return f"no CPU architecture is supported by every image ({scope}): " + "; ".join(parts)


def _strict_problems(views: Sequence[_ImageView]) -> list[str]:
    problems = []
    for view in views:
        if view.failure is not None:
            problems.append(f"image {view.image} could not be inspected: {view.failure}")
        elif view.incomplete:
            problems.append(
                f"image {view.image} has platform entries without os or architecture: "
                f"{', '.join(view.incomplete)}"
            )
    return problems


def _preferred(
    labels: Mapping[str, str], common: frozenset[str], settings: PolicySettings, out: _Outcome
) -> str:
    """Rule 7: the pod's label when it can be honoured, else the configured preference."""
    wanted = labels.get(PREFERRED_ARCH_LABEL, "").strip()
    if wanted:
        arch = normalize_arch_name(wanted)
        if not settings.is_schedulable(arch):
            out.reasons.append(f"label {PREFERRED_ARCH_LABEL}={wanted} is not a schedulable architecture")
        elif arch not in common:
            out.reasons.append(f"label {PREFERRED_ARCH_LABEL}={wanted} is not supported by every image")
        else:
            out.reasons.append(f"preferred architecture {arch} comes from label {PREFERRED_ARCH_LABEL}")
            return arch
        out.warn(f"could not select preferred arch: {shorten(wanted, 60)}")
    return settings.preferred_arch


def _place(
    spec: dict[str, Any],
    labels: Mapping[str, str],
    common: frozenset[str],
    settings: PolicySettings,
    out: _Outcome,
) -> dict[str, Any]:
    """Rules 8 and 10: require ``common``, apply the preference, tolerate the allowed arch taints.

    Returns what was added (the DaemonSet placement record).
    """
    added: dict[str, Any] = {}
    ordered = sorted(common)
    if require(spec, requirement(ARCH_LABEL, "In", ordered)):
        added["required"] = ordered
    out.reasons.append(f"required {ARCH_LABEL} in {', '.join(ordered)} (supported by every image)")
    allowed = common
    preferred = _preferred(labels, common, settings, out)
    if preferred and preferred in common:
        if settings.preference_mode == "required":
            if select(spec, ARCH_LABEL, preferred):
                added["nodeSelector"] = preferred
            allowed = frozenset({preferred})
            out.reasons.append(f"nodeSelector {ARCH_LABEL}={preferred} (preference mode required)")
        elif len(common) > 1:
            weight = settings.preferred_arch_weight
            if prefer(spec, requirement(ARCH_LABEL, "In", [preferred]), weight):
                added["preferred"] = preferred
            out.reasons.append(f"preferred {ARCH_LABEL}={preferred} with weight {weight}")
        else:
            out.reasons.append(f"{preferred} is the only common architecture: no preference needed")
    elif preferred:
        out.reasons.append(f"preferred architecture {preferred} is not supported by every image")
    for arch_toleration in settings.arch_tolerations:
        toleration = arch_toleration.to_toleration()
        if arch_toleration.arch in allowed and tolerate(spec, toleration):
            added.setdefault("tolerations", []).append(toleration)
            out.reasons.append(f"tolerate the {arch_toleration.arch} taint ({arch_toleration})")
    return added


def _match_node_labels(
    spec: dict[str, Any], labels: Mapping[str, str], settings: PolicySettings, out: _Outcome
) -> None:
    """Rule 9: the node must carry the same value for each configured label the pod has."""
    for key in settings.match_node_labels:
        if key not in labels:
            continue
        value = labels[key]
        selector = spec.get("nodeSelector") or {}
        if selector.get(key) == value:
            continue
        if key in selector:
            out.warn(f"nodeSelector {key}={selector[key]} conflicts with pod label {key}={value}")
        if require(spec, requirement(key, "In", [value])):
            out.reasons.append(f"required node label {key}={value} (match-node-labels)")


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
) -> Decision:
    """Apply the placement contract to ``obj`` (a Pod or DaemonSet) without modifying it.

    ``dry_run`` does not change the answer (rule 12); it is accepted so callers can
    pass the request through unchanged. Raises :class:`InvalidObject` for an
    object noe acts on but cannot read.
    """
    del dry_run  # rule 12: same answer either way
    if not isinstance(obj, Mapping):
        raise InvalidObject(f"the {kind} must be an object, not {type(obj).__name__}")
    check_depth(obj)  # before any deep copy, whatever the kind
    work: dict[str, Any] = copy.deepcopy(dict(obj))
    if not acts_on(kind, operation, sub_resource):
        what = f"{kind}/{sub_resource}" if sub_resource else kind
        return Decision(True, work, False, reasons=(f"{what} {operation}: not a request noe acts on",))
    check_workload(work, kind)
    withdrawn = kind == DAEMON_SET and _withdraw_previous(work)
    holder: dict[str, Any] = work if kind == POD else work["spec"]["template"]
    spec_absent = "spec" not in holder
    spec_was_null = "spec" in holder and holder["spec"] is None
    spec = pod_spec(work, kind)
    if spec.get("nodeName"):
        return Decision(True, work, False, reasons=(f"spec.nodeName is {spec['nodeName']}: left untouched",))
    labels = pod_labels(work, kind)
    out = _Outcome()
    if withdrawn:
        out.reasons.append("noe's earlier placement of this template withdrawn: deciding afresh")
    common: tuple[str, ...] | None = None
    selection = architecture_selection(spec)
    images = images_of(work, kind)
    if selection:
        out.reasons.append(f"{selection}: architecture left as chosen")
    elif not images:
        out.reasons.append("no container image: architecture left open")
    else:
        views = [_view(image, lookups, settings) for image in images]
        if namespace in settings.strict_namespaces:
            problems = _strict_problems(views)
            if problems:
                message = f"namespace {namespace} is strict: " + "; ".join(problems)
                return Decision(False, copy.deepcopy(dict(obj)), False, message=message, reasons=(message,))
        for view in views:
            if view.failure is not None:
                out.warn(f"cannot inspect {shorten(view.image, _IMAGE_IN_WARNING)}: {view.failure}")
                out.reasons.append(f"image {view.image} left out: {view.failure}")
            else:
                archs = ", ".join(sorted(view.archs or ())) or "none"
                out.reasons.append(f"image {view.image}: {archs} (offers {', '.join(view.offered)})")
        inspected = [view for view in views if view.archs is not None]
        if not inspected and withdrawn:
            # A registry outage must not strip a DaemonSet of the placement it already had.
            work = copy.deepcopy(dict(obj))
            holder = work["spec"]["template"]
            spec = pod_spec(work, kind)
            out.reasons.append("no image could be inspected: noe's earlier placement kept")
        elif not inspected:
            out.reasons.append("no image could be inspected: architecture left open")
        else:
            shared = frozenset.intersection(*(view.archs for view in inspected if view.archs is not None))
            if not shared:
                message = _deny_message(views, settings)
                return Decision(
                    False,
                    copy.deepcopy(dict(obj)),
                    False,
                    warnings=tuple(out.warnings),
                    message=message,
                    reasons=(*out.reasons, message),
                    common=(),
                )
            added = _place(spec, labels, shared, settings, out)
            if kind == DAEMON_SET and added:
                _record_placement(work, added)
            common = tuple(sorted(shared))
    _match_node_labels(spec, labels, settings, out)
    if not spec and (spec_absent or spec_was_null):
        # pod_spec created it for writing; nothing was written, so give back what was sent
        if spec_absent:
            del holder["spec"]
        else:
            holder["spec"] = None
    changed = work != obj
    if not changed:
        out.reasons.append("nothing to change")
    return Decision(True, work, changed, tuple(out.warnings), None, tuple(out.reasons), common)
