"""How many of a cluster's Nodes can take a pod on noe's terms, and what keeps the others out.

A pod noe placed can only be scheduled on a node its images run on (the
Decision's :class:`~noe_core.image.offer.Offer`) that is Ready, not cordoned, and
whose ``NoSchedule`` / ``NoExecute`` taints the pod tolerates. When no node is
left, the pod waits for ever; ``noe why`` and the controller's
``NoMatchingNode`` Event say so, naming what is missing ("no Ready linux/arm64
node; 3 arm64 nodes are tainted arch=arm64:NoSchedule"). Pure: the Nodes come
in as read from the API.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from noe_core.image.node_platform import AMD64, ARCH_LABEL, OS_LABEL, WINDOWS, NodePlatform
from noe_core.image.offer import Offer
from noe_core.image.platform import X86_64_MAX_LEVEL
from noe_core.k8s.node_selection import selects, taint_text, untolerated
from noe_core.util.fields import lenient_mapping


@dataclass(frozen=True)
class NodeFacts:
    """What placement needs of a Node: its platform, whether it takes new pods, and its taints."""

    name: str
    platform: NodePlatform
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[Mapping[str, str], ...] = ()

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> NodeFacts:
        """Read a v1 Node as the API serves it; missing or malformed parts read as absent (never raises)."""
        meta, spec, status = (lenient_mapping(node.get(k)) for k in ("metadata", "spec", "status"))
        labels = {str(k): v for k, v in lenient_mapping(meta.get("labels")).items() if isinstance(v, str)}
        info = lenient_mapping(status.get("nodeInfo"))
        if ARCH_LABEL not in labels and isinstance(info.get("architecture"), str):
            labels[ARCH_LABEL] = info["architecture"]
        if OS_LABEL not in labels and isinstance(info.get("operatingSystem"), str):
            labels[OS_LABEL] = info["operatingSystem"]
        conditions = status.get("conditions")
        ready = any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in (conditions if isinstance(conditions, list) else ())
        )
        taints = spec.get("taints")
        return cls(
            str(meta.get("name") or ""),
            NodePlatform.from_labels(labels),
            ready=ready,
            unschedulable=spec.get("unschedulable") is True,
            taints=tuple(
                {str(k): str(v) for k, v in t.items() if isinstance(v, str)}
                for t in (taints if isinstance(taints, list) else ())
                if isinstance(t, Mapping)
            ),
        )

    @property
    def takes_pods(self) -> bool:
        """Ready and not cordoned: the scheduler considers it at all."""
        return self.ready and not self.unschedulable


def accepts(offer: Offer, platform: NodePlatform, *, levels: bool) -> bool:
    """The offer's nodes include ``platform``: its (OS, architecture), its Windows build, its x86-64 level."""
    pair_offer = offer.get((platform.os, platform.architecture))
    if pair_offer is None:
        return False
    need = pair_offer.need(platform.windows_build)
    if need is None:
        return False
    return not (levels and platform.architecture == AMD64) or platform.level >= need


def narrowed(offer: Offer, platform_spec: Mapping[str, Any]) -> Offer:
    """The pairs of ``offer`` a pod's own platform requirements still accept (a rollout group, a pinned
    architecture): ``platform_spec`` holds only them (:func:`~noe_core.placement.scheduling.split_platform_terms`).

    Each pair is tried on a node of that platform at the highest x86-64 level and of each Windows
    build the offer names, so only OS and architecture narrow it; the node fit counts builds and levels.
    """
    kept = {}
    for (os_name, arch), pair_offer in offer.items():
        builds = [""] + [name for name, _ in pair_offer.builds] if os_name == WINDOWS else [""]
        level = X86_64_MAX_LEVEL if arch == AMD64 else 1
        if any(selects(platform_spec, NodePlatform(os_name, arch, b, level).labels(), "") for b in builds):
            kept[(os_name, arch)] = pair_offer
    return Offer(kept)


