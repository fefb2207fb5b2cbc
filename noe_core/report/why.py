"""``noe why``'s answer for one pod, pure: the policies, each image's platforms, the nodes noe allows, a verdict.

The question a team asks the day noe is switched on: "why is my pod Pending,
or on that node?". The answer rests on the Decision the one pipeline gives for
the pod as it was admitted (:meth:`noe_core.placement.decider.Decider.admitted`)
and on the cluster's Nodes (:func:`noe_core.placement.node_fit.fit`):

* ``placed`` — bound to a node the Decision allows;
* ``misplaced`` — bound to a node outside it;
* ``pending-no-node`` — not bound, and no Ready, schedulable node satisfies noe's terms;
* ``pending-other`` — not bound, noe's terms are satisfiable: another constraint blocks it;
* ``not-placed`` — noe left the pod alone (which rule says why);
* ``unknown`` — an image could not be looked up, so the answer would be a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.image.offer import Offer, allowed_nodes
from noe_core.placement.gate import SCHEDULING_GATE
from noe_core.placement.node_fit import NodeFacts, NodeFit, accepts, fit
from noe_core.placement.pipeline import FALLBACK_LABEL
from noe_core.placement.rules import Decision
from noe_core.policies.selection import PolicyVerdict
from noe_core.util.fields import lenient_mapping

Verdict = Literal["placed", "misplaced", "pending-no-node", "pending-other", "not-placed", "unknown"]
_UNSCHEDULABLE = ("PodScheduled", "False", "Unschedulable")
MAX_EVENTS = 5
"""The pod's newest Events the table shows."""
VERDICTS: tuple[Verdict, ...] = ("placed", "misplaced", "pending-no-node", "pending-other", "not-placed", "unknown")


@dataclass(frozen=True)
class PodState:
    """What ``noe why`` reads of the live pod besides its spec: where it is, and what the scheduler said."""

    namespace: str
    name: str
    node: str = ""
    phase: str = ""
    unschedulable: str | None = None
    """The scheduler's message when ``PodScheduled=False`` with reason ``Unschedulable``."""
    gated: bool = False
    """Held by noe's scheduling gate (its images not inspected yet)."""
    fallback: bool = False
    """Labelled ``arch.noe.adevinta.com/fallback=true``: placed on the fallback architecture (rule 13a)."""

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodState:
        """Read a v1 Pod as the API serves it; missing or malformed parts read as absent."""
        meta, spec, status = (lenient_mapping(pod.get(k)) for k in ("metadata", "spec", "status"))
        conditions = status.get("conditions")
        said = None
        for c in conditions if isinstance(conditions, list) else ():
            if isinstance(c, Mapping) and (c.get("type"), c.get("status"), c.get("reason")) == _UNSCHEDULABLE:
                said = str(c.get("message") or "")
        gates = spec.get("schedulingGates")
        labels = lenient_mapping(meta.get("labels"))
        return cls(
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(spec.get("nodeName") or ""),
            str(status.get("phase") or ""),
            said,
            any(isinstance(g, Mapping) and g.get("name") == SCHEDULING_GATE for g in gates or ())
            if isinstance(gates, list)
            else False,
            labels.get(FALLBACK_LABEL) == "true",
        )

    def as_data(self) -> dict[str, str | None]:
        return {"namespace": self.namespace, "name": self.name, "node": self.node or None, "phase": self.phase}


@dataclass(frozen=True)
class ImageAnswer:
    """One image as the Decision read it: its platforms and where they came from, or the error."""

    image: str
    platforms: tuple[str, ...] | None
    source: str
    error: str | None = None

    def as_data(self) -> dict[str, Any]:
        platforms = list(self.platforms) if self.platforms is not None else None
        return {"image": self.image, "platforms": platforms, "source": self.source, "error": self.error}


@dataclass(frozen=True)
class Why:
    """The whole answer (``noe why -o json`` is :meth:`as_data`)."""

    pod: PodState
    policies: tuple[PolicyVerdict, ...]
    images: tuple[ImageAnswer, ...]
    allowed: Offer | None
    nodes: NodeFit
    verdict: Verdict
    message: str
    reasons: tuple[str, ...] = ()
    """The Decision's reasons, rule by rule (the table shows them; JSON keeps to the documented keys)."""
    events: tuple[str, ...] = ()
    """The pod's newest Events, ``Type Reason: message`` (the table shows them)."""

    def as_data(self) -> dict[str, Any]:
        return {
            "pod": self.pod.as_data(),
            "policies": [p.as_data() for p in self.policies],
            "images": [i.as_data() for i in self.images],
            "allowed": allowed_nodes(self.allowed) if self.allowed is not None else [],
            "nodes": self.nodes.as_data(),
            "verdict": self.verdict,
            "message": self.message,
        }


def image_answers(images: Sequence[str], decision: Decision) -> tuple[ImageAnswer, ...]:
    """Each image of the pod as ``decision`` read it (an image it did not read: not looked up)."""
    out = []
    for image in images:
        found = decision.lookups.get(image)
        source = decision.sources.get(image, "registry")
        if isinstance(found, ImagePlatforms):
            shown = tuple(dict.fromkeys(f"{os_name}/{arch}" for arch, os_name in found.arch_os))
            out.append(ImageAnswer(image, shown, source))
        elif isinstance(found, LookupFailure):
            out.append(ImageAnswer(image, None, source, found.reason))
        else:
            out.append(ImageAnswer(image, None, "none", "not looked up: the decision did not need it"))
    return tuple(out)


def _left_alone(reasons: Sequence[str]) -> str:
    """The rule that left the pod alone: the Decision's reason saying so, else its first."""
    for reason in reversed(reasons):
        if "left" in reason or "open" in reason or "untouched" in reason or "chosen" in reason:
            return reason
    return reasons[0] if reasons else "noe required nothing of this pod"


