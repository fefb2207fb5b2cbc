"""The placement policy as it was before it recorded its own edits: copy, edit, compare.

Kept only as the property tests' oracle. It applies the same rule helpers of
:mod:`noe_core.placement.rules` to a deep copy of the whole object with the plain-dict
form of the :mod:`noe_core.placement.scheduling` helpers (an :class:`~noe_core.util.json_patch.Edits` over
the copy's own spec, whose recorded operations are ignored); the tests then check that the
operations :func:`noe_core.placement.pipeline.decide` emits, applied to the original, give
exactly the object :func:`noe_core.util.json_patch.make_patch` (the jsonpatch diff)
describes between the original and this copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from noe_core.image.image_platforms import Lookups
from noe_core.k8s.workload import DAEMON_SET, read_workload
from noe_core.placement.image_reading import offers, read_images, strict_problems
from noe_core.placement.messages import Notes
from noe_core.placement.needs import shared
from noe_core.placement.rules import (
    PLACEMENT_ANNOTATION,
    _match_node_labels,
    _place,
    _require_platforms,
    pod_scope,
)
from noe_core.placement.scheduling import architecture_selection, withdraw
from noe_core.policies.settings import PolicySettings
from noe_core.util.json_patch import Edits


def _withdraw_previous(work: dict[str, Any]) -> bool:
    record = read_workload(work, DAEMON_SET).placement_record
    if record is None:
        return False
    withdraw(work["spec"]["template"]["spec"], record)
    metadata = work["spec"]["template"]["metadata"]
    del metadata["annotations"][PLACEMENT_ANNOTATION]
    if not metadata["annotations"]:
        del metadata["annotations"]
    if not metadata:
        del work["spec"]["template"]["metadata"]
    return True


def _record_placement(work: dict[str, Any], record: Mapping[str, Any]) -> None:
    template = work["spec"]["template"]
    metadata = template.setdefault("metadata", {})
    annotations = metadata.setdefault("annotations", {})
    annotations[PLACEMENT_ANNOTATION] = json.dumps(record, sort_keys=True, separators=(",", ":"))


def reference_object(
    obj: Mapping[str, Any], *, kind: str, namespace: str, lookups: Lookups, settings: PolicySettings
) -> dict[str, Any]:
    """The placed object (or the original when denied) for a Pod or DaemonSet that noe acts on."""
    work: dict[str, Any] = copy.deepcopy(dict(obj))
    withdrawn = kind == DAEMON_SET and _withdraw_previous(work)
    holder: dict[str, Any] = work if kind != DAEMON_SET else work["spec"]["template"]
    spec_state = holder.get("spec", ...)
    if not isinstance(holder.get("spec"), dict):
        holder["spec"] = {}
    spec = holder["spec"]
    workload = read_workload(obj, kind)
    if spec.get("nodeName"):
        return copy.deepcopy(dict(obj))
    out = Notes()
    if not architecture_selection(spec) and workload.images:
        scope = pod_scope(workload, settings)
        readings = read_images(workload.images, lookups, scope, workload.volume_images)
        if namespace in settings.strict_namespaces and strict_problems(readings, lookups):
            return copy.deepcopy(dict(obj))
        inspected = offers(readings)
        if not inspected and withdrawn:
            work = copy.deepcopy(dict(obj))
            holder = work["spec"]["template"]
            spec = holder["spec"]
        elif inspected:
            common = shared(inspected)
            if not common:
                return copy.deepcopy(dict(obj))
            added = _require_platforms(Edits(spec), common, scope, out)
            added.update(_place(Edits(spec), workload.labels, frozenset(common.architectures), settings, out))
            if kind == DAEMON_SET and added:
                _record_placement(work, added)
    _match_node_labels(Edits(spec), workload.labels, settings, out)
    if not spec and spec_state is not ... and not isinstance(spec_state, dict):
        holder["spec"] = spec_state
    elif not spec and spec_state is ...:
        del holder["spec"]
    return work
