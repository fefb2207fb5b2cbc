"""Policy settings and the flag syntax operators write them in.

Values are normalised as they are built (``x86_64`` → ``amd64``, lists →
frozensets) so the policy compares like with like; :meth:`PolicySettings.validate`
rejects combinations that cannot work, so start-up stops instead of the webhook
misplacing pods later.

``--arch-tolerations`` syntax, one entry per architecture taint, comma separated::

    arch=key=value:effect   Equal toleration        arm64=arch=arm64:NoSchedule
    arch=key:effect         Exists toleration       arm64=arch:NoSchedule
    arch=key=value          Equal, every effect     arm64=arch=arm64
    arch=key                Exists, every effect    arm64=dedicated

An omitted effect produces a toleration without ``effect``, which Kubernetes
reads as "all effects" (NoSchedule, PreferNoSchedule and NoExecute).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from noe_core.errors import InvalidSettings
from noe_core.image.offer import PlatformScope
from noe_core.image.platform import normalize_arch_name, normalize_os
from noe_core.name.kubernetes import is_arch_name, is_dns_subdomain, is_label_key, is_label_value
from noe_core.util.comma_list import parse_comma_list

PREFERRED_ARCH_LABEL = "arch.noe.adevinta.com/preferred"
"""Pod label through which a pod overrides the configured preferred architecture."""

PreferenceMode = Literal["soft", "required"]
PREFERENCE_MODES: tuple[PreferenceMode, ...] = ("soft", "required")
OnLookupFailure = Literal["allow", "gate"]
ON_LOOKUP_FAILURE: tuple[OnLookupFailure, ...] = ("allow", "gate")
X86_64Levels = Literal["off", "nfd"]
X86_64_LEVELS: tuple[X86_64Levels, ...] = ("off", "nfd")
NOTHING_SCHEDULABLE: frozenset[str] = frozenset({""})
"""``schedulable_archs`` when placement policies' ``schedulableArchitectures`` share no architecture.

