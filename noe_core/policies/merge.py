"""Which settings a pod gets: the flags, then every matching placement policy in order (``docs/policies.md``).

:class:`PolicySet` holds the valid policies, indexed so that an admission only
looks at the cluster policies whose ``namespaceSelector`` matches its namespace
(computed once per distinct set of namespace labels) and at the namespaced
policies of its own namespace; with a thousand policies in the cluster the
merge stays off the hot path. :meth:`PolicySet.settings_for` is the one merge:
the webhook, ``noe mutate``, ``noe controller`` and users' tests call it.

Merge rules: each field a policy sets replaces the earlier value, except
``schedulableArchitectures`` (intersected, so no policy widens
``--cluster-schedulable-archs``) and ``strict`` (once true, true: no policy
turns a strict namespace lax). ``imagePlatforms`` are layered over the flag's
file (:class:`~noe_core.image.declared.LayeredPlatforms`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

from noe_core.image.declared import Declarations, StaticPlatforms, layered
from noe_core.policies.objects import CLUSTER_KIND, PlacementPolicy, PolicyRef, Rollout
from noe_core.policies.settings import NOTHING_SCHEDULABLE, PolicySettings

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every Namespace (its name): selectors may use it, offline too."""

FLAGS = "flags"

FIELD_FLAGS = {
    "preferredArchitectures": "--preferred-arch",
    "preferenceMode": "--preference-mode",
    "schedulableArchitectures": "--cluster-schedulable-archs",
    "strict": "--strict-namespaces",
    "onLookupFailure": "--on-lookup-failure",
    "fallbackArchitecture": "--fallback-arch",
    "matchNodeLabels": "--match-node-labels",
    "architectureTolerations": "--arch-tolerations",
    "imagePlatforms": "--image-platforms",
}
"""Each policy field and the flag it overrides, for ``noe policy explain``."""


@dataclass(frozen=True)
class MergedSettings:
    """The settings one pod gets, and where each came from.

    ``applied`` lists the matching valid policies in application order (the
    ``arch.noe.adevinta.com/policies`` annotation); ``sources`` maps each policy
    field to the flag or policies that set it (``schedulableArchitectures`` may
    name several: it is their intersection).
    """

    settings: PolicySettings
    applied: tuple[PolicyRef, ...] = ()
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    declared: Declarations | None = None
    rollout: Rollout | None = None
    rollout_source: PolicyRef | None = None

    @property
    def annotation(self) -> str:
        """``ClusterPlacementPolicy/base,PlacementPolicy/team-a/arm-first`` (empty when none applied)."""
        return ",".join(self.names)

    @cached_property
    def names(self) -> tuple[str, ...]:
        """``applied`` as the log line and Events name them, made once per (remembered) merge."""
        return tuple(str(ref) for ref in self.applied)

    @cached_property
    def trail(self) -> str:
        """The pod's ``arch.noe.adevinta.com/policies`` value (:func:`trail`), made once: a merge is
        remembered and handed to every pod it applies to."""
        return trail(self.applied)


MAX_TRAIL = 4096
"""Characters of the ``arch.noe.adevinta.com/policies`` annotation (the API server allows 256 KiB for all of
a pod's annotations)."""


def trail(applied: Iterable[PolicyRef]) -> str:
    """The policies in application order, cut at :data:`MAX_TRAIL` characters (``…,+N more``)."""
    names = [str(ref) for ref in applied]
    value = ",".join(names)
    if len(value) <= MAX_TRAIL:
        return value
    kept: list[str] = []
    size = 0
    for index, name in enumerate(names):
        more = f",+{len(names) - index} more"
        if size + len(name) + 1 + len(more) > MAX_TRAIL:
            return ",".join(kept) + more
        kept.append(name)
        size += len(name) + 1
    return ",".join(kept)  # pragma: no cover - the whole value did not fit, so the loop returns


def namespace_labels(namespace: str, labels: Mapping[str, str] | None) -> dict[str, str]:
    """A namespace's labels as the API server serves them: its own, plus ``kubernetes.io/metadata.name``."""
    return {**(labels or {}), NAMESPACE_NAME_LABEL: namespace}


