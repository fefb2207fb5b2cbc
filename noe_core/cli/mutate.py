"""``noe mutate``: the placement policy, offline, on a file of manifests.

Users run it in CI to see where each workload would land before anything
reaches a cluster. With ``--platforms`` nothing touches the network; without
it, each image is read from its registry with the same flags as ``noe serve``
(``--image-platforms`` answering first, as for the webhook). ``--learned``
takes the ``noe-learned-platforms`` ConfigMap, so a cluster's answer is
reproduced offline.
``--policy FILE`` (repeatable) applies placement policies exactly as the
webhook applies a cluster's: the same merge, the same annotation.

Input: a Pod, a DaemonSet or an AdmissionReview, in YAML or JSON (several
YAML documents are processed one by one). Workloads that carry a pod template
(Deployment, StatefulSet, ReplicaSet, Job, CronJob, ReplicationController) are
shown with the template mutated as the webhook would mutate the Pods their
controller creates. Exit status: 0 allowed, 3 denied, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from noe_core.admission.admitting import admit
from noe_core.admission.review import AdmissionRequest, parse_admission_review
from noe_core.cli.flags import (
    EXPLAIN,
    FILENAME,
    IMAGE_PLATFORMS,
    LEARNED,
    LOOKUP_TIMEOUT,
    MUTATE_NAMESPACE,
    OPERATION,
    OUTPUT,
    PATCH,
    PLATFORMS,
    POLICY_FILE,
    add_flags,
    require,
)
from noe_core.cli.output import dump
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.errors import InvalidObject, NoeError
from noe_core.image.image_platforms import Inspect, LookupRequest, LookupResult, Lookups
from noe_core.image.learned import LearnedPlatforms, load_learned
from noe_core.placement.rules import Decision
from noe_core.policies.documents import PolicyDocuments, read_files
from noe_core.policies.merge import PolicySource
from noe_core.policies.settings import PolicySettings
from noe_core.util.json_patch import Operation, apply_patch, pointer
from noe_core.util.safe_load import TooComplex, load_json, load_yaml_all

EXIT_ALLOWED = 0
EXIT_DENIED = 3
EXIT_BAD_INPUT = 2

# Pod-template paths of the built-in workload kinds whose Pods the webhook would see at CREATE.
TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}

_API_VERSION = "admission.k8s.io/v1"


@dataclass(frozen=True)
class Outcome:
    """What ``noe mutate`` prints for one input document."""

    kind: str
    name: str
    original: dict[str, Any]
    mutated: dict[str, Any]
    decision: Decision | None
    lookups: Lookups
    review: dict[str, Any] | None = None  # the AdmissionReview response, for AdmissionReview input
    patch: tuple[Operation, ...] = ()
    """The operations turning ``original`` into ``mutated``, as the policy emitted them."""


def add_mutate_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mutate",
        help="apply the placement policy offline to a Pod, DaemonSet, workload or AdmissionReview",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser, (FILENAME, OUTPUT))
    add_flags(parser.add_mutually_exclusive_group(), (PATCH, EXPLAIN))
    add_flags(parser, (PLATFORMS, MUTATE_NAMESPACE, OPERATION, LOOKUP_TIMEOUT, POLICY_FILE))
    add_flags(parser, (IMAGE_PLATFORMS, LEARNED))
    add_policy_arguments(parser)
    # Registry flags are added only when the registry client is available (it is part of noe_core).
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    add_registry_arguments(parser)
    parser.set_defaults(run=run_mutate)


def load_documents(source: str, stdin: TextIO) -> list[Any]:
    """Read JSON or YAML documents; every failure is an ``InvalidObject`` naming the file."""
    label = "standard input" if source == "-" else source
    try:
        if source == "-":
            text = stdin.read()
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        raise InvalidObject(f"cannot read {label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidObject(f"{label} is not UTF-8 text") from None
    try:
        return [load_json(text)]
    except TooComplex as exc:
        raise InvalidObject(f"{label}: refused: {exc}") from None
    except ValueError:
        pass
    try:
        docs = [doc for doc in load_yaml_all(text) if doc is not None]
    except TooComplex as exc:
        raise InvalidObject(f"{label}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InvalidObject(f"{label} is neither JSON nor valid YAML{where}") from None
    if not docs:
        raise InvalidObject(f"{label} holds no object")
    return docs


def expand_lists(docs: list[Any]) -> Iterator[Any]:
    """``kind: List`` (as ``kubectl get -o yaml`` prints) holds its objects under ``items``."""
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from doc["items"]
        else:
            yield doc


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ""
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "")
    return str(name)


def namespace_of(obj: Mapping[str, Any], default: str) -> str:
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return str(namespace) if namespace else default


def template_at(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise InvalidObject(f"{obj.get('kind')} {object_name(obj)!r} has no pod template at {'.'.join(path)}")
    return node


def _bare_request(obj: dict[str, Any], kind: str, operation: str, namespace: str) -> AdmissionRequest:
    """The AdmissionReview request the API server would send for ``obj``."""
    return AdmissionRequest(_API_VERSION, "noe-mutate", kind, operation, namespace, object_name(obj), obj)


def evaluate(
    doc: Any,
    *,
    settings: PolicySettings,
    inspect: Inspect,
    namespace: str,
    operation: str,
    policies: PolicySource | None = None,
    learned: LearnedPlatforms | None = None,
) -> Outcome:
    """Apply the policy to one document as the webhook would see it: through the same :func:`admit`."""
    if not isinstance(doc, dict):
        raise InvalidObject("each document must be a Kubernetes object (a mapping with 'kind')")
    kind = doc.get("kind")
    if kind == "AdmissionReview":
        request = parse_admission_review(doc)
        admission = admit(request, settings, inspect, policies=policies, learned=learned)
        return Outcome(
            request.kind,
            request.name,
            request.obj,
            admission.decision.obj,
            admission.decision,
            admission.lookups,
            review=admission.response,
        )
    if not isinstance(kind, str) or not kind:
        raise InvalidObject("the object has no 'kind' (expected Pod, DaemonSet, a workload or AdmissionReview)")
    ns = namespace_of(doc, namespace)
    name = object_name(doc)
    if kind in TEMPLATE_PATHS:
        template = template_at(doc, TEMPLATE_PATHS[kind])
        # The template's metadata as it is (the namespace is the request's), so operations on it apply below.
        pod = {"apiVersion": "v1", "kind": "Pod", "spec": template.get("spec")}
        if "metadata" in template:
            pod["metadata"] = template["metadata"]
        admission = admit(
            _bare_request(pod, "Pod", "CREATE", ns), settings, inspect, policies=policies, learned=learned
        )
        # The Pod's operations touch only its spec; below the template they apply the same way.
        prefix = pointer("", TEMPLATE_PATHS[kind])
        patch = tuple({**op, "path": prefix + op["path"]} for op in admission.decision.patch)
        return Outcome(kind, name, doc, apply_patch(doc, patch), admission.decision, admission.lookups, patch=patch)
    admission = admit(_bare_request(doc, kind, operation, ns), settings, inspect, policies=policies, learned=learned)
    decision = admission.decision
    return Outcome(kind, name, doc, decision.obj, decision, admission.lookups, patch=decision.patch)


def _lookup_text(lookup: object) -> str:
    platforms = getattr(lookup, "platforms", None)
    if platforms is not None:
        return ", ".join(str(p) for p in platforms) or "no platforms"
    return f"cannot be inspected: {getattr(lookup, 'reason', lookup)}"


def explain(outcome: Outcome) -> dict[str, Any]:
    """The decision and its reasons, as data (printed as YAML or JSON)."""
    decision = outcome.decision
    out: dict[str, Any] = {"kind": outcome.kind, "name": outcome.name}
    if decision is None:
        return out
    out["allowed"] = decision.allowed
    out["changed"] = decision.changed
    out["images"] = {image: _lookup_text(lookup) for image, lookup in outcome.lookups.items()}
    if decision.common is not None:
        out["commonArchitectures"] = list(decision.common)
    out["reasons"] = list(decision.reasons)
    if decision.warnings:
        out["warnings"] = list(decision.warnings)
    if decision.message:
        out["message"] = decision.message
    return out


def render(outcome: Outcome, ns: argparse.Namespace) -> Any:
    if outcome.review is not None and not ns.explain:
        return outcome.review
    if ns.explain:
        return explain(outcome)
    if ns.patch:
        return list(outcome.patch)
    return outcome.mutated


def _make_inspect(ns: argparse.Namespace) -> Inspect:
    """The lookup service on static platforms when ``--platforms`` is given (no network), else the registry.

    The registry flags are checked either way: a bad one is an error even when ``--platforms`` makes it unused.
    ``noe mutate`` reads no pull Secret: a private image needs the node's credentials flags.
    """
    from noe_core.cli.registry_options import node_keychain_from_args, registry_settings_from_args  # noqa: PLC0415
    from noe_core.image.declared import StaticPlatforms  # noqa: PLC0415
    from noe_core.registry.lookup_service import LookupService  # noqa: PLC0415
    from noe_core.util.deadline import Deadline  # noqa: PLC0415

    registry_settings = registry_settings_from_args(ns)
    keychain = node_keychain_from_args(ns)
    platforms = require(ns, PLATFORMS)
    declared = require(ns, IMAGE_PLATFORMS)  # as noe serve reads it: before the registry
    timeout: float | None = None
    if platforms is not None:
        service = LookupService(static=StaticPlatforms.load(platforms))
    else:
        from noe_core.registry.resolver import Resolver  # noqa: PLC0415
        from noe_core.registry.transport import make_session  # noqa: PLC0415

        resolver = Resolver(make_session(registry_settings), settings=registry_settings, keychain=keychain)
        service = LookupService(StaticPlatforms.load(declared) if declared else None, resolver)
        timeout = ns.lookup_timeout

    def inspect(request: LookupRequest) -> LookupResult:
        deadline = Deadline.never() if timeout is None else Deadline.after(timeout)
        return service.inspect(request, deadline=deadline).result

    return inspect


def policy_files(ns: argparse.Namespace, err: TextIO) -> PolicyDocuments | None:
    """The ``--policy`` files, read once; each invalid policy is said on ``err`` (it is ignored whole)."""
    if not ns.policy:
        return None
    found = read_files(ns.policy)
    for rejected in found.rejected:
        print(f"noe {getattr(ns, 'command', 'mutate')}: policy ignored: {rejected}", file=err)
    return found


def run_mutate(
    ns: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        settings = policy_settings_from_args(ns)
        inspect = _make_inspect(ns)
        policies = policy_files(ns, err)
        learned_file = require(ns, LEARNED)
        learned = load_learned(learned_file) if learned_file else None
        docs = list(expand_lists(load_documents(ns.filename, stdin or sys.stdin)))
        outcomes = [
            evaluate(
                doc,
                settings=settings,
                inspect=inspect,
                namespace=ns.namespace or "default",
                operation=ns.operation,
                policies=policies.as_policies() if policies is not None else None,
                learned=learned,
            )
            for doc in docs
        ]
    except NoeError as exc:
        print(f"noe mutate: {exc}", file=err)
        return EXIT_BAD_INPUT
    rendered = [render(outcome, ns) for outcome in outcomes]
    if ns.output == "json":
        out.write(dump(rendered[0] if len(rendered) == 1 else rendered, "json"))
    else:
        out.write("---\n".join(dump(item, "yaml") for item in rendered))
    status = EXIT_ALLOWED
    for outcome in outcomes:
        decision = outcome.decision
        if decision is not None and not decision.allowed:
            label = f"{outcome.kind} {outcome.name}".strip()
            print(f"noe mutate: denied {label}: {decision.message}", file=err)
            status = EXIT_DENIED
    return status
