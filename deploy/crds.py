#!/usr/bin/env python3
"""Write the placement-policy CRDs into the chart: one schema, two kinds.

    python deploy/crds.py          # write deploy/helm/noe/charts/crds/crds/*.yaml
    python deploy/crds.py --check  # exit 1 when a file is out of date (run by the tests)

ClusterPlacementPolicy (cluster-scoped) and PlacementPolicy (namespaced) share
every field but ``namespaceSelector``; writing the schema once here keeps them
from drifting. The files live in the ``crds`` subchart's ``crds/`` directory:
Helm creates them at install and leaves them at upgrade (its CRD convention),
and the parent chart's ``crds.install`` value turns the subchart, and so the
CRDs, off. Every field has a description (``kubectl explain`` is the user's
manual); enums, ranges and ``x-kubernetes-validations`` (CEL) refuse at
``kubectl apply`` what noe would refuse anyway (``noe_core/policies/objects.py``
is the same judge offline).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The names and limits noe_core judges policies by offline: the schema cannot drift from them.
from noe_core.image.platform import ARCHITECTURE_ALIASES as ALIASES  # noqa: E402
from noe_core.image.platform import KNOWN_ARCHITECTURES  # noqa: E402
from noe_core.k8s.label_selector import MAX_REQUIREMENTS, MAX_VALUES  # noqa: E402
from noe_core.policies.objects import (  # noqa: E402
    GROUP,
    MAX_ARCHITECTURES,
    MAX_IMAGE_LENGTH,
    MAX_IMAGE_PLATFORMS,
    MAX_LABEL_KEYS,
    MAX_PRIORITY,
    MAX_TOLERATIONS,
)

OUT = ROOT / "deploy" / "helm" / "noe" / "charts" / "crds" / "crds"

# Go GOARCH names (kubernetes.io/arch values) and the aliases the placement contract normalises (rule 4).
ARCHITECTURES = sorted(KNOWN_ARCHITECTURES)
ARCHITECTURE_NAMES = ARCHITECTURES + sorted(ALIASES)
"""What an architecture field accepts (the enum)."""
MAX_ARCHITECTURE_LENGTH = max(map(len, ARCHITECTURE_NAMES))
"""The longest accepted name: the API server costs a rule by a string's maxLength, never by its enum."""

# The API server refuses a CRD whose rules' estimated worst-case cost is too high (per rule 10,000,000, per CRD
# 100,000,000; tests/support/cel_cost.py models its estimator and tests/deploy/test_crd_rule_cost.py holds these
# rules to a tenth of that). So every string, list and map a rule reads is bounded, and each rule is written in
# its cheapest equivalent form: no comprehension inside another, no map literal built per element, and
# ``x == 'a' || x == 'b'`` rather than ``x in ['a', 'b']`` (a list literal costs 10 each time).


def _alias_groups() -> list[list[str]]:
    """Each GOARCH name that has aliases, with them: the names the contract reads as one architecture."""
    groups: dict[str, set[str]] = {}
    for alias, name in ALIASES.items():
        groups.setdefault(name, {name}).add(alias)
    return [sorted(group) for _, group in sorted(groups.items())]


def _cel_list(names: list[str]) -> str:
    return "[" + ", ".join(f"'{name}'" for name in names) + "]"


def preferred_in_schedulable() -> str:
    """The cross-field rule: every preferred architecture, normalised, is among the schedulable ones, normalised.

    Normalising both sides inside nested comprehensions (preferred x schedulable, a 12-entry map literal per
    element) is what the API server refused. The equivalent form here reads each list once per clause: a name
    without aliases must be listed as it is; for each group of names that mean one architecture (``arm64``,
    ``aarch64``), a preferred member needs a schedulable member. Its estimated cost is about 1/9 of the nested
    ``exists()`` form's, and it grows with the number of alias groups, not with the product of the lists.
    """
    preferred, schedulable = "self.preferredArchitectures", "self.schedulableArchitectures"
    aliased = sorted(name for group in _alias_groups() for name in group)
    clauses = [f"{preferred}.all(p, p.architecture in {schedulable} || p.architecture in {_cel_list(aliased)})"]
    clauses += [
        f"(!{preferred}.exists(p, p.architecture in {_cel_list(group)}) || "
        f"{schedulable}.exists(s, s in {_cel_list(group)}))"
        for group in _alias_groups()
    ]
    return f"!has({schedulable}) || !has({preferred}) || (" + " && ".join(clauses) + ")"


