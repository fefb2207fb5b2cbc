"""The edit session of one placement: working copies of the fields noe edits, and the edits made to them.

:class:`PlacementSession` is built once per admission from the
:class:`~noe_core.k8s.workload.Workload` (the object read once): it edits only the
placement fields of the pod spec (``nodeSelector``, ``affinity``,
``tolerations``) and, on a DaemonSet, the template's annotations, copying just
the containers an edit changes (:class:`~noe_core.util.json_patch.Edits`,
``shared``); the rest of the object is never copied or compared. On a DaemonSet
UPDATE noe's earlier placement (the record it left in an annotation) is withdrawn
from a private copy of those fields first, so the template is decided afresh. How the pod already chooses its
architecture (:attr:`PlacementSession.selection`) is read once, from the same
copies, for both questions the policy asks of it: which images to look up, and
whether to place at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from noe_core.k8s.workload import DAEMON_SET, PLACEMENT_ANNOTATION, Workload
from noe_core.placement.scheduling import PLACEMENT_FIELDS, architecture_selection, withdraw
from noe_core.util.json_patch import Edits, Operation, copy_json, pointer


@dataclass
class PlacementSession:
    """The working values of the fields noe edits, and the edits recorded on them.

    ``withdrawn`` says noe's earlier placement of a DaemonSet template was taken
    out of the working values; ``selection`` is how the pod already chooses its
    architecture (``None``: it does not), read from them.
    """

    workload: Workload
    spec_edits: Edits
    meta_edits: Edits
    withdrawn: bool
    selection: str | None

    @classmethod
    def of(cls, workload: Workload, *, withdraw_previous: bool = True) -> PlacementSession:
        """Start editing ``workload``; ``withdraw_previous=False`` keeps noe's earlier placement as it is."""
        record = workload.placement_record if withdraw_previous else None
        source = workload.spec
        if record is not None:  # noe's earlier placement taken out of a private copy (a DaemonSet UPDATE)
            spec = {key: copy_json(source[key]) for key in PLACEMENT_FIELDS if key in source}
            withdraw(spec, record)
        else:  # the fields as sent: the edits copy what they change (path copying), nothing up front
            spec = {key: source[key] for key in PLACEMENT_FIELDS if key in source}
        pod_meta = workload.pod_meta
        meta: dict[str, Any] = {}
        if workload.kind == DAEMON_SET and "annotations" in pod_meta.raw:
            # Only a DaemonSet template's annotations are ever edited (the placement record).
            meta["annotations"] = copy_json(pod_meta.raw["annotations"])
        if record is not None:
            del meta["annotations"][PLACEMENT_ANNOTATION]
        return cls(
            workload,
            Edits(spec, workload.spec_pointer, present=workload.spec_state),
            Edits(meta, workload.template_pointer + "/metadata", present=pod_meta.state),
            withdrawn=record is not None,
            selection=architecture_selection(spec),
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
        metadata = self.workload.pod_meta.raw
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