An empty set means "any" (the flag's default), so the empty intersection needs a value of its own: the
empty name, which no image entry and no node has, so every image offers nothing and the pod is denied.
"""
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _check_arch(name: str, what: str) -> None:
    if not is_arch_name(name):
        raise InvalidSettings(f"{what}: {name!r} is not an architecture name such as amd64 or arm64")


@dataclass(frozen=True)
class ArchToleration:
    """The toleration to add to pods allowed on ``arch``, for nodes tainted ``key[=value]:effect``.

    ``value`` ``None`` means operator ``Exists``; ``effect`` ``""`` means every effect.
    """

    arch: str
    key: str
    value: str | None = None
    effect: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "arch", normalize_arch_name(self.arch))

    @property
    def operator(self) -> str:
        return "Exists" if self.value is None else "Equal"

    def to_toleration(self) -> dict[str, str]:
        """The pod-spec toleration, with only the fields that carry meaning."""
        out = {"key": self.key, "operator": self.operator}
        if self.value is not None:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        return out

    def validate(self) -> None:
        _check_arch(self.arch, "--arch-tolerations")
        if not is_label_key(self.key):
            raise InvalidSettings(f"--arch-tolerations: {self.key!r} is not a valid taint key")
        if self.value is not None and not is_label_value(self.value):
            raise InvalidSettings(f"--arch-tolerations: {self.value!r} is not a valid taint value")
        if self.effect and self.effect not in TAINT_EFFECTS:
            raise InvalidSettings(
                f"--arch-tolerations: effect {self.effect!r} must be one of {', '.join(TAINT_EFFECTS)}"
            )

    def __str__(self) -> str:
        text = f"{self.arch}={self.key}"
        if self.value is not None:
            text += f"={self.value}"
        if self.effect:
            text += f":{self.effect}"
        return text


def parse_arch_tolerations(text: str) -> tuple[ArchToleration, ...]:
    """Parse ``--arch-tolerations`` (see the module docstring for the syntax)."""
    out: list[ArchToleration] = []
    for entry in parse_comma_list(text):
        arch, sep, rest = entry.partition("=")
        if not sep or not arch.strip() or not rest:
            raise InvalidSettings(
                f"--arch-tolerations: {entry!r} must read arch=key=value:effect, e.g. arm64=arch=arm64:NoSchedule"
            )
        effect = ""
        if ":" in rest:
            rest, effect = rest.rsplit(":", 1)
            if not effect:
                raise InvalidSettings(f"--arch-tolerations: {entry!r} has an empty effect after ':'")
        key, sep, value = rest.partition("=")
        toleration = ArchToleration(arch.strip(), key, value if sep else None, effect)
        toleration.validate()
        if toleration not in out:
            out.append(toleration)
    return tuple(out)


@dataclass(frozen=True)
class WeightedArchitecture:
    """A preferred architecture and the weight of its preferred scheduling term (1 to 100)."""

    architecture: str
    weight: int


@dataclass(frozen=True)
class PolicySettings:
    """What the placement policy needs to know about the cluster and the operator's wishes.

    ``preferences``, when set (by placement policies, ``docs/policies.md``),
    lists the preferred architectures with their weights and replaces
    ``preferred_arch`` / ``preferred_arch_weight``; :attr:`preferred` is the
    list the policy applies either way. ``system_os`` lists the nodes' OSes
    (a string is read as a comma-separated list); ``x86_64_levels`` says whether
    amd64 nodes carry node-feature-discovery's level labels (``nfd``) or not (``off``).
    """

    preferred_arch: str = "amd64"
    schedulable_archs: frozenset[str] = field(default_factory=frozenset)
    system_os: tuple[str, ...] = ("linux",)
    match_node_labels: tuple[str, ...] = ()
    strict_namespaces: frozenset[str] = field(default_factory=frozenset)
    arch_tolerations: tuple[ArchToleration, ...] = ()
    preference_mode: PreferenceMode = "soft"
    preferred_arch_weight: int = 100
    preferences: tuple[WeightedArchitecture, ...] | None = None
    on_lookup_failure: OnLookupFailure = "allow"
    x86_64_levels: X86_64Levels = "off"
    fallback_arch: str = ""
    """Rule 13a (``--fallback-arch``, ``fallbackArchitecture``): the architecture a pod is required onto when an
    image could not be inspected; empty: none."""

    def __post_init__(self) -> None:
        # Accept any iterable (tests and callers pass lists) but store hashable, normalised values.
        object.__setattr__(
            self, "preferred_arch", normalize_arch_name(self.preferred_arch) if self.preferred_arch else ""
        )
        if self.preferences is not None:
            object.__setattr__(self, "preferences", tuple(self.preferences))
        object.__setattr__(self, "schedulable_archs", frozenset(normalize_arch_name(a) for a in self.schedulable_archs))
        oses: str | tuple[str, ...] = self.system_os
        listed = parse_comma_list(oses) if isinstance(oses, str) else tuple(oses)
        object.__setattr__(self, "system_os", tuple(dict.fromkeys(normalize_os(name) for name in listed)))
        object.__setattr__(self, "match_node_labels", tuple(dict.fromkeys(self.match_node_labels)))
        object.__setattr__(self, "strict_namespaces", frozenset(self.strict_namespaces))
        object.__setattr__(self, "arch_tolerations", tuple(self.arch_tolerations))
        if self.fallback_arch:
            object.__setattr__(self, "fallback_arch", normalize_arch_name(self.fallback_arch))

    def validate(self) -> PolicySettings:
        """Raise :class:`InvalidSettings` for settings that cannot work; return ``self`` otherwise."""
        for arch in sorted(self.schedulable_archs):
            _check_arch(arch, "--cluster-schedulable-archs")
        if self.preferred_arch:
            _check_arch(self.preferred_arch, "--preferred-arch")
            if self.schedulable_archs and self.preferred_arch not in self.schedulable_archs:
                raise InvalidSettings(
                    f"--preferred-arch {self.preferred_arch} is not in --cluster-schedulable-archs "
                    f"{','.join(sorted(self.schedulable_archs))}: add it there or change the preference"
                )
        if self.fallback_arch:
            _check_arch(self.fallback_arch, "--fallback-arch")
            if self.schedulable_archs and self.fallback_arch not in self.schedulable_archs:
                raise InvalidSettings(
                    f"--fallback-arch {self.fallback_arch} is not in --cluster-schedulable-archs "
                    f"{','.join(sorted(self.schedulable_archs))}: a pod could never be placed there"
                )
        if not self.system_os:
            raise InvalidSettings("--system-os: name at least one OS, such as linux")
        for name in self.system_os:
            if not is_arch_name(name):
                raise InvalidSettings(f"--system-os: {name!r} is not an OS name such as linux or windows")
        if self.x86_64_levels not in X86_64_LEVELS:
            raise InvalidSettings(f"--x86-64-levels: {self.x86_64_levels!r} must be 'off' or 'nfd'")
        for key in self.match_node_labels:
            if not is_label_key(key):
                raise InvalidSettings(f"--match-node-labels: {key!r} is not a valid label key")
        for namespace in self.strict_namespaces:
            if not is_dns_subdomain(namespace):
                raise InvalidSettings(f"--strict-namespaces: {namespace!r} is not a namespace name")
        for toleration in self.arch_tolerations:
            toleration.validate()
        if self.preference_mode not in PREFERENCE_MODES:
            raise InvalidSettings(f"--preference-mode: {self.preference_mode!r} must be 'soft' or 'required'")
        weight = self.preferred_arch_weight
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise InvalidSettings(f"--preferred-arch-weight: {weight!r} must be an integer from 1 to 100")
        return self

    @property
    def preferred(self) -> tuple[WeightedArchitecture, ...]:
        """The preferred architectures in list order: ``preferences``, else the flags' one (or none)."""
        if self.preferences is not None:
            return self.preferences
        if not self.preferred_arch:
            return ()
        return (WeightedArchitecture(self.preferred_arch, self.preferred_arch_weight),)

    @cached_property
    def scope(self) -> PlatformScope:
        """The nodes the cluster can have, as :mod:`noe_core.image.offer` reads them (computed once)."""
        return PlatformScope(self.system_os, self.schedulable_archs, self.x86_64_levels == "nfd")

    def is_schedulable(self, arch: str) -> bool:
        """True when the cluster may run ``arch`` (an empty schedulable list allows any; see
        :data:`NOTHING_SCHEDULABLE` for the one that allows none)."""
        return not self.schedulable_archs or arch in self.schedulable_archs