class PolicySet:
    """The valid policies of a cluster (or of files), indexed by namespace."""

    def __init__(self, policies: Iterable[PlacementPolicy] = ()) -> None:
        ordered = sorted(policies, key=lambda p: p.order)
        self.cluster: tuple[PlacementPolicy, ...] = tuple(p for p in ordered if p.ref.kind == CLUSTER_KIND)
        namespaced: dict[str, list[PlacementPolicy]] = {}
        for policy in ordered:
            if policy.ref.kind != CLUSTER_KIND:
                namespaced.setdefault(policy.ref.namespace, []).append(policy)
        self.namespaced: dict[str, tuple[PlacementPolicy, ...]] = {k: tuple(v) for k, v in namespaced.items()}
        self._count = len(ordered)
        # which cluster policies a namespace's labels select depends only on those with a selector: the
        # answer per outcome of those few is kept, so a namespace never seen before costs their matching alone
        self._selective = tuple(i for i, p in enumerate(self.cluster) if not p.namespace_selector.everything)
        self._by_outcome: dict[tuple[int, ...], tuple[tuple[PlacementPolicy, bool], ...]] = {}
        self._by_labels: dict[frozenset[tuple[str, str]], tuple[tuple[PlacementPolicy, bool], ...]] = {}
        self._merged: dict[tuple[int, str | None, tuple[int, ...]], tuple[PolicySettings, MergedSettings]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    @property
    def reads_namespace_labels(self) -> bool:
        """True when some cluster policy's namespaceSelector reads labels (a namespace's name alone is known)."""
        return any(not policy.namespace_selector.everything for policy in self.cluster)

    def __bool__(self) -> bool:
        return len(self) > 0

    def _cluster_for(self, labels: Mapping[str, str]) -> tuple[tuple[PlacementPolicy, bool], ...]:
        """Cluster policies whose namespaceSelector matches, each with whether it selects every pod
        (no ``podSelector`` to evaluate per admission), computed once per distinct label set."""
        key = frozenset(labels.items())
        found = self._by_labels.get(key)
        if found is None:
            cluster = self.cluster
            outcome = tuple(i for i in self._selective if cluster[i].namespace_selector.matches(labels))
            found = self._by_outcome.get(outcome)
            if found is None:
                chosen = set(outcome)
                found = tuple(
                    (p, p.pod_selector.everything)
                    for i, p in enumerate(cluster)
                    if i in chosen or p.namespace_selector.everything
                )
            with self._lock:
                if len(self._by_labels) > 4096:  # namespaces come and go: a bound, not a leak
                    self._by_labels.clear()
                if len(self._by_outcome) > 4096:
                    self._by_outcome.clear()
                self._by_labels[key] = found
                self._by_outcome[outcome] = found
        return found

    def matching(
        self, namespace: str, namespace_labels_: Mapping[str, str], pod_labels: Mapping[str, str]
    ) -> tuple[PlacementPolicy, ...]:
        """The policies that apply to a pod, in application order."""
        found = [p for p, every in self._cluster_for(namespace_labels_) if every or p.pod_selector.matches(pod_labels)]
        found += [p for p in self.namespaced.get(namespace, ()) if p.pod_selector.matches(pod_labels)]
        return tuple(found)

    def settings_for(
        self,
        base: PolicySettings,
        *,
        namespace: str,
        namespace_labels: Mapping[str, str] | None,
        pod_labels: Mapping[str, str],
        declared: StaticPlatforms | None = None,
    ) -> MergedSettings:
        """The merge: ``base`` (the flags) with every matching policy applied in order.

        Pods of one namespace matched by the same policies get the same merged settings: the merge is
        remembered (per ``base`` value, bounded), so an admission pays for the matching alone.
        """
        labels = _with_name(namespace, namespace_labels)
        matched = self.matching(namespace, labels, pod_labels)
        if not matched:
            return MergedSettings(base, declared=declared)
        if declared is not None:
            return merge(base, matched, namespace=namespace, declared=declared)
        # the policies live as long as this set; the namespace changes the merge only through strictness
        strict = namespace in base.strict_namespaces or any(p.strict for p in matched)
        key = (id(base), namespace if strict else None, tuple(id(p) for p in matched))
        found = self._merged.get(key)
        if found is not None and found[0] is base:
            return found[1]
        merged = merge(base, matched, namespace=namespace)
        with self._lock:
            if len(self._merged) > 4096:  # pods' label combinations come and go: a bound, not a leak
                self._merged.clear()
            self._merged[key] = (base, merged)
        return merged


class PolicySource(Protocol):
    """Where an admission gets a pod's merged settings: :class:`Policies` (files, tests) or the webhook's
    watch of the cluster (``noe_web.kube.policy_watch``), which both end in :meth:`PolicySet.settings_for`."""

    def settings_for(
        self, base: PolicySettings, *, namespace: str, pod_labels: Mapping[str, str]
    ) -> MergedSettings: ...


@dataclass(frozen=True)
class Policies:
    """Placement policies as an admission reads them: the valid ones, indexed, and the namespaces' labels.

    A value: the webhook's watch publishes a new one when a policy changes, ``noe mutate --policy``
    builds one from files, users' tests from :mod:`noe_core.testing`'s builders. A namespace it has no
    labels for still has its ``kubernetes.io/metadata.name``.
    """

    policy_set: PolicySet = field(default_factory=PolicySet)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def settings_for(self, base: PolicySettings, *, namespace: str, pod_labels: Mapping[str, str]) -> MergedSettings:
        if not self.policy_set:
            return MergedSettings(base)
        return self.policy_set.settings_for(
            base, namespace=namespace, namespace_labels=self.namespaces.get(namespace), pod_labels=pod_labels
        )


def _with_name(namespace: str, labels: Mapping[str, str] | None) -> Mapping[str, str]:
    if labels is not None and labels.get(NAMESPACE_NAME_LABEL) == namespace:
        return labels
    return namespace_labels(namespace, labels)


def narrowed(current: frozenset[str], wanted: frozenset[str]) -> frozenset[str]:
    """``schedulableArchitectures`` only narrow: ``wanted`` within ``current`` (empty: any), never wider.

    Disjoint lists leave nothing schedulable (:data:`NOTHING_SCHEDULABLE`), never "any".
    """
    if not current:
        return wanted
    return (current & wanted) or NOTHING_SCHEDULABLE


def merge(
    base: PolicySettings,
    policies: Iterable[PlacementPolicy],
    *,
    namespace: str,
    declared: StaticPlatforms | None = None,
) -> MergedSettings:
    """Apply ``policies`` (already matched and ordered) to ``base``; pure, for users' tests too."""
    policies = tuple(policies)
    if not policies:
        return MergedSettings(base, declared=declared)
    preferences = base.preferred
    mode = base.preference_mode
    schedulable = base.schedulable_archs
    strict = namespace in base.strict_namespaces
    on_failure = base.on_lookup_failure
    fallback = base.fallback_arch
    match_labels = base.match_node_labels
    tolerations = base.arch_tolerations
    layers = [declared] if declared is not None else []
    rollout: Rollout | None = None
    rollout_source: PolicyRef | None = None
    sources: dict[str, list[str]] = {key: [flag] for key, flag in FIELD_FLAGS.items()}
    for policy in policies:
        name = str(policy.ref)
        if policy.preferred_architectures is not None:
            preferences, sources["preferredArchitectures"] = policy.preferred_architectures, [name]
        if policy.preference_mode is not None:
            mode, sources["preferenceMode"] = policy.preference_mode, [name]
        if policy.schedulable_architectures is not None:
            schedulable = narrowed(schedulable, policy.schedulable_architectures)
            sources["schedulableArchitectures"].append(name)
        if policy.strict:
            if not strict:
                sources["strict"] = [name]
            strict = True
        if policy.on_lookup_failure is not None:
            on_failure, sources["onLookupFailure"] = policy.on_lookup_failure, [name]
        if policy.fallback_architecture is not None:
            fallback, sources["fallbackArchitecture"] = policy.fallback_architecture, [name]
        if policy.match_node_labels is not None:
            match_labels, sources["matchNodeLabels"] = policy.match_node_labels, [name]
        if policy.architecture_tolerations is not None:
            tolerations, sources["architectureTolerations"] = policy.architecture_tolerations, [name]
        if policy.image_platforms is not None:
            layers.append(policy.image_platforms)
            sources["imagePlatforms"].append(name)
        if policy.rollout is not None:
            rollout, rollout_source = policy.rollout, policy.ref
    settings = replace(
        base,
        preferences=preferences,
        preference_mode=mode,
        schedulable_archs=schedulable,
        strict_namespaces=base.strict_namespaces | {namespace} if strict else base.strict_namespaces,
        on_lookup_failure=on_failure,
        fallback_arch=fallback,
        match_node_labels=match_labels,
        arch_tolerations=tolerations,
    )
    return MergedSettings(
        settings,
        applied=tuple(p.ref for p in policies),
        sources={key: tuple(value) for key, value in sources.items()},
        declared=layered(*layers),
        rollout=rollout,
        rollout_source=rollout_source,
    )
