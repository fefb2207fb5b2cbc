"""Rule 18: ``kubectl debug``'s ephemeral containers must have an image usable on the pod's node.

``kubectl debug`` adds an ephemeral container to a running pod through an UPDATE
of the ``pods/ephemeralcontainers`` subresource; the scheduler plays no part, so
an amd64-only debug image on an arm64 node fails with ``exec format error``. The
new containers are those of the pod that its ``oldObject`` lacks (they can be
added, never changed or removed). Their images are looked up as any image, and
checked against the node the pod is bound to (:func:`noe_core.image.node_platform.usable_on`):

* a pod whose own placement pins one OS and one architecture (its nodeSelector
  or every required term; the only ``--system-os``) is judged without reading
  the Node, when that is enough (no Windows build or x86-64 level to tell);
* otherwise the Node is read (:data:`NodeLookup`, the webhook's small cache);
  a Node that cannot be read allows the request with a warning.

The answer is allow, with a warning naming the image and the node's platform
(``linux/arm64``), or a deny in a strict namespace; never a patch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from noe_core.image.image_platforms import ImagePlatforms, LookupFailure, Lookups
from noe_core.image.node_platform import ARCH_LABEL, BETA_ARCH_LABEL, BETA_OS_LABEL, OS_LABEL, NodePlatform
from noe_core.image.offer import ANYWHERE, PlatformScope
from noe_core.k8s.workload import POD, Workload
from noe_core.placement.image_reading import Artifact, note_images, read_images, strict_problems
from noe_core.placement.messages import Notes, joined
from noe_core.placement.rules import Decision
from noe_core.placement.scheduling import required_terms
from noe_core.policies.settings import PolicySettings
from noe_core.util.printable import shorten

EPHEMERAL_CONTAINERS = "ephemeralcontainers"
"""The Pod subresource ``kubectl debug`` updates."""


@dataclass(frozen=True)
class NodeFailure:
    """The Node could not be read (``reason`` is shown in the warning)."""

    reason: str


NodeLookup: TypeAlias = Callable[[str], NodePlatform | NodeFailure]
"""A node's name → its platform (the webhook reads the Node through a small cache), or why not."""


def acts_on_debug(kind: str, operation: str, sub_resource: str) -> bool:
    """Rule 18: an UPDATE of a Pod's ``ephemeralcontainers`` subresource."""
    return kind == POD and operation == "UPDATE" and sub_resource == EPHEMERAL_CONTAINERS