@dataclass(frozen=True)
class ArchCount:
    """Per architecture: the nodes, those taking pods (Ready, not cordoned), and those that fit the pod."""

    total: int = 0
    ready: int = 0
    matching: int = 0


@dataclass(frozen=True)
class NodeFit:
    """The cluster's Nodes against one pod's allowed set (:func:`fit`)."""

    allowed: tuple[str, ...]
    """The allowed (OS/architecture) pairs, as users read them."""
    total: int
    matching: int
    by_architecture: Mapping[str, ArchCount] = field(default_factory=dict)
    kept_off: tuple[str, ...] = ()
    """Why nodes of an allowed platform take no pod of this one (``3 arm64 nodes are tainted …``)."""

    @property
    def satisfiable(self) -> bool:
        return self.matching > 0

    def missing(self) -> str:
        """One line naming what no node offers: ``no Ready linux/arm64 node; 3 arm64 nodes are tainted …``."""
        wanted = " or ".join(self.allowed) if self.allowed else "allowed"
        return "; ".join((f"no Ready {wanted} node", *self.kept_off))

    def as_data(self) -> dict[str, Any]:
        """``{total, matching, by_architecture: {ARCH: {total, ready, matching}}}`` (``noe why -o json``)."""
        return {
            "total": self.total,
            "matching": self.matching,
            "by_architecture": {
                arch: {"total": c.total, "ready": c.ready, "matching": c.matching}
                for arch, c in sorted(self.by_architecture.items())
            },
        }


def _nodes(count: int, arch: str) -> str:
    return f"{count} {arch} node{'s are' if count != 1 else ' is'}"


def fit(
    allowed: Offer, nodes: Iterable[NodeFacts], tolerations: Sequence[Mapping[str, Any]], *, levels: bool
) -> NodeFit:
    """Count the nodes ``allowed`` accepts that take pods and whose taints ``tolerations`` tolerate.

    ``levels``: amd64 nodes carry x86-64 level labels (``--x86-64-levels nfd``), so a level need counts.
    """
    totals: Counter[str] = Counter()
    ready: Counter[str] = Counter()
    matching: Counter[str] = Counter()
    not_ready: Counter[str] = Counter()
    cordoned: Counter[str] = Counter()
    tainted: Counter[tuple[str, str]] = Counter()
    other_build: Counter[str] = Counter()
    pairs = {pair for pair in allowed if not allowed[pair].empty}
    for node in nodes:
        arch = node.platform.architecture or "unknown"
        totals[arch] += 1
        if node.takes_pods:
            ready[arch] += 1
        if (node.platform.os, node.platform.architecture) not in pairs:
            continue
        if not accepts(allowed, node.platform, levels=levels):
            other_build[arch] += 1
        elif not node.ready:
            not_ready[arch] += 1
        elif node.unschedulable:
            cordoned[arch] += 1
        elif blocking := untolerated(tolerations, node.taints):
            tainted[(arch, taint_text(blocking[0]))] += 1
        else:
            matching[arch] += 1
    kept_off = [
        *(f"{_nodes(n, arch)} tainted {taint}" for (arch, taint), n in sorted(tainted.items())),
        *(f"{_nodes(n, arch)} not Ready" for arch, n in sorted(not_ready.items())),
        *(f"{_nodes(n, arch)} cordoned" for arch, n in sorted(cordoned.items())),
        *(
            f"{_nodes(n, arch)} of a Windows build or x86-64 level the images lack"
            for arch, n in sorted(other_build.items())
        ),
    ]
    shown = tuple(f"{os_name}/{arch}" for os_name, arch in sorted(pairs))
    by_arch = {arch: ArchCount(totals[arch], ready[arch], matching[arch]) for arch in totals}
    for _, arch in pairs:
        by_arch.setdefault(arch, ArchCount())
    return NodeFit(shown, sum(totals.values()), sum(matching.values()), by_arch, tuple(kept_off))


__all__ = ["ArchCount", "NodeFacts", "NodeFit", "accepts", "fit", "narrowed"]
