"""What a pod needs of a node's platform: the intersection of its images' offers, and the node-selector terms.

The contract (``docs/placement.md``, rules 6 and 14-16): a pod may run on a node
only if every image has an entry usable there, so the pod's offer is the
intersection of its images' offers (:mod:`noe_core.image.offer`) over (OS,
architecture) pairs (:func:`shared`), and its required node affinity must select
exactly those nodes. :func:`node_terms` writes it as few terms as it can: one
per distinct requirement (Windows builds, level), each naming the OSes and
architectures that share it. In the common case (one OS, no Windows build,
levels off) that is the one term ``kubernetes.io/arch In [common]``, as before
these rules existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from noe_core.image.node_platform import ARCH_LABEL, LEVEL_LABEL_VALUE, OS_LABEL, WINDOWS_BUILD_LABEL, level_label
from noe_core.image.offer import Offer, Pair, PairOffer, PlatformScope
from noe_core.placement.scheduling import Requirement, requirement


def shared(offers: Sequence[Offer]) -> Offer:
    """Rule 6 over (OS, architecture) pairs: what every offer accepts; empty when nothing is shared."""
    if not offers:
        return Offer()
    if len(offers) == 1:
        return offers[0]
    plain, pairs = True, offers[0].pairs
    for offer in offers:
        plain = plain and offer.plain
        pairs &= offer.pairs
    if plain:
        return Offer.anywhere(pairs)
    result: dict[Pair, PairOffer] = dict(offers[0])
    for offer in offers[1:]:
        narrowed: dict[Pair, PairOffer] = {}
        for pair, mine in result.items():
            theirs = offer.get(pair)
            if theirs is None:
                continue
            both = mine & theirs
            if not both.empty:
                narrowed[pair] = both
        result = narrowed
    return Offer(result)


@dataclass(frozen=True, order=True)
class NodeTerm:
    """One required node-selector term noe writes: nodes of these OSes and architectures, of one of
    these Windows builds (empty: any), at this x86-64 level or above."""

    oses: tuple[str, ...]
    architectures: tuple[str, ...]
    builds: tuple[str, ...] = ()
    level: int = 1

    def expressions(self, scope: PlatformScope) -> list[Requirement]:
        """The term's ``matchExpressions``: ``kubernetes.io/os`` only when the cluster has several OSes."""
        out = []
        if scope.multi_os:
            out.append(requirement(OS_LABEL, "In", list(self.oses)))
        out.append(requirement(ARCH_LABEL, "In", list(self.architectures)))
        if self.builds:
            out.append(requirement(WINDOWS_BUILD_LABEL, "In", list(self.builds)))
        if self.level > 1:
            out.append(requirement(level_label(self.level), "In", [LEVEL_LABEL_VALUE]))
        return out


def node_terms(offer: Offer) -> tuple[NodeTerm, ...]:
    """The fewest terms this function finds whose union is exactly the nodes ``offer`` accepts.

    Each pair gives one clause per distinct (builds, level) it accepts; clauses of
    one OS with the same requirement share a term across architectures, and then
    terms that differ only by OS share one across OSes.
    """
    clauses: dict[tuple[str, tuple[str, ...], int], set[str]] = {}
    for (os_name, arch), pair_offer in offer.items():
        if pair_offer.any_build is not None:
            clauses.setdefault((os_name, (), pair_offer.any_build), set()).add(arch)
        by_level: dict[int, list[str]] = {}
        for build, level in pair_offer.builds:
            by_level.setdefault(level, []).append(build)
        for level, named in by_level.items():
            clauses.setdefault((os_name, tuple(sorted(named)), level), set()).add(arch)
    merged: dict[tuple[tuple[str, ...], int, tuple[str, ...]], list[str]] = {}
    for (os_name, builds, level), archs in clauses.items():
        merged.setdefault((builds, level, tuple(sorted(archs))), []).append(os_name)
    return tuple(
        sorted(NodeTerm(tuple(sorted(oses)), archs, builds, level) for (builds, level, archs), oses in merged.items())
    )
