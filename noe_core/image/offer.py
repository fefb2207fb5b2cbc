"""What an image offers: the nodes of each (OS, architecture) it runs on, with their Windows builds and levels.

The contract (``docs/placement.md``, rules 4 and 14-16): an image runs on a node
only if it has an entry usable there
(:func:`noe_core.image.node_platform.usable_on`), among the nodes the cluster
can have (:class:`PlatformScope`: the system OSes, the schedulable
architectures, whether nodes carry x86-64 level labels).

Per (OS, architecture) pair, an image's entries give a :class:`PairOffer`: the
Windows builds and x86-64 levels of that pair's nodes it runs on
(:func:`image_offer`); an :class:`Offer` holds them for every pair, and
:func:`describe` shows it to users. What a pod needs, the intersection of its
images' offers and the node-selector terms that select it, is
:mod:`noe_core.placement.needs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from noe_core.image.node_platform import AMD64, WINDOWS

Pair: TypeAlias = tuple[str, str]
"""(OS, architecture), normalised as node labels write them."""

EntryFacts: TypeAlias = tuple[str, str, "str | None", "int | None"]
"""One usable image entry as an offer reads it: OS (``""``: any), architecture, Windows build
(``""``: any, ``None``: an ``os.version`` that is not a Windows version), x86-64 level (``None``:
an amd64 variant that names none; 1 on other architectures)."""

_NO_LEVEL = 99


@dataclass(frozen=True)
class PlatformScope:
    """The nodes a cluster can have, as the settings say.

    ``oses`` (``--system-os``; entries of other OSes are dropped, one without OS
    stands for each), ``architectures`` (``--cluster-schedulable-archs``; empty:
    any) and ``levels`` (``--x86-64-levels nfd``: amd64 nodes carry level labels).
    """

    oses: tuple[str, ...] = ("linux",)
    architectures: frozenset[str] = field(default_factory=frozenset)
    levels: bool = False
    multi_os: bool = field(init=False, compare=False)
    """More than one OS: terms then name ``kubernetes.io/os`` (rule 14)."""
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Read for each image of each admission (a cache key of every image's offers): computed once.
        object.__setattr__(self, "multi_os", len(self.oses) > 1)
        object.__setattr__(self, "_hash", hash((self.oses, self.architectures, self.levels)))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True)
class PairOffer:
    """The nodes of one (OS, architecture) an image, or a pod, runs on.

    ``any_build``: the lowest x86-64 level it needs on a node of any Windows build
    (``None``: no entry fits every build). ``builds``: per Windows build an entry
    names, the lowest level it needs there, listed only where that is below
    ``any_build`` (a build not listed needs ``any_build``). Levels are 1 where they
    do not apply (other architectures, levels off).
    """

    any_build: int | None = 1
    builds: tuple[tuple[str, int], ...] = ()

    def need(self, build: str) -> int | None:
        """The level needed on a node of ``build`` (``None``: that build cannot run it)."""
        for name, level in self.builds:
            if name == build:
                return level
        return self.any_build

    @property
    def empty(self) -> bool:
        """No node of the pair can run it."""
        return self.any_build is None and not self.builds

    def __and__(self, other: PairOffer) -> PairOffer:
        """The nodes both run on: the builds both accept, at the higher of the two levels."""
        if self is other or self == other:
            return self
        any_build = None if self.any_build is None or other.any_build is None else max(self.any_build, other.any_build)
        builds: dict[str, int] = {}
        for name in sorted({name for name, _ in (*self.builds, *other.builds)}):
            mine, theirs = self.need(name), other.need(name)
            if mine is not None and theirs is not None:
                builds[name] = max(mine, theirs)
        return _offer(any_build, builds)


ANYWHERE = PairOffer()
"""Every node of the pair: the offer of an ordinary entry (no build, level 1)."""


class Offer(dict[Pair, PairOffer]):
    """An image's (or a pod's) offer: the (OS, architecture) pairs it runs on, each with its builds and levels.

    Built once per image and settings (the lookup's value keeps it), so what every
    admission reads of it is computed here once: :attr:`pairs`, :attr:`plain` (no
    build, no level anywhere: the common case) and :attr:`architectures`.
    """

    __slots__ = ("_shown", "architectures", "flagged", "note", "pairs", "plain")

    def __init__(self, pairs: Mapping[Pair, PairOffer] | None = None) -> None:
        super().__init__(pairs or {})
        self.pairs: frozenset[Pair] = frozenset(self)
        self.plain: bool = all(pair_offer is ANYWHERE for pair_offer in self.values())
        self.architectures: tuple[str, ...] = tuple(sorted({arch for _, arch in self.pairs}))
        self._shown: tuple[bool, str] | None = None
        self.note = ""
        """An image's offer: what the admission's reasons say of it (set by the lookup value that keeps it)."""
        self.flagged = False
        """An image's offer: its entries call for a warning or a level check (see ``note_images``)."""

    def shown(self, scope: PlatformScope) -> str:
        """:func:`describe` as one line (``none`` when empty), kept: an image's offer is described in
        the reasons of every admission that names the image."""
        if self._shown is None or self._shown[0] != scope.multi_os:
            self._shown = (scope.multi_os, ", ".join(describe(self, scope)) or "none")
        return self._shown[1]

    def only(self, architectures: frozenset[str]) -> Offer:
        """The part of this offer on ``architectures`` (a rollout group's), builds and levels kept."""
        return Offer({pair: offer for pair, offer in self.items() if pair[1] in architectures})

    @classmethod
    def anywhere(cls, pairs: frozenset[Pair]) -> Offer:
        """Every node of ``pairs``, whatever its build or level (the common case's intersection: no loop
        over the pairs beyond the one that names the architectures)."""
        offer = cls.__new__(cls)
        dict.__init__(offer, dict.fromkeys(pairs, ANYWHERE))
        offer.pairs, offer.plain, offer._shown, offer.note, offer.flagged = pairs, True, None, "", False
        offer.architectures = tuple(sorted({arch for _, arch in pairs}))
        return offer


def _offer(any_build: int | None, builds: Mapping[str, int]) -> PairOffer:
    """The normal form: builds needing what any build needs are left to ``any_build``."""
    if any_build == 1 and not builds:
        return ANYWHERE
    listed = tuple(
        (name, level if any_build is None else min(level, any_build))
        for name, level in sorted(builds.items())
        if any_build is None or level < any_build
    )
    return PairOffer(any_build, listed)


def image_offer(entries: Iterable[EntryFacts], scope: PlatformScope) -> Offer:
    """The offer of one image's usable entries within ``scope`` (rule 4, with rules 14-16)."""
    any_levels: dict[Pair, int] = {}
    build_levels: dict[Pair, dict[str, int]] = {}
    for os_name, arch, build, level in entries:
        if not arch or (scope.architectures and arch not in scope.architectures):
            continue
        need = 1
        if scope.levels and arch == AMD64:
            if level is None:
                continue  # a variant that names no level: nothing says which node can run it
            need = level
        for target in (os_name,) if os_name else scope.oses:
            if target not in scope.oses:
                continue
            pair = (target, arch)
            if target == WINDOWS and build is None:
                continue  # an os.version that is not a Windows version fits no Windows node
            if target == WINDOWS and build:
                per_build = build_levels.setdefault(pair, {})
                per_build[build] = min(per_build.get(build, _NO_LEVEL), need)
            else:
                any_levels[pair] = min(any_levels.get(pair, _NO_LEVEL), need)
    return Offer(
        {
            pair: _offer(any_levels.get(pair), build_levels.get(pair, {}))
            for pair in dict.fromkeys([*any_levels, *build_levels])
        }
    )


def describe(offer: Offer, scope: PlatformScope) -> list[str]:
    """Each pair of an offer as users read it: ``amd64`` with one OS, ``linux/amd64`` with several, plus the
    Windows builds and the x86-64 level when they narrow it (``windows/amd64 build 10.0.20348``, ``amd64 v3+``)."""
    if not scope.multi_os and offer.plain:
        return list(offer.architectures)
    out = []
    for (os_name, arch), pair_offer in sorted(offer.items()):
        text = f"{os_name}/{arch}" if scope.multi_os else arch
        if pair_offer.any_build is None:
            text += " build " + "|".join(name for name, _ in pair_offer.builds)
        level = pair_offer.any_build if pair_offer.any_build is not None else min(lv for _, lv in pair_offer.builds)
        if level > 1:
            text += f" v{level}+"
        out.append(text)
    return out


def allowed_nodes(offer: Offer) -> list[dict[str, str | int | None]]:
    """The nodes ``offer`` accepts as data (``noe policy explain``, ``noe why``): one entry per (OS,
    architecture) and Windows build, with the x86-64 level needed there (``None``: any build, no level)."""
    out: list[dict[str, str | int | None]] = []
    for (os_name, arch), pair_offer in sorted(offer.items()):
        named = [(None, pair_offer.any_build)] if pair_offer.any_build is not None else []
        for build, level in (*named, *pair_offer.builds):
            shown = level if arch == AMD64 and level is not None and level > 1 else None
            out.append({"os": os_name, "architecture": arch, "windowsBuild": build, "level": shown})
    return out
