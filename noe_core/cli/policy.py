"""``noe policy``: placement policy files, judged and explained offline as the cluster would.

* ``noe policy check FILE…`` prints, for every policy of the files, ``Accepted``
  or the reason and message its ``Accepted`` condition would carry in the
  cluster (the very words ``noe controller`` writes into its status); exit 1
  when one is invalid (it would be ignored whole), 2 when a file cannot be read.
* ``noe policy explain -f POD --policy FILE…`` prints, for each Pod (or the
  pod template of a workload), the namespace labels used, the policies that
  match in application order, and the merged settings with where each came
  from (a flag or the policies that set it) — the merge the webhook runs; with
  a rollout, the workload's state (rolling out, or rolled back when the
  policy's ``status.rollout.rolledBack`` lists it: percent 0).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from noe_core.cli.flags import (
    EXPLAIN_FILENAME,
    EXPLAIN_OUTPUT,
    LEARNED,
    MUTATE_NAMESPACE,
    PLATFORMS,
    POLICY_FILE,
    add_flags,
    require,
)
from noe_core.cli.mutate import (
    EXIT_BAD_INPUT,
    TEMPLATE_PATHS,
    evaluate,
    expand_lists,
    load_documents,
    namespace_of,
    object_name,
    template_at,
)
from noe_core.cli.output import dump
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.errors import InvalidObject, NoeError
from noe_core.image.declared import LayeredPlatforms, StaticPlatforms
from noe_core.image.image_platforms import LookupFailure
from noe_core.image.learned import load_learned
from noe_core.image.offer import allowed_nodes
from noe_core.k8s.object_meta import read_object_meta
from noe_core.placement.rules import Decision
from noe_core.policies.documents import read_files
from noe_core.policies.merge import FIELD_FLAGS, MergedSettings, namespace_labels
from noe_core.policies.rollout import workload_of
from noe_core.policies.settings import NOTHING_SCHEDULABLE, PolicySettings
from noe_core.policies.status import VALID
from noe_core.registry.lookup_service import LookupService
from noe_core.util.deadline import Deadline

EXIT_OK = 0
EXIT_INVALID = 1


def add_policy_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "policy",
        help="check placement policy files, or explain which policies a pod gets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="policy_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "check",
        help="validate policy files as the cluster would (exit 1 when a policy is invalid)",
        description="Judge every ClusterPlacementPolicy and PlacementPolicy of the files as noe does in the "
        "cluster; print Accepted or the reason and message of its Accepted condition.",
    )
    check.add_argument("files", metavar="FILE", nargs="+", help="policy files (YAML or JSON; Namespaces allowed)")
    check.set_defaults(run=run_check)
    explain = commands.add_parser(
        "explain",
        help="which policies match a pod, in order, and the merged settings with their sources",
        description="For each Pod (or workload's pod template) of the file, the policies that match it in "
        "application order and the settings it gets, each with the flag or policies that set it, and where "
        "the pod may run as the webhook would decide it: its images' platforms from --platforms and the "
        "policies' imagePlatforms (offline: other images are not inspected), less --learned architectures.",
    )
    add_flags(explain, (EXPLAIN_FILENAME, POLICY_FILE, MUTATE_NAMESPACE, EXPLAIN_OUTPUT))
    add_flags(explain.add_argument_group("where the pod may run (offline)"), (PLATFORMS, LEARNED))
    add_policy_arguments(explain)
    explain.set_defaults(run=run_explain)


def run_check(ns: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        found = read_files(ns.files)
    except NoeError as exc:
        print(f"noe policy check: {exc}", file=err)
        return EXIT_BAD_INPUT
    for policy in found.policies:
        print(f"{policy.ref}: {VALID}", file=out)
    for rejected in found.rejected:
        what = str(rejected.ref) if rejected.ref is not None else rejected.where
        print(f"{what}: {rejected.reason}: {rejected.error} ({rejected.where})", file=out)
    if found.rejected:
        print(f"noe policy check: {len(found.rejected)} policy(ies) invalid: ignored whole by noe", file=err)
        return EXIT_INVALID
    return EXIT_OK


def run_explain(
    ns: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        base = policy_settings_from_args(ns)
        found = read_files(ns.policy or [])
        policies = found.as_policies()
        docs = list(expand_lists(load_documents(ns.filename, stdin or sys.stdin)))
        platforms = require(ns, PLATFORMS)
        service = LookupService(static=StaticPlatforms.load(platforms) if platforms else None)
        learned_file = require(ns, LEARNED)
        learned = load_learned(learned_file) if learned_file else None
        explained = []
        for doc in docs:
            kind, name, namespace, labels = _pod_of(doc, ns.namespace or "default")
            merged = policies.settings_for(base, namespace=namespace, pod_labels=labels)
            known = policies.namespaces.get(namespace)
            explained.append(
                {
                    "kind": kind,
                    "name": name,
                    "namespace": namespace,
                    "namespaceLabels": dict(known if known is not None else namespace_labels(namespace, None)),
                    "podLabels": dict(labels),
                    "policies": [str(ref) for ref in merged.applied],
                    "settings": explain_settings(merged, namespace),
                }
            )
            if merged.rollout is not None:
                explained[-1]["rollout"] = rollout_state(merged, namespace, workload_name(doc))
            outcome = evaluate(
                doc,
                settings=base,
                inspect=lambda request: service.inspect(request, deadline=Deadline.never()).result,
                namespace=namespace,
                operation="CREATE",
                policies=policies,
                learned=learned,
            )
            if outcome.decision is not None:
                explained[-1]["placement"] = placement_of(outcome.decision)
    except NoeError as exc:
        print(f"noe policy explain: {exc}", file=err)
        return EXIT_BAD_INPUT
    for rejected in found.rejected:
        print(f"noe policy explain: policy ignored: {rejected}", file=err)
    out.write(dump(explained[0] if len(explained) == 1 else explained, ns.output))
    return EXIT_OK


def placement_of(decision: Decision) -> dict[str, Any]:
    """Where the pod may run, as the one placement pipeline decided it, and what each image offered."""
    images = []
    for image, found in decision.lookups.items():
        entry: dict[str, Any] = {
            "image": image,
            "platforms": None,
            "source": decision.sources.get(image),
            "error": None,
        }
        if isinstance(found, LookupFailure):
            entry["error"] = found.reason
        else:
            entry["platforms"] = [str(p) for p in found.platforms]
        images.append(entry)
    out: dict[str, Any] = {
        "allowed": decision.allowed,
        "architectures": list(decision.common) if decision.common is not None else None,
        "nodes": allowed_nodes(decision.nodes) if decision.nodes is not None else None,
        "images": images,
    }
    if decision.warnings:
        out["warnings"] = list(decision.warnings)
    if decision.message:
        out["message"] = decision.message
    return out


def _pod_of(doc: Any, default_namespace: str) -> tuple[str, str, str, Mapping[str, str]]:
    """Kind, name, namespace and the labels its pods carry, for a Pod, DaemonSet or workload with a template."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        raise InvalidObject("each document must be a Kubernetes object (a mapping with 'kind')")
    kind = doc["kind"]
    holder: Mapping[str, Any] = doc
    if kind == "DaemonSet":
        holder = template_at(doc, ("spec", "template"))
    elif kind in TEMPLATE_PATHS:
        holder = template_at(doc, TEMPLATE_PATHS[kind])
    elif kind != "Pod":
        raise InvalidObject(f"kind {kind!r} has no pods: give a Pod, a DaemonSet or a workload with a pod template")
    labels = read_object_meta(holder).labels
    return kind, object_name(doc), namespace_of(doc, default_namespace), labels


