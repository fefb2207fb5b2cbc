"""Gate mode: hold a pod back when its lookups could not finish, instead of admitting it unplaced.

With ``--on-lookup-failure gate`` the webhook answers a Pod CREATE whose image
lookups timed out or failed with a temporary error (connection error, 429,
5xx) with the scheduling gate :data:`SCHEDULING_GATE` and no placement; noe's
controller later resolves the images without an admission deadline, adds the
placement :func:`noe_core.placement.rules.place` gives, and removes the gate.

:func:`held_back` is a pure function of the workload, its lookups and the
decision the policy already took, so the webhook and the controller agree on
which pods are gated. Permanent failures (404, 401/403) stay warnings, a
strict namespace still denies (and is never gated), a DaemonSet is never
gated, and a deny stays a deny (more answers cannot make an empty
intersection non-empty).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from noe_core.image.image_platforms import LookupFailure, Lookups
from noe_core.k8s.workload import POD, Workload
from noe_core.placement.messages import limit_warning
from noe_core.policies.settings import PolicySettings
from noe_core.util.json_patch import Operation

SCHEDULING_GATE = "arch.noe.adevinta.com/inspection"
"""The scheduling gate noe puts on pods whose images it could not inspect in time."""


def temporary_failures(images: Sequence[str], lookups: Lookups) -> tuple[str, ...]:
    """The images whose lookup failed in a way that may succeed later."""
    out = []
    for image in dict.fromkeys(images):
        found = lookups.get(image)
        if isinstance(found, LookupFailure) and found.temporary:
            out.append(image)
    return tuple(out)


def held_back(workload: Workload, *, namespace: str, lookups: Lookups, settings: PolicySettings) -> tuple[str, ...]:
    """The images gate mode waits for: an allowed Pod's temporary lookup failures; empty when it goes ahead.

    Asked only of a pod the rules allowed: a deny stays a deny.
    """
    if workload.kind != POD or workload.node_name or namespace in settings.strict_namespaces:
        return ()
    return temporary_failures(workload.images, lookups)


def gates_of(spec: Mapping[str, Any]) -> list[str]:
    """The names in a pod spec's ``schedulingGates`` (malformed entries skipped)."""
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return []
    return [str(g.get("name")) for g in gates if isinstance(g, Mapping) and isinstance(g.get("name"), str)]


def add_gate_operation(workload: Workload) -> tuple[Operation, ...]:
    """The RFC 6902 operation adding :data:`SCHEDULING_GATE` to the pod (none when already there)."""
    existing = workload.spec.get("schedulingGates")
    if SCHEDULING_GATE in gates_of(workload.spec):
        return ()
    entry = {"name": SCHEDULING_GATE}
    if isinstance(existing, list):
        return ({"op": "add", "path": f"{workload.spec_pointer}/schedulingGates/-", "value": entry},)
    if workload.spec_state is not True:
        return ({"op": "add", "path": workload.spec_pointer, "value": {"schedulingGates": [entry]}},)
    return ({"op": "add", "path": f"{workload.spec_pointer}/schedulingGates", "value": [entry]},)


def remove_gate_operation(spec: Mapping[str, Any], spec_pointer: str = "/spec") -> tuple[Operation, ...]:
    """The operation removing :data:`SCHEDULING_GATE` (the whole list when it is the only gate)."""
    gates = spec.get("schedulingGates")
    names = gates_of(spec)
    if SCHEDULING_GATE not in names or not isinstance(gates, list):
        return ()
    if len(gates) == 1:
        return ({"op": "remove", "path": f"{spec_pointer}/schedulingGates"},)
    index = next(i for i, g in enumerate(gates) if isinstance(g, Mapping) and g.get("name") == SCHEDULING_GATE)
    return ({"op": "remove", "path": f"{spec_pointer}/schedulingGates/{index}"},)


def gate_parts(workload: Workload, waiting: Sequence[str]) -> tuple[tuple[Operation, ...], str, str]:
    """Gate mode for a pod :func:`held_back` waits on: the operations that gate it (instead of the placement),
    the warning and the reason."""
    note = limit_warning(
        f"{len(waiting)} image lookup(s) unfinished: pod held by scheduling gate {SCHEDULING_GATE} "
        "until noe's controller places it"
    )
    reason = f"gated: lookups of {', '.join(waiting)} did not finish (temporary failure)"
    return add_gate_operation(workload), note, reason
