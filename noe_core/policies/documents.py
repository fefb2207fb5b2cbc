"""Placement policies and Namespaces from files (``--policy FILE``), judged exactly as in a cluster.

A file holds YAML or JSON documents: ``ClusterPlacementPolicy`` and
``PlacementPolicy`` objects, ``Namespace`` objects (only their labels are read:
namespace selectors match on them), and ``List`` documents of those, as
``kubectl get … -o yaml`` prints them. A policy that is invalid is kept aside
with its reason (``noe policy check`` prints it; the merge ignores it whole),
never half-applied; a document of any other kind stops the command with one
line, since a misplaced Pod or Deployment in a policy file is a mistake.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from noe_core.errors import InvalidPolicy, InvalidSettings
from noe_core.policies.merge import Policies, PolicySet, namespace_labels
from noe_core.policies.objects import KINDS, PlacementPolicy, PolicyRef, read_policy, read_ref
from noe_core.util import fields
from noe_core.util.safe_load import load_json, load_yaml_all
from noe_core.util.text_file import read_text


@dataclass(frozen=True)
class Rejected:
    """A policy document that is ignored whole, and why (its ``Accepted=False`` condition)."""

    where: str
    ref: PolicyRef | None
    error: InvalidPolicy

    @property
    def reason(self) -> str:
        return self.error.reason

    def __str__(self) -> str:
        what = str(self.ref) if self.ref is not None else self.where
        return f"{what}: {self.error.reason}: {self.error}"


@dataclass(frozen=True)
class PolicyDocuments:
    """What policy files hold: valid policies, rejected ones, and namespace labels."""

    policies: tuple[PlacementPolicy, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def policy_set(self) -> PolicySet:
        return PolicySet(self.policies)

    def as_policies(self) -> Policies:
        """What an admission reads: the valid policies indexed, the namespaces' labels as the API serves them."""
        labels = {name: namespace_labels(name, given) for name, given in self.namespaces.items()}
        return Policies(self.policy_set(), labels)

    def __add__(self, other: PolicyDocuments) -> PolicyDocuments:
        return _deduplicated(
            (*self.policies, *other.policies),
            (*self.rejected, *other.rejected),
            {**self.namespaces, **other.namespaces},
        )


def _expand(docs: Iterable[object]) -> Iterator[tuple[int, object]]:
    for index, doc in enumerate(docs):
        if (
            isinstance(doc, Mapping)
            and str(doc.get("kind", "")).endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            for item in doc["items"]:
                yield index, item
        else:
            yield index, doc


def read_documents(docs: Iterable[object], source: str) -> PolicyDocuments:
    """Sort decoded documents into policies, rejected policies and namespace labels."""
    policies: list[PlacementPolicy] = []
    rejected: list[Rejected] = []
    namespaces: dict[str, Mapping[str, str]] = {}
    for index, doc in _expand(docs):
        where = f"{source} document {index + 1}"
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        if kind == "Namespace":
            assert isinstance(doc, Mapping)
            metadata = fields.mapping(doc.get("metadata"), f"{where}: metadata", error=InvalidSettings)
            name = fields.string(metadata.get("name"), f"{where}: metadata.name", required=True, error=InvalidSettings)
            namespaces[name] = fields.string_map(
                metadata.get("labels"), f"{where}: metadata.labels", error=InvalidSettings
            )
            continue
        if kind not in KINDS:
            raise InvalidSettings(
                f"{where}: kind {kind!r} is not a ClusterPlacementPolicy, PlacementPolicy or Namespace"
            )
        ref: PolicyRef | None = None
        try:
            ref = read_ref(doc)
            policies.append(read_policy(doc))
        except InvalidPolicy as exc:
            rejected.append(Rejected(where, ref, exc))
    return _deduplicated(policies, rejected, namespaces)


def read_files(paths: Sequence[str | os.PathLike[str]]) -> PolicyDocuments:
    """The documents of every file (``--policy FILE``, repeatable), as one cluster would hold them.

    A file that cannot be read, is not JSON or YAML, or holds another kind of object raises
    :class:`InvalidSettings` naming it (the command stops); an invalid policy is kept aside.
    """
    found = PolicyDocuments()
    for path in paths:
        name = os.fspath(path)
        text = read_text(name, f"policy file {name}")
        try:
            docs = [load_json(text)] if name.endswith(".json") else load_yaml_all(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise InvalidSettings(f"policy file {name} is not valid JSON/YAML: {exc}") from None
        found = found + read_documents([doc for doc in docs if doc is not None], name)
    return found


def _deduplicated(
    policies: Iterable[PlacementPolicy], rejected: Iterable[Rejected], namespaces: Mapping[str, Mapping[str, str]]
) -> PolicyDocuments:
    """One object per kind/namespace/name, as in a cluster: a second one with the same name is rejected."""
    seen: set[tuple[str, str, str]] = set()
    kept: list[PlacementPolicy] = []
    refused = list(rejected)
    for policy in policies:
        key = (policy.ref.kind, policy.ref.namespace, policy.ref.name)
        if key in seen:
            message = f"{policy.ref} is defined twice: names are unique per kind and namespace"
            refused.append(Rejected(str(policy.ref), policy.ref, InvalidPolicy("DuplicateName", message)))
            continue
        seen.add(key)
        kept.append(policy)
    return PolicyDocuments(tuple(kept), tuple(refused), dict(namespaces))
