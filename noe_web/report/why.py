"""``noe why POD``: why a pod is Pending, or on its node, as noe sees it — read from the live cluster.

Reads only what the answer needs: the pod, its namespace (when a cluster policy
selects namespaces by label), the placement policies that can concern it (the
cluster's and its namespace's), the learned platforms, the Nodes, and the pod's
Events; then each image from the shared cache (``--cache-url``) or its registry
with the pod's pull Secrets (when the caller may not read Secrets it says so and
tries without). It decides with the pipeline every path of noe calls, on the pod
as it was admitted (:meth:`~noe_core.placement.decider.Decider.admitted`), and
prints :mod:`noe_core.report.why`'s answer. Give it the placement flags
``noe serve`` runs with (``--cluster-schedulable-archs``, ``--preferred-arch`` …,
or its ``NOE_*`` environment) to get the webhook's decision.

Exit status: 0 for every verdict, 2 for a usage error, 1 when the pod cannot be read.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO
from urllib.parse import quote

from noe_core import NoeError
from noe_core.cli.flags import LOOKUP_TIMEOUT, PLATFORMS, add_flags, require
from noe_core.cli.output import dump
from noe_core.cli.policy_options import add_policy_arguments, policy_settings_from_args
from noe_core.cli.registry_options import node_keychain_from_args, registry_settings_from_args
from noe_core.errors import InvalidObject, InvalidSettings
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.admitted import as_admitted
from noe_core.placement.decider import Decider, FixedLearned
from noe_core.placement.node_fit import NodeFacts
from noe_core.placement.scheduling import split_platform_terms
from noe_core.policies.merge import namespace_labels
from noe_core.policies.selection import PolicyVerdict, policy_verdicts
from noe_core.report.why import PodState, Why, explain, table
from noe_core.util.deadline import Deadline
from noe_web.flags import CONTEXT, KUBECONFIG, NAMESPACE, NOE_NAMESPACE, SHARED_CACHE_BOUNDED_FLAGS
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import KubeError
from noe_web.registry_cache import shared_cache_config
from noe_web.report.flags import API_TIMEOUT, WHY_OUTPUT
from noe_web.report.inventory import ClusterReader
from noe_web.report.lookups import report_service

EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE = 0, 1, 2


class UnreadablePod(NoeError):
    """The pod could not be read (not found, forbidden, the API unreachable): exit 1."""


def add_why_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "why",
        help="why a pod is Pending, or on its node, as noe sees it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("pod", metavar="POD", help="the pod: NAME or pod/NAME")
    add_flags(parser.add_argument_group("cluster"), (KUBECONFIG, CONTEXT, NAMESPACE, API_TIMEOUT, NOE_NAMESPACE))
    add_flags(parser.add_argument_group("images"), (PLATFORMS, LOOKUP_TIMEOUT))
    add_flags(parser.add_argument_group("cache shared with noe serve"), SHARED_CACHE_BOUNDED_FLAGS)
    add_flags(parser.add_argument_group("output"), (WHY_OUTPUT,))
    add_policy_arguments(parser)
    from noe_core.cli.registry_options import add_registry_arguments  # noqa: PLC0415

    add_registry_arguments(parser)
    parser.set_defaults(run=run_why)


def pod_name(text: str) -> str:
    """``NAME`` or ``pod/NAME`` (``pods/``, ``po/`` as kubectl takes them); anything else is a usage error."""
    kind, sep, name = text.rpartition("/")
    if sep and kind.lower() not in ("pod", "pods", "po"):
        raise InvalidSettings(f"{text!r}: noe why explains pods (POD or pod/NAME), not {kind}")
    if not name:
        raise InvalidSettings(f"{text!r} names no pod")
    return name


def run_why(
    ns: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        why = _run(ns, err, os.environ if environ is None else environ)
    except UnreadablePod as exc:
        print(f"noe why: {exc}", file=err)
        return EXIT_UNREADABLE
    except NoeError as exc:
        print(f"noe why: {exc}", file=err)
        return EXIT_USAGE
    except KubeError as exc:  # the pod was read; what followed failed
        print(f"noe why: Kubernetes API: {exc}", file=err)
        return EXIT_UNREADABLE
    out.write(table(why) if ns.output == "table" else dump(why.as_data(), ns.output))
    return EXIT_OK


def _run(ns: argparse.Namespace, err: TextIO, environ: Mapping[str, str]) -> Why:
    from noe_web.kube.config import discover  # noqa: PLC0415

    name = pod_name(ns.pod)
    settings = policy_settings_from_args(ns)
    # every flag judged before anything is read: a bad one is a usage error naming it
    registry_settings_from_args(ns)
    node_keychain_from_args(ns)
    require(ns, PLATFORMS)
    shared = shared_cache_config(ns)
    config = discover(require(ns, KUBECONFIG), environ, context=ns.context or None, home=True)
    if config is None:
        raise InvalidSettings("no Kubernetes API: give --kubeconfig, set $KUBECONFIG, or run in a pod")
    namespace = ns.namespace or config.namespace
    client = KubeClient(config, timeout=ns.api_timeout)
    try:
        pod = client.call("GET", f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}")
    except KubeError as exc:
        raise UnreadablePod(f"pod {namespace}/{name} not read: {exc}") from exc
    try:
        workload = read_workload(pod, POD)
    except InvalidObject as exc:
        raise UnreadablePod(f"pod {namespace}/{name} cannot be read as a pod: {exc}") from exc
    reader = ClusterReader(client)
    policies, notes = reader.policies(namespace)
    _say(err, notes)
    from noe_web.kube.namespace import own_namespace  # noqa: PLC0415

    learned, notes = reader.learned(ns.noe_namespace or own_namespace())
    _say(err, notes)
    nodes = [NodeFacts.from_node(n) for n in client.list_objects("/api/v1/nodes")]
    events = _events(client, namespace, workload.meta.uid)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="noe-why") as pool:
        from noe_web.kube.pull_secrets import KubePullSecrets  # noqa: PLC0415

        secrets = None if require(ns, PLATFORMS) else KubePullSecrets(client, pool, remember=True)
        service = report_service(ns, pool, secrets, shared)
        decider = Decider(settings, service, policies, FixedLearned(learned), lookup_timeout=ns.lookup_timeout)
        deadline = Deadline.after(ns.lookup_timeout)
        placed = decider.admitted(workload, namespace, deadline=deadline)
        if placed is not None:
            decision, terms = placed
        else:
            before = as_admitted(workload) or read_workload(_unbound(pod), POD)
            decision, terms = decider.decide(before, namespace, stage="admitted", deadline=deadline), None
    _say(err, decision.warnings)
    verdicts: tuple[PolicyVerdict, ...] = ()
    if policies is not None:
        verdicts = policy_verdicts(
            policies.policy_set,
            namespace=namespace,
            namespace_labels=namespace_labels(namespace, policies.namespaces.get(namespace)),
            pod_labels=workload.labels,
            merged=policies.settings_for(settings, namespace=namespace, pod_labels=workload.labels),
        )
    why = explain(
        PodState.from_pod(pod),
        images=workload.images,
        decision=decision,
        terms=terms,
        own_terms=bool(split_platform_terms(workload.spec)[1]),
        nodes=nodes,
        tolerations=workload.spec.get("tolerations") or [],
        policies=verdicts,
        levels=settings.x86_64_levels == "nfd",
        events=events,
    )
    return why


def _unbound(pod: Mapping[str, Any]) -> dict[str, Any]:
    spec = dict(pod.get("spec") or {})
    spec.pop("nodeName", None)
    return {**pod, "spec": spec}


def _events(client: KubeClient, namespace: str, uid: str) -> list[tuple[str, str]]:
    """The pod's Events, oldest first, as (reason, message) (none when they cannot be read)."""
    if not uid:
        return []
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
    try:
        found = client.call("GET", path, params={"fieldSelector": f"involvedObject.uid={uid}"})
    except KubeError:
        return []
    items = found.get("items") if isinstance(found, Mapping) else None
    out = []
    for event in items if isinstance(items, list) else ():
        if isinstance(event, Mapping):
            out.append((str(event.get("reason") or ""), str(event.get("message") or "")[:500]))
    return out


def _say(stream: TextIO, notes: tuple[str, ...] | list[str]) -> None:
    for note in notes:
        print(f"noe why: {note}", file=stream)


__all__ = ["add_why_parser", "pod_name", "run_why"]