def architecture(description: str) -> dict[str, Any]:
    return {
        "type": "string",
        "enum": ARCHITECTURE_NAMES,
        "maxLength": MAX_ARCHITECTURE_LENGTH,
        "description": description,
    }


def label_selector(what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"Which {what} the policy applies to (a Kubernetes LabelSelector); absent selects all.",
        "properties": {
            "matchLabels": {
                "type": "object",
                "description": "Labels that must all be present with these values.",
                "additionalProperties": {"type": "string", "maxLength": 63},
                "maxProperties": MAX_REQUIREMENTS,
            },
            "matchExpressions": {
                "type": "array",
                "description": "Requirements that must all hold.",
                "maxItems": MAX_REQUIREMENTS,
                "items": {
                    "type": "object",
                    "description": "A key, an operator and, for In and NotIn, values.",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string", "maxLength": 317, "description": "The label key."},
                        "operator": {
                            "type": "string",
                            "enum": ["In", "NotIn", "Exists", "DoesNotExist"],
                            "maxLength": len("DoesNotExist"),
                            "description": "In and NotIn compare with values; Exists and DoesNotExist look at the "
                            "key only.",
                        },
                        "values": {
                            "type": "array",
                            "maxItems": MAX_VALUES,
                            "description": "The values for In and NotIn; empty for Exists and DoesNotExist.",
                            "items": {"type": "string", "maxLength": 63},
                        },
                    },
                    "x-kubernetes-validations": [
                        {
                            "rule": "self.operator == 'In' || self.operator == 'NotIn'"
                            " ? has(self.values) && size(self.values) > 0"
                            " : !has(self.values) || size(self.values) == 0",
                            "message": "In and NotIn need values; Exists and DoesNotExist take none",
                        }
                    ],
                },
            },
        },
    }


