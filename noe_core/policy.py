"""The placement contract (``docs/placement.md``): which nodes a pod may run on.

:func:`place` is a pure function of a :class:`~noe_core.workload.Workload`
(the object read once), the image lookups and the settings. It records each
edit it makes as an RFC 6902 operation (:class:`~noe_core.patch.Edits`), so
the webhook's patch is what the policy did, not a diff found afterwards; it
never edits its input and does no I/O. The webhook, ``noe mutate`` and users'
own tests reach it through :func:`noe_core.admission.admit` or
:func:`decide`, and so get the same answer. The rules are applied in the
contract's order; the numbers in comments refer to them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.fields import json_type
from noe_core.lookup import ImagePlatforms, LookupFailure, Lookups
from noe_core.patch import Edits, Operation, apply_patch, copy_json, pointer
from noe_core.printable import printable
from noe_core.scheduling import (
    ARCH_LABEL,
    PLACEMENT_FIELDS,
    architecture_selection,
    prefer,
    require,
    requirement,
    select,
    tolerate,
    withdraw,
)
from noe_core.settings import PREFERRED_ARCH_LABEL, PolicySettings, normalize_arch_name
from noe_core.workload import DAEMON_SET, PLACEMENT_ANNOTATION, POD, Workload, check_depth, read_workload

__all__ = [
    "MAX_WARNING",
    "PLACEMENT_ANNOTATION",
    "Decision",
    "acts_on",
    "decide",
    "images_to_inspect",
    "limit_warning",
    "lookup_images",
    "place",
    "skipped",
]

MAX_WARNING = 120
"""The API server rejects AdmissionReview warnings longer than this (in characters)."""
MAX_WARNINGS = 30
"""Warnings in one answer; the last says how many more were left out. The API server and kubectl
show only a few KiB of warnings, and a pod naming 40,000 failing images must not cost 40,000 lines."""
MAX_MESSAGE = 2048
"""Characters of a deny message; images past it are counted, not listed."""
_IMAGE_IN_WARNING = 64
_ACTS_ON = {POD: frozenset({"CREATE"}), DAEMON_SET: frozenset({"CREATE", "UPDATE"})}


@dataclass(frozen=True)
class Decision:
    """The webhook's answer: allow (possibly with a patch) or deny with a message.

    ``patch`` holds the RFC 6902 operations noe makes, relative to ``original``
    (the object as sent); ``obj`` is the result of applying them, computed only
    when asked for. ``common`` is the set of architectures required of the
    nodes, or ``None`` when noe made no architecture decision (pinned pod, no
    images, nothing inspected).
    """

    allowed: bool
    original: Mapping[str, Any] = field(repr=False)
    patch: tuple[Operation, ...] = ()
    warnings: tuple[str, ...] = ()
    message: str | None = None
    reasons: tuple[str, ...] = ()
    common: tuple[str, ...] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.patch)

    @cached_property
    def obj(self) -> dict[str, Any]:
        """The object with the patch applied (a new copy: the original is never touched)."""
        return apply_patch(self.original, self.patch)


@dataclass
class _ImageView:
    """One image as the policy sees it after filtering (rule 4)."""

    image: str
    archs: frozenset[str] | None = None
    failure: str | None = None
    offered: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()


@dataclass
class _Outcome:
    warnings: dict[str, None] = field(default_factory=dict)  # an ordered set: a pod may list thousands of images
    reasons: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        self.warnings.setdefault(limit_warning(text), None)

    def warning_list(self) -> tuple[str, ...]:
        return cap_warnings(tuple(self.warnings))


def shorten(text: str, limit: int) -> str:
    """Keep both ends of a long image name (registry and tag/digest carry the meaning)."""
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    tail = limit - 3 - head
    return f"{text[:head]}...{text[-tail:]}"


def limit_warning(text: str) -> str:
    """One printable line of at most :data:`MAX_WARNING` characters, so the API server accepts it."""
    flat = printable(" ".join(text.split()))
    if len(flat) <= MAX_WARNING:
        return flat
    return flat[: MAX_WARNING - 3] + "..."


def cap_warnings(warnings: Sequence[str]) -> tuple[str, ...]:
    """At most :data:`MAX_WARNINGS`, the last of them counting those left out."""
    if len(warnings) <= MAX_WARNINGS:
        return tuple(warnings)
    kept = MAX_WARNINGS - 1
    return (*warnings[:kept], f"... and {len(warnings) - kept} more warnings (noe's log has every image)")


def _joined(head: str, parts: Sequence[str], what: str) -> str:
    """``head`` and as many ``parts`` as fit in :data:`MAX_MESSAGE`, the rest counted; printable."""
    text = head
    for index, part in enumerate(parts):
        separator = "; " if index else ""
        rest = len(parts) - index
        if len(text) + len(separator) + len(part) > MAX_MESSAGE - 40 and rest > 1:
            return printable(f"{text}; and {rest} more {what}")
        text += separator + part
    return printable(text)


def acts_on(kind: str, operation: str, sub_resource: str = "") -> bool:
    """Rule 11: Pods on CREATE; DaemonSets (their template) on CREATE and UPDATE; nothing else."""
    return not sub_resource and operation in _ACTS_ON.get(kind, frozenset())


def skipped(obj: Mapping[str, Any], kind: str, operation: str, sub_resource: str = "") -> Decision:
    """The answer to a request noe does not act on (rule 11): allowed, untouched."""
    what = f"{kind}/{sub_resource}" if sub_resource else kind
    return Decision(True, obj, reasons=(f"{what} {operation}: not a request noe acts on",))


def lookup_images(workload: Workload) -> tuple[str, ...]:
    """The images whose platforms :func:`place` will need; empty when it will not look at any."""
    if workload.node_name or architecture_selection(_Placement.of(workload).spec):
        return ()
    return workload.images


def images_to_inspect(obj: Mapping[str, Any], *, kind: str, operation: str, sub_resource: str = "") -> list[str]:
    """The images whose platforms :func:`decide` will need; empty when it will not look at any.

    Raises :class:`InvalidObject` for a malformed object noe would act on.
    """
    if not acts_on(kind, operation, sub_resource):
        return []
    return list(lookup_images(read_workload(obj, kind)))


@dataclass
class _Placement:
    """The working values of the fields noe edits, and the edits recorded on them.

    Only the placement fields of the pod spec (and, on a DaemonSet, the template
    annotations) are copied: the rest of the object is never copied or compared.
    On a DaemonSet UPDATE, noe's earlier placement (its record) is withdrawn from
    these values first.
    """

    workload: Workload
    spec_edits: Edits
    meta_edits: Edits
    withdrawn: bool

    @classmethod
    def of(cls, workload: Workload, *, withdraw_previous: bool = True) -> _Placement:
        spec = {key: copy_json(workload.spec[key]) for key in PLACEMENT_FIELDS if key in workload.spec}
        record = workload.placement_record if withdraw_previous else None
        if record is not None:
            withdraw(spec, record)
        template = workload.obj if workload.kind == POD else workload.obj["spec"]["template"]
        raw_meta = template.get("metadata")
        meta: dict[str, Any] = {}
        if isinstance(raw_meta, Mapping) and "annotations" in raw_meta:
            meta["annotations"] = copy_json(raw_meta["annotations"])
        meta_state: bool | None = "metadata" in template and (None if raw_meta is None else True)
        if record is not None:
            annotations = meta["annotations"]
            del annotations[PLACEMENT_ANNOTATION]
        return cls(
            workload,
            Edits(spec, workload.spec_pointer, present=workload.spec_state),
            Edits(meta, workload.template_pointer + "/metadata", present=meta_state),
            withdrawn=record is not None,
        )

    @property
    def spec(self) -> dict[str, Any]:
        return self.spec_edits.doc

    def record(self, added: Mapping[str, Any]) -> None:
        """Leave on a DaemonSet template what noe added, so an UPDATE can withdraw it."""
        value = json.dumps(added, sort_keys=True, separators=(",", ":"))
        self.meta_edits.set(("annotations", PLACEMENT_ANNOTATION), value)

    def operations(self) -> tuple[Operation, ...]:
        """The operations turning the object as sent into the placed one."""
        if not self.withdrawn:
            return (*self.spec_edits.operations(), *self.meta_edits.operations())
        # The earlier placement was taken out before deciding again: state each
        # field's new value where it differs from what was sent.
        ops = _field_operations(self.workload.spec, self.spec, self.workload.spec_pointer, PLACEMENT_FIELDS)
        template = self.workload.obj["spec"]["template"]
        metadata = template.get("metadata") or {}
        annotations = dict(self.meta_edits.doc.get("annotations") or {})
        meta_pointer = "/spec/template/metadata"
        if annotations:
            ops += _field_operations(
                metadata.get("annotations") or {}, annotations, f"{meta_pointer}/annotations", (PLACEMENT_ANNOTATION,)
            )
        elif len(metadata) == 1:
            ops.append({"op": "remove", "path": meta_pointer})
        else:
            ops.append({"op": "remove", "path": f"{meta_pointer}/annotations"})
        return tuple(ops)


def _field_operations(
    before: Mapping[str, Any], after: Mapping[str, Any], base: str, keys: Sequence[str]
) -> list[Operation]:
    """One ``add``, ``replace`` or ``remove`` per key whose value differs between ``before`` and ``after``."""
    ops: list[Operation] = []
    for key in keys:
        path = pointer(base, (key,))
        if key not in after:
            if key in before:
                ops.append({"op": "remove", "path": path})
        elif key not in before:
            ops.append({"op": "add", "path": path, "value": after[key]})
        elif before[key] != after[key]:
            ops.append({"op": "replace", "path": path, "value": after[key]})
    return ops


def _view(image: str, lookups: Lookups, settings: PolicySettings) -> _ImageView:
    """Rule 4: the architectures an image offers on the system OS and the schedulable list."""
    found = lookups.get(image)
    if found is None:
        return _ImageView(image, failure="not inspected")
    if isinstance(found, LookupFailure):
        return _ImageView(image, failure=found.reason or "lookup failed")
    if not isinstance(found, ImagePlatforms):
        raise TypeError(f"lookup for {image!r} is {type(found).__name__}, not a Lookup")
    entries = found.entries
    if not entries.arch_os:
        failure = (
            f"its manifest names no usable platform (not label values: {', '.join(entries.unusable)})"
            if entries.unusable
            else "its manifest names no platform"
        )
        return _ImageView(image, failure=failure, incomplete=entries.incomplete, unusable=entries.unusable)
    archs = frozenset(
        arch
        for arch, os_name in entries.arch_os
        if (not os_name or os_name == settings.system_os) and settings.is_schedulable(arch)
    )
    return _ImageView(
        image, archs=archs, offered=entries.offered, incomplete=entries.incomplete, unusable=entries.unusable
    )


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
    return _joined(f"no CPU architecture is supported by every image ({scope}): ", parts, "images")


def _strict_problems(views: Sequence[_ImageView]) -> list[str]:
    problems = []
    for view in views:
        if view.failure is not None:
            problems.append(f"image {view.image} could not be inspected: {view.failure}")
        elif view.incomplete:
            problems.append(
                f"image {view.image} has platform entries without os or architecture: {', '.join(view.incomplete)}"
            )
        elif view.unusable:
            problems.append(
                f"image {view.image} has platform entries that are not valid label values: {', '.join(view.unusable)}"
            )
    return problems


def _preferred(labels: Mapping[str, str], common: frozenset[str], settings: PolicySettings, out: _Outcome) -> str:
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
    edits: Edits,
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
    if require(edits, requirement(ARCH_LABEL, "In", ordered)):
        added["required"] = ordered
    out.reasons.append(f"required {ARCH_LABEL} in {', '.join(ordered)} (supported by every image)")
    allowed = common
    preferred = _preferred(labels, common, settings, out)
    if preferred and preferred in common:
        if settings.preference_mode == "required":
            if select(edits, ARCH_LABEL, preferred):
                added["nodeSelector"] = preferred
            allowed = frozenset({preferred})
            out.reasons.append(f"nodeSelector {ARCH_LABEL}={preferred} (preference mode required)")
        elif len(common) > 1:
            weight = settings.preferred_arch_weight
            if prefer(edits, requirement(ARCH_LABEL, "In", [preferred]), weight):
                added["preferred"] = preferred
            out.reasons.append(f"preferred {ARCH_LABEL}={preferred} with weight {weight}")
        else:
            out.reasons.append(f"{preferred} is the only common architecture: no preference needed")
    elif preferred:
        out.reasons.append(f"preferred architecture {preferred} is not supported by every image")
    for arch_toleration in settings.arch_tolerations:
        toleration = arch_toleration.to_toleration()
        if arch_toleration.arch in allowed and tolerate(edits, toleration):
            added.setdefault("tolerations", []).append(toleration)
            out.reasons.append(f"tolerate the {arch_toleration.arch} taint ({arch_toleration})")
    return added


def _match_node_labels(edits: Edits, labels: Mapping[str, str], settings: PolicySettings, out: _Outcome) -> None:
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


def place(workload: Workload, *, namespace: str, lookups: Lookups, settings: PolicySettings) -> Decision:
    """Apply the placement contract to a Pod or DaemonSet template that noe acts on (rules 1-10)."""
    original = workload.obj
    if workload.node_name:
        return Decision(True, original, reasons=(f"spec.nodeName is {workload.node_name}: left untouched",))
    placement = _Placement.of(workload)
    out = _Outcome()
    if placement.withdrawn:
        out.reasons.append("noe's earlier placement of this template withdrawn: deciding afresh")
    common: tuple[str, ...] | None = None
    selection = architecture_selection(placement.spec)
    images = workload.images
    if selection:
        out.reasons.append(f"{selection}: architecture left as chosen")
    elif not images:
        out.reasons.append("no container image: architecture left open")
    else:
        views = [_view(image, lookups, settings) for image in images]
        if namespace in settings.strict_namespaces:
            problems = _strict_problems(views)
            if problems:
                message = _joined(f"namespace {namespace} is strict: ", problems, "problems")
                return Decision(False, original, message=message, reasons=(message,))
        for view in views:
            if view.failure is not None:
                out.warn(f"cannot inspect {shorten(view.image, _IMAGE_IN_WARNING)}: {view.failure}")
                out.reasons.append(f"image {view.image} left out: {view.failure}")
            else:
                archs = ", ".join(sorted(view.archs or ())) or "none"
                out.reasons.append(f"image {view.image}: {archs} (offers {', '.join(view.offered)})")
            if view.unusable:
                out.warn(
                    f"{shorten(view.image, _IMAGE_IN_WARNING)}: platform {shorten(view.unusable[0], 24)} "
                    "is not a valid label value: ignored"
                )
        inspected = [view for view in views if view.archs is not None]
        if not inspected and placement.withdrawn:
            # A registry outage must not strip a DaemonSet of the placement it already had.
            placement = _Placement.of(workload, withdraw_previous=False)
            out.reasons.append("no image could be inspected: noe's earlier placement kept")
        elif not inspected:
            out.reasons.append("no image could be inspected: architecture left open")
        else:
            shared = frozenset.intersection(*(view.archs for view in inspected if view.archs is not None))
            if not shared:
                message = _deny_message(views, settings)
                return Decision(
                    False,
                    original,
                    warnings=out.warning_list(),
                    message=message,
                    reasons=(*out.reasons, message),
                    common=(),
                )
            added = _place(placement.spec_edits, workload.labels, shared, settings, out)
            if workload.kind == DAEMON_SET and added:
                placement.record(added)
            common = tuple(sorted(shared))
    _match_node_labels(placement.spec_edits, workload.labels, settings, out)
    patch = placement.operations()
    if not patch:
        out.reasons.append("nothing to change")
    return Decision(True, original, patch, out.warning_list(), None, tuple(out.reasons), common)


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

    The one-call form for tests and tools that already hold the lookups;
    :func:`noe_core.admission.admit` is the same decision for an AdmissionReview.
    ``dry_run`` does not change the answer (rule 12); it is accepted so callers
    can pass the request through unchanged. Raises :class:`InvalidObject` for an
    object noe acts on but cannot read.
    """
    del dry_run  # rule 12: same answer either way
    if not acts_on(kind, operation, sub_resource):
        if not isinstance(obj, Mapping):
            raise InvalidObject(f"the {kind} must be an object, not {json_type(obj)}")
        check_depth(obj)
        return skipped(obj, kind, operation, sub_resource)
    return place(read_workload(obj, kind), namespace=namespace, lookups=lookups, settings=settings)