def explain_settings(merged: MergedSettings, namespace: str) -> dict[str, Any]:
    """Each policy field's merged value and the flag or policies that set it."""
    settings = merged.settings
    sources = merged.sources or {key: (flag,) for key, flag in FIELD_FLAGS.items()}
    values: dict[str, Any] = {
        "preferredArchitectures": [{"architecture": p.architecture, "weight": p.weight} for p in settings.preferred],
        "preferenceMode": settings.preference_mode,
        "schedulableArchitectures": _schedulable(settings),
        "strict": namespace in settings.strict_namespaces,
        "onLookupFailure": settings.on_lookup_failure,
        "fallbackArchitecture": settings.fallback_arch,
        "matchNodeLabels": list(settings.match_node_labels),
        "architectureTolerations": [{"architecture": t.arch, **t.to_toleration()} for t in settings.arch_tolerations],
        "imagePlatforms": _declared_images(merged),
    }
    out = {key: {"value": value, "from": list(sources.get(key, ()))} for key, value in values.items()}
    if merged.rollout is not None:
        out["rollout"] = {
            "value": {"architecture": merged.rollout.architecture, "percent": merged.rollout.percent},
            "from": [str(merged.rollout_source)],
        }
    return out


def workload_name(doc: Mapping[str, Any]) -> str:
    """``Deployment/web``: the workload a document's pods belong to (a Pod's top owner, else the object)."""
    meta = read_object_meta(doc)
    if doc.get("kind") in ("Pod", "ReplicaSet", "Job") and meta.owner is not None:
        return workload_of(meta)
    return f"{doc.get('kind')}/{meta.name or meta.generate_name}"


def rollout_state(merged: MergedSettings, namespace: str, workload: str) -> dict[str, Any]:
    """The workload's rollout: the policy's, and whether ``status.rollout.rolledBack`` lists the workload
    (then its pods draw as ``percent: 0``, as the webhook does)."""
    rollout = merged.rollout
    assert rollout is not None
    rolled_back = (namespace, workload) in rollout.rolled_back
    return {
        "workload": workload,
        "policy": str(merged.rollout_source),
        "architecture": rollout.architecture,
        "percent": rollout.percent,
        "state": "rolled back" if rolled_back else "rolling out",
        "effectivePercent": 0 if rolled_back else rollout.percent,
    }


def _schedulable(settings: PolicySettings) -> list[str] | str:
    if settings.schedulable_archs == NOTHING_SCHEDULABLE:
        return []
    return sorted(settings.schedulable_archs) or "any"


def _declared_images(merged: MergedSettings) -> list[str]:
    """The images and globs the matching policies declare, the last-applied policy's first."""
    declared = merged.declared
    layers = declared.layers if isinstance(declared, LayeredPlatforms) else (declared,) if declared else ()
    images: list[str] = []
    for layer in reversed(layers):
        if isinstance(layer, StaticPlatforms):
            images.extend([*layer.exact, *(pattern for pattern, _ in layer.globs)])
    return list(dict.fromkeys(images))