def spec_schema(cluster: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "priority": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_PRIORITY,
            "default": 0,
            "description": "Order of application: policies apply by priority ascending, then name; a later "
            "policy's field replaces an earlier one's. Cluster policies apply before namespaced ones.",
        },
        "podSelector": label_selector("pods"),
        "preferredArchitectures": {
            "type": "array",
            "maxItems": MAX_ARCHITECTURES,
            "description": "Preferred architectures with their weights (overrides --preferred-arch and "
            "--preferred-arch-weight). Each listed architecture the pod's images share gets its own preferred "
            "scheduling term; [] means no preference. A pod's arch.noe.adevinta.com/preferred label still wins.",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["architecture"],
            "items": {
                "type": "object",
                "description": "One preferred architecture.",
                "required": ["architecture", "weight"],
                "properties": {
                    "architecture": architecture(
                        "The architecture (a GOARCH name such as arm64; aarch64 is read as arm64)."
                    ),
                    "weight": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 100,
                        "description": "The weight of its preferred scheduling term (1 to 100).",
                    },
                },
            },
        },
        "preferenceMode": {
            "type": "string",
            "enum": ["soft", "required"],
            "description": "soft: preferred scheduling terms; required: pin nodeSelector to the highest-weight "
            "listed architecture the images share (overrides --preference-mode).",
        },
        "schedulableArchitectures": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_ARCHITECTURES,
            "x-kubernetes-list-type": "set",
            "description": "Architectures the matched pods may use. Only narrows: the result is the intersection "
            "with --cluster-schedulable-archs and every other matching policy.",
            "items": architecture("An architecture the pods may be scheduled on."),
        },
        "strict": {
            "type": "boolean",
            "description": "Deny matched pods whose images cannot be inspected (as --strict-namespaces). "
            "Once true by any matching policy or flag, it stays true.",
        },
        "onLookupFailure": {
            "type": "string",
            "enum": ["allow", "gate"],
            "description": "When image lookups fail temporarily: allow the pod unplaced, or gate it for noe "
            "controller (overrides --on-lookup-failure).",
        },
        "fallbackArchitecture": {
            **architecture(
                "When an image cannot be inspected, require this architecture if every image that was inspected "
                "offers it (rule 13a; overrides --fallback-arch); \"\" switches a flag's fallback off."
            ),
            "enum": [*ARCHITECTURE_NAMES, ""],
        },
        "matchNodeLabels": {
            "type": "array",
            "maxItems": MAX_LABEL_KEYS,
            "x-kubernetes-list-type": "set",
            "description": "Pod label keys whose values the node must carry too (overrides --match-node-labels).",
            "items": {"type": "string", "maxLength": 317, "description": "A label key."},
        },
        "architectureTolerations": {
            "type": "array",
            "maxItems": MAX_TOLERATIONS,
            "description": "Tolerations added to pods allowed on an architecture whose nodes are tainted "
            "(overrides --arch-tolerations).",
            "items": {
                "type": "object",
                "description": "The toleration for one architecture's taint.",
                "required": ["architecture", "key"],
                "properties": {
                    "architecture": architecture("The architecture whose nodes carry the taint."),
                    "key": {"type": "string", "maxLength": 317, "description": "The taint key."},
                    "operator": {
                        "type": "string",
                        "enum": ["Equal", "Exists"],
                        "maxLength": len("Exists"),
                        "default": "Equal",
                        "description": "Equal matches key and value; Exists matches the key alone.",
                    },
                    "value": {"type": "string", "maxLength": 63, "description": "The taint value (operator Equal)."},
                    "effect": {
                        "type": "string",
                        "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
                        "description": "The taint effect; absent tolerates every effect.",
                    },
                },
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.operator) || self.operator != 'Exists'"
                        " || !has(self.value) || self.value == ''",
                        "message": "operator Exists takes no value",
                    }
                ],
            },
        },
        "imagePlatforms": {
            "type": "array",
            "maxItems": MAX_IMAGE_PLATFORMS,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["image"],
            "description": "Declared platforms, consulted before the registry and on top of --image-platforms: "
            "an exact image beats every glob; later policies win for the same image and their globs are tried first.",
            "items": {
                "type": "object",
                "description": "An image (exact, or an fnmatch glob such as registry.corp/legacy/*) and its platforms.",
                "required": ["image", "platforms"],
                "properties": {
                    "image": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_IMAGE_LENGTH,
                        "description": "The image as pods name it, or a glob.",
                    },
                    "platforms": {
                        "description": "As in a platforms file: a list such as [linux/amd64, linux/arm64], "
                        "{platforms: [...], digest: sha256:...}, or {error: reason}.",
                        "x-kubernetes-preserve-unknown-fields": True,
                    },
                },
            },
        },
        "rollout": {
            "type": "object",
            "description": "Move a share of the matched pods to one architecture: pods whose images allow it and "
            "another architecture are placed on it when their admission falls in the cohort.",
            "required": ["architecture", "percent"],
            "properties": {
                "architecture": architecture("The architecture the cohort moves to."),
                "percent": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 100,
                    "description": "The share of admissions in the cohort (0 keeps matched pods off it).",
                },
            },
        },
    }
    if cluster:
        properties["namespaceSelector"] = label_selector("namespaces")
    return {
        "type": "object",
        "description": "What the policy sets for the pods it matches; every field is optional.",
        "properties": dict(sorted(properties.items())),
        "x-kubernetes-validations": [
            {
                # no reason or fieldPath: the API server knows them from 1.28 only, the chart supports 1.25
                # (FieldValueInvalid is the reason anyway; the message names the field)
                "rule": preferred_in_schedulable(),
                "message": "every preferredArchitectures entry must be in schedulableArchitectures",
            }
        ],
    }