def explain(
    pod: PodState,
    *,
    images: Sequence[str],
    decision: Decision,
    terms: Offer | None,
    own_terms: bool,
    nodes: Sequence[NodeFacts],
    tolerations: Sequence[Mapping[str, Any]],
    policies: tuple[PolicyVerdict, ...],
    levels: bool = False,
    events: Sequence[tuple[str, str]] = (),
) -> Why:
    """The verdict for ``pod``.

    ``decision`` is the pipeline's for the pod as admitted; ``terms`` the nodes noe required of it
    (``None``: noe required nothing); ``own_terms`` says the pod carries platform requirements that are
    not noe's (the user's choice).
    """
    answers = image_answers(images, decision)
    allowed = terms
    counted = fit(allowed if allowed is not None else Offer(), nodes, tolerations, levels=levels)

    def answer(verdict: Verdict, message: str) -> Why:
        shown = tuple(f"{reason}: {text}" for reason, text in events[-MAX_EVENTS:])
        return Why(pod, policies, answers, allowed, counted, verdict, message, decision.reasons, shown)

    failed = [a for a in answers if a.error is not None and a.source != "none"]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return answer("unknown", f"image {first.image} could not be looked up: {first.error}{more}")
    if terms is None:
        shown = ", ".join(f"{o}/{a}" for o, a in sorted(decision.nodes or ()))
        if own_terms and shown:
            return answer(
                "not-placed",
                f"the pod's platform terms are its own, not the ones noe writes for it ({shown}): noe leaves a "
                "pod's own choice alone (or its images changed since it was admitted)",
            )
        if own_terms:
            return answer("not-placed", "the pod chooses its own platform: noe left it as chosen")
        if decision.nodes is not None:
            return answer(
                "not-placed",
                f"noe would require {shown} now, but the pod carries no such terms: it was admitted without noe "
                "(the webhook failed open, or the namespace is outside its selector)",
            )
        if not decision.allowed and decision.message:
            return answer("not-placed", f"noe would deny this pod now: {decision.message}")
        return answer("not-placed", _left_alone(decision.reasons))
    fallback = " (its fallback architecture: an image could not be inspected)" if pod.fallback else ""
    if pod.node:
        node = next((n for n in nodes if n.name == pod.node), None)
        if node is None:
            return answer("unknown", f"node {pod.node} is not among the cluster's Nodes: it may be gone")
        where = f"node {pod.node} is {node.platform.describe()}"
        if accepts(terms, node.platform, levels=levels):
            return answer("placed", f"{where}, which every image runs on{fallback}")
        return answer("misplaced", f"{where}, outside what its images run on ({_shown(terms)})")
    if pod.gated:
        return answer("pending-other", "held by noe's scheduling gate until its images are inspected")
    if not counted.satisfiable:
        return answer("pending-no-node", counted.missing() + fallback)
    said = pod.unschedulable or next((text for reason, text in reversed(events) if reason == "FailedScheduling"), "")
    if said:
        return answer("pending-other", f"{counted.matching} node(s) satisfy noe's terms; the scheduler says: {said}")
    return answer("pending-other", f"{counted.matching} node(s) satisfy noe's terms; waiting for the scheduler")


def _shown(offer: Offer) -> str:
    return ", ".join(f"{os_name}/{arch}" for os_name, arch in sorted(offer))


def table(why: Why) -> str:
    """The human answer: the verdict first, then what it rests on."""
    pod = why.pod
    lines = [
        f"Pod:       {pod.namespace}/{pod.name}" + (f" on {pod.node}" if pod.node else "") + f" ({pod.phase or '?'})",
        f"Verdict:   {why.verdict}",
        f"Why:       {why.message}",
        "",
        "Images:",
    ]
    for image in why.images:
        found = ", ".join(image.platforms) if image.platforms is not None else f"error: {image.error}"
        lines.append(f"  {image.image}  [{image.source}]  {found}")
    lines.append("")
    lines.append("Allowed:   " + (_allowed_text(why.allowed) if why.allowed is not None else "(noe requires nothing)"))
    data = why.nodes
    lines.append(f"Nodes:     {data.matching} of {data.total} match")
    for arch, count in sorted(data.by_architecture.items()):
        lines.append(f"  {arch:<10} {count.total} total, {count.ready} Ready and schedulable, {count.matching} match")
    for line in data.kept_off:
        lines.append(f"  {line}")
    lines.append("")
    lines.append("Policies:" + ("" if why.policies else "  (none)"))
    for policy in why.policies:
        where = f"{policy.namespace}/" if policy.namespace else ""
        mark = "applied" if policy.applied else "not applied"
        lines.append(f"  {policy.kind}/{where}{policy.name}: {mark}: {policy.reason}")
    if why.events:
        lines.append("")
        lines.append("Events:")
        lines.extend(f"  {event}" for event in why.events)
    if why.reasons:
        lines.append("")
        lines.append("Decision:")
        lines.extend(f"  {reason}" for reason in why.reasons)
    return "\n".join(lines) + "\n"


def _allowed_text(offer: Offer) -> str:
    parts = []
    for node in allowed_nodes(offer):
        text = f"{node['os']}/{node['architecture']}"
        if node["windowsBuild"]:
            text += f" build {node['windowsBuild']}"
        if node["level"]:
            text += f" x86-64-v{node['level']}+"
        parts.append(text)
    return ", ".join(parts) or "(nothing)"


__all__ = ["VERDICTS", "ImageAnswer", "PodState", "Verdict", "Why", "explain", "image_answers", "table"]
