"""``ClusterPlacementPolicy`` and ``PlacementPolicy`` objects, read once into frozen values (the contract:
``docs/policies.md``).

:func:`read_policy` checks everything the CRD schema checks (so a policy read
from a file offline is judged as ``kubectl apply`` would judge it) and the
cross-field rules: an invalid policy raises :class:`InvalidPolicy` with the
CamelCase reason its ``Accepted`` condition carries and a message naming the
field and the value, and is then ignored whole — never half-applied.
Architecture names are normalised as the placement contract's rule 4 says
(``aarch64`` → ``arm64``); a name that is not a Go ``GOARCH`` value is refused.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from noe_core.errors import InvalidPolicy, InvalidReference, InvalidSelector, InvalidSettings
from noe_core.image.declared import StaticPlatforms
from noe_core.image.platform import ARCHITECTURE_ALIASES, KNOWN_ARCHITECTURES, normalize_arch_name
from noe_core.k8s.label_selector import EVERYTHING, LabelSelector, parse_label_selector
from noe_core.name.kubernetes import is_dns_subdomain, is_label_key
from noe_core.name.reference import parse_reference
from noe_core.policies.settings import (
    TAINT_EFFECTS,
    ArchToleration,
    OnLookupFailure,
    PreferenceMode,
    WeightedArchitecture,
)
from noe_core.util import fields
from noe_core.util.safe_load import MAX_DEPTH, TooComplex, check_depth

GROUP = "arch.noe.adevinta.com"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_KIND = "ClusterPlacementPolicy"
NAMESPACED_KIND = "PlacementPolicy"
KINDS = (CLUSTER_KIND, NAMESPACED_KIND)
PLURALS = {CLUSTER_KIND: "clusterplacementpolicies", NAMESPACED_KIND: "placementpolicies"}

MAX_PRIORITY = 1000
# The CRD's limits (deploy/crds.py reads them from here): more items than any real policy lists, so a hostile
# one is refused, offline exactly as by kubectl apply.
MAX_ARCHITECTURES = 16
"""Items of ``preferredArchitectures`` and ``schedulableArchitectures``."""
MAX_LABEL_KEYS = 64
"""Items of ``matchNodeLabels``."""
MAX_TOLERATIONS = 64
"""Items of ``architectureTolerations``."""
MAX_IMAGE_PLATFORMS = 1024
"""Items of ``imagePlatforms``."""
MAX_IMAGE_LENGTH = 512
"""Characters of an ``imagePlatforms`` image (or glob)."""
MAX_PLATFORMS_PER_IMAGE = 64
"""Platforms one ``imagePlatforms`` entry may list (its ``platforms`` field is free-form in the schema)."""

_SPEC_FIELDS = frozenset(
    {
        "priority",
        "namespaceSelector",
        "podSelector",
        "preferredArchitectures",
        "preferenceMode",
        "schedulableArchitectures",
        "strict",
        "onLookupFailure",
        "fallbackArchitecture",
        "matchNodeLabels",
        "architectureTolerations",
        "imagePlatforms",
        "rollout",
    }
)
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class PolicyRef:
    """Which object: kind, namespace (empty for the cluster kind), name, and the generation read."""

    kind: str
    name: str
    namespace: str = ""
    generation: int = 0

    def __str__(self) -> str:
        """``ClusterPlacementPolicy/base`` or ``PlacementPolicy/team-a/arm-first``, as the annotation lists it."""
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Rollout:
    """Move ``percent`` of the matched pods' admissions to ``architecture`` (the contract's "Rollout").

    ``rolled_back`` holds the workloads (``(namespace, "Deployment/web")``) that ``noe controller`` rolled
    back for this generation of the policy, read from its ``status.rollout``: their rollout acts as
    ``percent: 0``.
    """

    architecture: str
    percent: int
    rolled_back: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class PlacementPolicy:
    """A valid policy. ``None`` (or an empty tuple for lists that may be empty) means "field not set"."""

    ref: PolicyRef
    priority: int = 0
    namespace_selector: LabelSelector = EVERYTHING
    pod_selector: LabelSelector = EVERYTHING
    preferred_architectures: tuple[WeightedArchitecture, ...] | None = None
    preference_mode: PreferenceMode | None = None
    schedulable_architectures: frozenset[str] | None = None
    strict: bool | None = None
    on_lookup_failure: OnLookupFailure | None = None
    fallback_architecture: str | None = None
    """Rule 13a's architecture; ``""`` switches a flag's fallback off."""
    match_node_labels: tuple[str, ...] | None = None
    architecture_tolerations: tuple[ArchToleration, ...] | None = None
    image_platforms: StaticPlatforms | None = None
    rollout: Rollout | None = None

    @property
    def order(self) -> tuple[int, int, str]:
        """Application order: cluster policies first, then by priority ascending, then name ascending."""
        return (0 if self.ref.kind == CLUSTER_KIND else 1, self.priority, self.ref.name)

    def selects(self, namespace_labels: Mapping[str, str], pod_labels: Mapping[str, str]) -> bool:
        return self.namespace_selector.matches(namespace_labels) and self.pod_selector.matches(pod_labels)


def read_ref(doc: object) -> PolicyRef:
    """The identity of a policy document; raises :class:`InvalidPolicy` when even that cannot be read."""
    if not isinstance(doc, Mapping):
        raise InvalidPolicy("InvalidObject", f"a placement policy must be an object, not {fields.json_type(doc)}")
    kind = doc.get("kind")
    if kind not in KINDS:
        raise InvalidPolicy("InvalidObject", f"kind {kind!r} is not {CLUSTER_KIND} or {NAMESPACED_KIND}")
    if doc.get("apiVersion") != API_VERSION:
        raise InvalidPolicy("InvalidObject", f"{kind}: apiVersion {doc.get('apiVersion')!r} is not {API_VERSION}")
    metadata = fields.mapping(doc.get("metadata"), f"{kind}.metadata", error=_invalid("InvalidObject"))
    name = fields.string(metadata.get("name"), f"{kind}.metadata.name", required=True, error=_invalid("InvalidObject"))
    namespace = fields.string(metadata.get("namespace"), f"{kind}.metadata.namespace", error=_invalid("InvalidObject"))
    if not is_dns_subdomain(name):
        raise InvalidPolicy("InvalidObject", f"{kind}.metadata.name: {name!r} is not a DNS subdomain name")
    if kind == NAMESPACED_KIND and not namespace:
        raise InvalidPolicy("InvalidObject", f"{kind} {name}: metadata.namespace is missing")
    generation = fields.integer(
        metadata.get("generation"), f"{kind}.metadata.generation", error=_invalid("InvalidObject")
    )
    return PolicyRef(kind, name, namespace if kind == NAMESPACED_KIND else "", generation or 0)


def read_policy(doc: object) -> PlacementPolicy:
    """Read and validate a whole policy document; raises :class:`InvalidPolicy` (reason + message).

    A document nested deeper than any policy can be is refused first (``TooComplex``), as every
    hostile document is, before any field is read.
    """
    ref = read_ref(doc)
    assert isinstance(doc, Mapping)
    try:
        check_depth(doc, MAX_DEPTH)
    except TooComplex:
        raise InvalidPolicy("TooComplex", f"the object is nested more than {MAX_DEPTH} levels deep") from None
    spec = fields.mapping(doc.get("spec"), "spec", error=_invalid("InvalidField"))
    unknown = sorted(str(key) for key in spec if key not in _SPEC_FIELDS)
    if unknown:
        raise InvalidPolicy("UnknownField", f"spec.{unknown[0]}: unknown field")
    if ref.kind == NAMESPACED_KIND and "namespaceSelector" in spec:
        raise InvalidPolicy(
            "UnknownField",
            "spec.namespaceSelector: a PlacementPolicy applies to its own namespace only "
            "(select namespaces with a ClusterPlacementPolicy)",
        )
    priority = _integer(spec, "priority", "PriorityOutOfRange", low=0, high=MAX_PRIORITY)
    schedulable = _schedulable(spec)
    preferred = _preferred(spec)
    if preferred and schedulable is not None:
        outside = [p.architecture for p in preferred if p.architecture not in schedulable]
        if outside:
            raise InvalidPolicy(
                "PreferenceOutsideSchedulable",
                f"spec.preferredArchitectures: {outside[0]} is not in spec.schedulableArchitectures "
                f"({', '.join(sorted(schedulable))})",
            )
    return PlacementPolicy(
        ref=ref,
        priority=priority if priority is not None else 0,
        namespace_selector=_selector(spec, "namespaceSelector"),
        pod_selector=_selector(spec, "podSelector"),
        preferred_architectures=preferred,
        preference_mode=_choice(spec, "preferenceMode", ("soft", "required")),  # type: ignore[arg-type]
        schedulable_architectures=schedulable,
        strict=fields.boolean(spec.get("strict"), "spec.strict", error=_invalid("InvalidField")),
        on_lookup_failure=_choice(spec, "onLookupFailure", ("allow", "gate")),  # type: ignore[arg-type]
        fallback_architecture=_fallback(spec),
        match_node_labels=_label_keys(spec),
        architecture_tolerations=_tolerations(spec),
        image_platforms=_image_platforms(spec, ref),
        rollout=_rollout(spec, doc.get("status"), ref.generation),
    )


def _fallback(spec: Mapping[str, Any]) -> str | None:
    """``fallbackArchitecture``: an architecture (aliases normalised), or ``""`` (a flag's fallback off)."""
    value = spec.get("fallbackArchitecture")
    if value is None:
        return None
    if value == "":
        return ""
    return architecture(value, "spec.fallbackArchitecture")


def _invalid(reason: str) -> Any:
    return lambda message: InvalidPolicy(reason, message)


def _integer(spec: Mapping[str, Any], key: str, reason: str, *, low: int, high: int, where: str = "spec") -> int | None:
    value = fields.integer(spec.get(key), f"{where}.{key}", error=_invalid("InvalidField"))
    if value is not None and not low <= value <= high:
        raise InvalidPolicy(reason, f"{where}.{key}: {value} is not between {low} and {high}")
    return value


def _choice(spec: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str | None:
    value = spec.get(key)
    if value is None:
        return None
    if value not in allowed:
        raise InvalidPolicy("InvalidField", f"spec.{key}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _items(spec: Mapping[str, Any], key: str, limit: int) -> list[Any] | None:
    if spec.get(key) is None:
        return None
    items = fields.array(spec.get(key), f"spec.{key}", error=_invalid("InvalidField"))
    if len(items) > limit:
        raise InvalidPolicy("TooManyItems", f"spec.{key}: {len(items)} items; at most {limit} are accepted")
    return items


def architecture(value: object, where: str) -> str:
    """A Go GOARCH name or one of its aliases (``aarch64`` → ``arm64``), exactly as the CRD's enum lists
    them; :class:`InvalidPolicy` otherwise (``AMD64`` and ``arm64/v8`` too: ``kubectl apply`` refuses them)."""
    if not isinstance(value, str) or not value:
        raise InvalidPolicy("InvalidArchitecture", f"{where}: {value!r} is not an architecture name")
    if value in KNOWN_ARCHITECTURES:
        return value
    if value in ARCHITECTURE_ALIASES:
        return normalize_arch_name(value)
    raise InvalidPolicy(
        "InvalidArchitecture",
        f"{where}: {value!r} is not a Go GOARCH architecture ({', '.join(sorted(KNOWN_ARCHITECTURES))})",
    )


def _schedulable(spec: Mapping[str, Any]) -> frozenset[str] | None:
    items = _items(spec, "schedulableArchitectures", MAX_ARCHITECTURES)
    if items is None:
        return None
    if not items:
        raise InvalidPolicy(
            "InvalidField", "spec.schedulableArchitectures: needs at least one architecture (omit it to allow any)"
        )
    return frozenset(architecture(item, f"spec.schedulableArchitectures[{i}]") for i, item in enumerate(items))


def _preferred(spec: Mapping[str, Any]) -> tuple[WeightedArchitecture, ...] | None:
    items = _items(spec, "preferredArchitectures", MAX_ARCHITECTURES)
    if items is None:
        return None
    out: dict[str, WeightedArchitecture] = {}
    for index, item in enumerate(items):
        where = f"spec.preferredArchitectures[{index}]"
        entry = fields.mapping(item, where, required=True, error=_invalid("InvalidField"))
        _no_unknown(entry, ("architecture", "weight"), where)
        arch = architecture(entry.get("architecture"), f"{where}.architecture")
        weight = _integer(entry, "weight", "WeightOutOfRange", low=1, high=100, where=where)
        if weight is None:
            raise InvalidPolicy("InvalidField", f"{where}.weight is missing (1 to 100)")
        if arch in out:
            raise InvalidPolicy("DuplicateArchitecture", f"{where}.architecture: {arch} is listed twice")
        out[arch] = WeightedArchitecture(arch, weight)
    return tuple(out.values())


def _selector(spec: Mapping[str, Any], key: str) -> LabelSelector:
    if spec.get(key) is None:
        return EVERYTHING
    try:
        return parse_label_selector(spec[key], f"spec.{key}")
    except InvalidSelector as exc:
        raise InvalidPolicy("InvalidSelector", str(exc)) from None


def _label_keys(spec: Mapping[str, Any]) -> tuple[str, ...] | None:
    items = _items(spec, "matchNodeLabels", MAX_LABEL_KEYS)
    if items is None:
        return None
    for index, key in enumerate(items):
        if not isinstance(key, str) or not is_label_key(key):
            raise InvalidPolicy("InvalidField", f"spec.matchNodeLabels[{index}]: {key!r} is not a label key")
    return tuple(dict.fromkeys(items))


def _tolerations(spec: Mapping[str, Any]) -> tuple[ArchToleration, ...] | None:
    items = _items(spec, "architectureTolerations", MAX_TOLERATIONS)
    if items is None:
        return None
    out: list[ArchToleration] = []
    for index, item in enumerate(items):
        where = f"spec.architectureTolerations[{index}]"
        entry = fields.mapping(item, where, required=True, error=_invalid("InvalidField"))
        _no_unknown(entry, ("architecture", "key", "operator", "value", "effect"), where)
        arch = architecture(entry.get("architecture"), f"{where}.architecture")
        key = fields.string(entry.get("key"), f"{where}.key", required=True, error=_invalid("InvalidField"))
        operator = entry.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise InvalidPolicy("InvalidField", f"{where}.operator: {operator!r} is not Equal or Exists")
        value = fields.string(entry.get("value"), f"{where}.value", error=_invalid("InvalidField"))
        if operator == "Exists" and value:
            raise InvalidPolicy("InvalidField", f"{where}.value: operator Exists takes no value")
        effect = fields.string(entry.get("effect"), f"{where}.effect", error=_invalid("InvalidField"))
        if effect and effect not in TAINT_EFFECTS:
            raise InvalidPolicy("InvalidField", f"{where}.effect: {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
        toleration = ArchToleration(arch, key, value if operator == "Equal" else None, effect)
        try:
            toleration.validate()
        except InvalidSettings as exc:
            raise InvalidPolicy("InvalidField", f"{where}: {str(exc).removeprefix('--arch-tolerations: ')}") from None
        if toleration not in out:
            out.append(toleration)
    return tuple(out)


def _image_platforms(spec: Mapping[str, Any], ref: PolicyRef) -> StaticPlatforms | None:
    items = _items(spec, "imagePlatforms", MAX_IMAGE_PLATFORMS)
    if items is None:
        return None
    declared: dict[str, object] = {}
    for index, item in enumerate(items):
        where = f"spec.imagePlatforms[{index}]"
        entry = fields.mapping(item, where, required=True, error=_invalid("InvalidField"))
        _no_unknown(entry, ("image", "platforms"), where)
        image = fields.string(entry.get("image"), f"{where}.image", required=True, error=_invalid("InvalidField"))
        _check_image(image, f"{where}.image")
        if image in declared:
            raise InvalidPolicy("DuplicateImage", f"{where}.image: {image!r} is listed twice")
        platforms = entry.get("platforms")
        if platforms is None:
            raise InvalidPolicy("InvalidField", f"{where}.platforms is missing")
        listed = platforms.get("platforms") if isinstance(platforms, Mapping) else platforms
        if isinstance(listed, list) and len(listed) > MAX_PLATFORMS_PER_IMAGE:
            raise InvalidPolicy(
                "TooManyItems",
                f"{where}.platforms: {len(listed)} items; at most {MAX_PLATFORMS_PER_IMAGE} are accepted",
            )
        declared[image] = platforms
    try:
        return StaticPlatforms.from_mapping(declared, f"{ref} spec.imagePlatforms")
    except InvalidSettings as exc:
        raise InvalidPolicy("InvalidPlatforms", str(exc)) from None


def _check_image(image: str, where: str) -> None:
    """An exact key must be a reference a pod could name; a glob must be one fnmatch can read."""
    if not image.strip():
        raise InvalidPolicy("InvalidImage", f"{where} is empty")
    if len(image) > MAX_IMAGE_LENGTH:
        raise InvalidPolicy(
            "InvalidImage", f"{where}: {len(image)} characters; at most {MAX_IMAGE_LENGTH} are accepted"
        )
    if any(char in _GLOB_CHARS for char in image):
        if image.count("[") != image.count("]") or "[]" in image:
            raise InvalidPolicy("InvalidGlob", f"{where}: {image!r} has an unbalanced or empty [...] class")
        fnmatch.translate(image)
        return
    try:
        parse_reference(image)
    except InvalidReference as exc:
        raise InvalidPolicy("InvalidImage", f"{where}: {exc}") from None


def _rollout(spec: Mapping[str, Any], status: object, generation: int) -> Rollout | None:
    if spec.get("rollout") is None:
        return None
    entry = fields.mapping(spec["rollout"], "spec.rollout", error=_invalid("InvalidField"))
    _no_unknown(entry, ("architecture", "percent"), "spec.rollout")
    arch = architecture(entry.get("architecture"), "spec.rollout.architecture")
    percent = _integer(entry, "percent", "PercentOutOfRange", low=0, high=100, where="spec.rollout")
    if percent is None:
        raise InvalidPolicy("InvalidField", "spec.rollout.percent is missing (0 to 100)")
    return Rollout(arch, percent, rolled_back(status, generation, arch))


def rolled_back(status: object, generation: int, arch: str) -> frozenset[tuple[str, str]]:
    """The workloads ``status.rollout.rolledBack`` lists for ``arch``, when it was written for ``generation``.

    Read leniently: the status is noe's own record, and a malformed entry must not make the policy invalid.
    A list written for an older generation (``status.rollout.observedGeneration``) is void at once, before
    the controller clears it: a new ``spec`` starts the rollout afresh.
    """
    record = status.get("rollout") if isinstance(status, Mapping) else None
    if not isinstance(record, Mapping) or record.get("observedGeneration") != generation:
        return frozenset()
    entries = record.get("rolledBack")
    return frozenset(
        (entry["namespace"], entry["workload"])
        for entry in (entries if isinstance(entries, list) else ())
        if isinstance(entry, Mapping)
        and entry.get("architecture") == arch
        and isinstance(entry.get("namespace"), str)
        and isinstance(entry.get("workload"), str)
    )


def with_status(policy: PlacementPolicy, status: object) -> PlacementPolicy:
    """``policy`` with its rollout's ``rolled_back`` read again from ``status`` (the same generation's)."""
    if policy.rollout is None:
        return policy
    workloads = rolled_back(status, policy.ref.generation, policy.rollout.architecture)
    if workloads == policy.rollout.rolled_back:
        return policy
    return replace(policy, rollout=replace(policy.rollout, rolled_back=workloads))


def _no_unknown(entry: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(key) for key in entry if key not in known)
    if unknown:
        raise InvalidPolicy("UnknownField", f"{where}.{unknown[0]}: unknown field")