def new_debug_images(workload: Workload, old: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The images of the ephemeral containers ``old`` (the pod before the request) does not have, in order."""
    spec = old.get("spec") if isinstance(old, Mapping) else None
    listed = spec.get("ephemeralContainers") if isinstance(spec, Mapping) else None
    before = {c.get("name") for c in listed if isinstance(c, Mapping)} if isinstance(listed, list) else set()
    return tuple(dict.fromkeys(image for name, image in workload.ephemeral.items() if name not in before))


def _pinned(spec: Mapping[str, Any], keys: tuple[str, str]) -> str | None:
    """The one value the pod's nodeSelector, or every non-empty required term, gives a label; else ``None``."""
    selector = spec.get("nodeSelector") or {}
    for key in keys:
        if isinstance(selector, Mapping) and isinstance(selector.get(key), str):
            return str(selector[key])
    found: set[str] = set()
    terms = [
        t
        for t in required_terms(spec)
        if isinstance(t, Mapping) and (t.get("matchExpressions") or t.get("matchFields"))
    ]
    for term in terms:
        values = {
            value
            for e in term.get("matchExpressions") or []
            if isinstance(e, Mapping)
            and e.get("key") in keys
            and e.get("operator") == "In"
            and len(e.get("values") or []) == 1
            for value in e["values"]
        }
        if len(values) != 1:
            return None
        found |= values
    return found.pop() if len(found) == 1 else None


def pinned_platform(workload: Workload, settings: PolicySettings) -> tuple[str, str] | None:
    """The (OS, architecture) the pod's own placement pins, or ``None``: its nodeSelector or every required
    term names one of each (the OS may also be the cluster's only ``--system-os``)."""
    arch = _pinned(workload.spec, (ARCH_LABEL, BETA_ARCH_LABEL))
    if arch is None:
        return None
    os_name = _pinned(workload.spec, (OS_LABEL, BETA_OS_LABEL))
    if os_name is None and len(settings.system_os) == 1:
        os_name = settings.system_os[0]
    return None if os_name is None else (os_name, arch)


def _settled_by(pair: tuple[str, str], found: ImagePlatforms, scope: PlatformScope) -> bool | None:
    """Whether an image runs on every node of ``pair`` (True), on none (False), or it depends on the node's
    Windows build or x86-64 level (``None``: the Node must be read)."""
    offer = found.offer(PlatformScope((pair[0],), frozenset(), scope.levels)).get(pair)
    if offer is None:
        return False
    return True if offer is ANYWHERE else None


@dataclass(frozen=True)
class DebugCheck:
    """What rule 18 decided: the decision, and whether the Node had to be read."""

    decision: Decision
    node_read: bool


def check_debug(
    workload: Workload,
    images: Sequence[str],
    lookups: Lookups,
    *,
    namespace: str,
    settings: PolicySettings,
    nodes: NodeLookup | None,
) -> DebugCheck:
    """Rule 18 for the new ephemeral containers' ``images``: allow (with warnings) or deny; never a patch."""
    original = workload.obj
    out = Notes()
    if not images:
        return DebugCheck(Decision(True, original, reasons=("no new ephemeral container image",)), False)
    scope = PlatformScope(settings.system_os, frozenset(), settings.x86_64_levels == "nfd")
    readings = read_images(images, lookups, scope)
    strict = namespace in settings.strict_namespaces
    if strict:
        problems = strict_problems(readings, lookups)
        if problems:
            message = joined(f"namespace {namespace} is strict: ", problems, "problems")
            return DebugCheck(Decision(False, original, message=message, reasons=(message,)), False)
    note_images(readings, lookups, scope, out)
    judged = {
        image: found
        for image, reading in readings.items()
        if not isinstance(reading, LookupFailure | Artifact) and isinstance(found := lookups.get(image), ImagePlatforms)
    }
    if not judged:
        return DebugCheck(Decision(True, original, warnings=out.warning_list(), reasons=tuple(out.reasons)), False)
    node_name = workload.node_name
    pinned = pinned_platform(workload, settings)
    verdicts: dict[str, bool | None] = {
        image: (None if pinned is None else _settled_by(pinned, found, scope)) for image, found in judged.items()
    }
    shown = f"{pinned[0]}/{pinned[1]}" if pinned else ""
    node_read = False
    if any(verdict is None for verdict in verdicts.values()):
        if not node_name:
            out.reasons.append("the pod is bound to no node yet: nothing to check the debug images against")
            return DebugCheck(Decision(True, original, warnings=out.warning_list(), reasons=tuple(out.reasons)), False)
        node_read = True
        node = nodes(node_name) if nodes is not None else NodeFailure("noe has no Kubernetes API access")
        if isinstance(node, NodeFailure):
            out.warn(f"cannot read node {shorten(node_name, 40)}: {node.reason}; debug images not checked")
            out.reasons.append(f"node {node_name} unreadable ({node.reason}): allowed")
            return DebugCheck(Decision(True, original, warnings=out.warning_list(), reasons=tuple(out.reasons)), True)
        verdicts = {image: found.usable_on(node, levels=scope.levels) for image, found in judged.items()}
        shown = str(node)
        out.reasons.append(f"node {node_name} is {node.describe()}")
    else:
        out.reasons.append(f"the pod's own placement pins {shown}: node not read")
    where = f"node {node_name}" if node_name else "its node"
    unusable = [image for image, ok in verdicts.items() if not ok]
    for image in unusable:
        out.reasons.append(f"debug image {image} offers no platform usable on {where} ({shown})")
    if unusable and strict:
        message = joined(
            f"namespace {namespace} is strict: ",
            [f"image {i} cannot run on {where} ({shown})" for i in unusable],
            "images",
        )
        return DebugCheck(Decision(False, original, message=message, reasons=(*out.reasons, message)), node_read)
    for image in unusable:
        out.warn(f"{shorten(image, 48)} cannot run on {shorten(where, 40)} ({shown}): no {shown} entry")
    return DebugCheck(Decision(True, original, warnings=out.warning_list(), reasons=tuple(out.reasons)), node_read)