def condition() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A condition (Accepted: whether noe applies the policy).",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "description": "The condition type (Accepted)."},
            "status": {
                "type": "string",
                "enum": ["True", "False", "Unknown"],
                "description": "True, False or Unknown.",
            },
            "reason": {"type": "string", "description": "CamelCase reason (Valid, PriorityOutOfRange, ...)."},
            "message": {"type": "string", "description": "What is wrong, naming the field and value."},
            "observedGeneration": {"type": "integer", "description": "The generation the condition describes."},
            "lastTransitionTime": {"type": "string", "format": "date-time", "description": "When the status changed."},
        },
    }


def group_counts(what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"The {what} pods of the rollout.",
        "properties": {
            "placed": {"type": "integer", "description": f"{what.capitalize()} pods placed."},
            "failing": {"type": "integer", "description": f"{what.capitalize()} pods failing."},
        },
    }


def status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "Written by noe controller's leader.",
        "properties": {
            "observedGeneration": {"type": "integer", "description": "The generation of spec noe last judged."},
            "conditions": {
                "type": "array",
                "description": "Accepted=True when noe applies the policy; False (with reason and message) when it "
                "ignores it whole.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": condition(),
            },
            "rollout": {
                "type": "object",
                "description": "Progress of spec.rollout.",
                "properties": {
                    "observedGeneration": {
                        "type": "integer",
                        "description": "The generation of spec this progress and rolledBack belong to (an "
                        "older one's rolledBack is void).",
                    },
                    "cohort": group_counts("cohort"),
                    "control": group_counts("control"),
                    "rolledBack": {
                        "type": "array",
                        "description": "Workloads rolled back (their rollout acts as percent 0); a new generation "
                        "of spec clears it.",
                        "items": {
                            "type": "object",
                            "description": "One workload rolled back, and why.",
                            "properties": {
                                "namespace": {"type": "string", "description": "The workload's namespace."},
                                "workload": {"type": "string", "description": "Kind/name of its top owner."},
                                "architecture": {"type": "string", "description": "The rollout's architecture."},
                                "reason": {"type": "string", "description": "Why (exec format error, failing share)."},
                                "time": {"type": "string", "format": "date-time", "description": "When."},
                            },
                        },
                    },
                },
            },
        },
    }


def crd(kind: str, plural: str, scope: str, short: str) -> dict[str, Any]:
    cluster = scope == "Cluster"
    purpose = (
        "A cluster-wide placement policy for noe: settings for the pods of the namespaces it selects."
        if cluster
        else "A team's placement policy for noe: settings for the pods of its own namespace."
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "noe", "app.kubernetes.io/part-of": "noe"},
        },
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["noe"],
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Priority", "type": "integer", "jsonPath": ".spec.priority"},
                        {
                            "name": "Accepted",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Accepted")].status',
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": purpose + " See docs/policies.md.",
                            "properties": {
                                "apiVersion": {"type": "string", "description": "arch.noe.adevinta.com/v1alpha1"},
                                "kind": {"type": "string", "description": kind},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(cluster),
                                "status": status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }


CRDS = {
    f"{GROUP}_clusterplacementpolicies.yaml": crd(
        "ClusterPlacementPolicy", "clusterplacementpolicies", "Cluster", "cpp"
    ),
    f"{GROUP}_placementpolicies.yaml": crd("PlacementPolicy", "placementpolicies", "Namespaced", "pp"),
}


def render(doc: dict[str, Any]) -> str:
    head = "# Generated by deploy/crds.py; do not edit: change it and run `python deploy/crds.py`.\n"
    return head + yaml.safe_dump(doc, sort_keys=False, width=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is out of date")
    check = parser.parse_args().check
    stale = []
    for name, doc in CRDS.items():
        path = OUT / name
        text = render(doc)
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"out of date (run python deploy/crds.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
