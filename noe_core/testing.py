"""Builders and a scheduler predicate for testing placement policies offline.

Users check what noe will do to their workloads without a cluster::

    from noe_core import PolicySettings, decide, testing

    pod = testing.pod(images=["app:1"], labels={"team": "a"})
    decision = decide(pod, kind="Pod", operation="CREATE", namespace="default",
                      lookups=testing.platforms({"app:1": ["linux/arm64"]}),
                      settings=PolicySettings())
    assert testing.schedulable(decision.obj, testing.node("n1", "arm64"))
    assert not testing.schedulable(decision.obj, testing.node("n2", "amd64"))

Placement policies go through the same pipeline as in the cluster (the merge, their ``imagePlatforms``,
the rollout draw of a request uid, gate mode, the decision trail), and so do learned platforms::

    policies = testing.policies(
        testing.cluster_policy("arm-first", preferredArchitectures=[{"architecture": "arm64", "weight": 80}]),
        testing.namespace("team-a", {"env": "prod"}),
    )
    decision = testing.decide(testing.pod(["app:1"], namespace="team-a"), lookups, policies=policies)

or, for an AdmissionReview, ``admit(parse_admission_review(review), PolicySettings(), fixed(lookups),
policies=policies)``: the webhook's own path.

:func:`schedulable` implements the kube-scheduler filters that depend on
the pod spec alone (NodeName, NodeAffinity incl. nodeSelector, TaintToleration),
so tests can assert what a patch *means* rather than its exact shape.
:func:`runnable` adds what the kubelet checks next: every image has an entry
usable on the node (:func:`noe_core.image.node_platform.usable_on`, the contract's
definition the policy's terms are built from). :func:`node` builds Linux and
Windows nodes with the labels the kubelet and node-feature-discovery set
(``windows_build``, ``x86_64_level``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from noe_core.errors import InvalidPolicy
from noe_core.image.image_platforms import ImagePlatforms, Lookup, LookupFailure, Lookups
from noe_core.image.learned import LearnedPlatforms
from noe_core.image.node_platform import NodePlatform
from noe_core.image.platform import parse_platform
from noe_core.k8s.node_selection import schedulable as node_schedulable
from noe_core.k8s.node_selection import tolerates
from noe_core.k8s.workload import DAEMON_SET, POD, read_workload
from noe_core.placement.pipeline import decide as decide_one
from noe_core.placement.rules import Decision
from noe_core.policies.documents import read_documents
from noe_core.policies.merge import Policies
from noe_core.policies.objects import API_VERSION, CLUSTER_KIND, NAMESPACED_KIND
from noe_core.policies.settings import PolicySettings

__all__ = [
    "admission_review",
    "cluster_policy",
    "daemonset",
    "decide",
    "namespace",
    "node",
    "parse_taint",
    "placement_policy",
    "platforms",
    "pod",
    "policies",
    "runnable",
    "schedulable",
    "tolerates",
]


def _pod_spec(
    images: Sequence[str],
    *,
    init_images: Sequence[str],
    node_selector: Mapping[str, str] | None,
    affinity: Mapping[str, Any] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    node_name: str | None,
    volume_images: Sequence[str] = (),
    debug_images: Sequence[str] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{index}", "image": image} for index, image in enumerate(images)]}
    if init_images:
        spec["initContainers"] = [{"name": f"init{index}", "image": image} for index, image in enumerate(init_images)]
    if volume_images:
        spec["volumes"] = [
            {"name": f"v{index}", "image": {"reference": image, "pullPolicy": "IfNotPresent"}}
            for index, image in enumerate(volume_images)
        ]
    if debug_images:
        spec["ephemeralContainers"] = [
            {"name": f"debugger-{index}", "image": image, "stdin": True, "tty": True}
            for index, image in enumerate(debug_images)
        ]
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if affinity is not None:
        spec["affinity"] = _plain(affinity)
    if tolerations is not None:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_name:
        spec["nodeName"] = node_name
    return spec


def _plain(value: Any) -> Any:
    """A JSON-shaped deep copy, so builders never share state with the caller."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def pod(
    images: Sequence[str] = ("nginx:1.27",),
    init_images: Sequence[str] = (),
    *,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    node_name: str | None = None,
    name: str = "test-pod",
    namespace: str = "default",
    volume_images: Sequence[str] = (),
    debug_images: Sequence[str] = (),
) -> dict[str, Any]:
    """A v1 Pod as the API server sends it to a webhook at CREATE.

    ``volume_images`` become image volumes (``spec.volumes[].image.reference``);
    ``debug_images`` ephemeral containers, as ``kubectl debug`` adds them (an
    UPDATE of ``pods/ephemeralcontainers``: see :func:`admission_review`).
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": _pod_spec(
            images,
            init_images=init_images,
            node_selector=node_selector,
            affinity=affinity,
            tolerations=tolerations,
            node_name=node_name,
            volume_images=volume_images,
            debug_images=debug_images,
        ),
    }


def daemonset(
    images: Sequence[str] = ("nginx:1.27",),
    init_images: Sequence[str] = (),
    *,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    name: str = "test-ds",
    namespace: str = "default",
) -> dict[str, Any]:
    """An apps/v1 DaemonSet whose pod template carries ``labels`` (also used as its selector)."""
    template_labels = dict(labels) if labels else {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": dict(template_labels)},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": _pod_spec(
                    images,
                    init_images=init_images,
                    node_selector=node_selector,
                    affinity=affinity,
                    tolerations=tolerations,
                    node_name=None,
                ),
            },
        },
    }


_GROUPS = {"Pod": ("", "v1", "pods"), "DaemonSet": ("apps", "v1", "daemonsets")}


def admission_review(
    obj: Mapping[str, Any],
    operation: str = "CREATE",
    *,
    api_version: str = "admission.k8s.io/v1",
    dry_run: bool = False,
    namespace: str | None = None,
    uid: str | None = None,
    old_object: Mapping[str, Any] | None = None,
    sub_resource: str = "",
) -> dict[str, Any]:
    """The AdmissionReview the API server would POST for ``obj`` (a Pod or DaemonSet).

    ``sub_resource="ephemeralcontainers"`` with ``operation="UPDATE"`` is ``kubectl debug``'s
    request: ``obj`` the pod with its new ephemeral containers, ``old_object`` the pod before.
    """
    kind = str(obj.get("kind", "Pod"))
    group, version, resource = _GROUPS.get(kind, ("", "v1", kind.lower() + "s"))
    metadata = obj.get("metadata") or {}
    ns = namespace if namespace is not None else str(metadata.get("namespace", "default"))
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": str(metadata.get("name", "")),
        "namespace": ns,
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": _plain(obj),
        "oldObject": _plain(old_object) if old_object is not None else None,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
        request["requestSubResource"] = sub_resource
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": request}


def platforms(answers: Mapping[str, Sequence[str] | str]) -> dict[str, Lookup]:
    """Lookups from plain data: a list of platform strings, or a string that is the failure reason."""
    out: dict[str, Lookup] = {}
    for image, value in answers.items():
        if isinstance(value, str):
            out[image] = LookupFailure(value)
        else:
            out[image] = ImagePlatforms(tuple(parse_platform(p) for p in value))
    return out


def cluster_policy(
    name: str, spec: Mapping[str, Any] | None = None, *, generation: int = 1, **fields: Any
) -> dict[str, Any]:
    """A ``ClusterPlacementPolicy`` document; ``spec`` and keyword fields are its spec (camelCase, as in YAML)."""
    return _policy(CLUSTER_KIND, name, "", {**(spec or {}), **fields}, generation)


def placement_policy(
    name: str, namespace: str, spec: Mapping[str, Any] | None = None, *, generation: int = 1, **fields: Any
) -> dict[str, Any]:
    """A ``PlacementPolicy`` document of ``namespace``; ``spec`` and keyword fields are its spec."""
    return _policy(NAMESPACED_KIND, name, namespace, {**(spec or {}), **fields}, generation)


def _policy(kind: str, name: str, namespace: str, spec: Mapping[str, Any], generation: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "generation": generation}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": _plain(spec)}


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A v1 Namespace: policy files and :func:`policies` read its labels for namespace selectors."""
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def policies(*docs: Mapping[str, Any]) -> Policies:
    """Placement policies and Namespaces as an admission reads them, judged as in the cluster.

    Raises :class:`~noe_core.errors.InvalidPolicy` for the first invalid policy, so a test
    never runs against a policy the cluster would ignore without saying so.
    """
    found = read_documents(list(docs), "noe_core.testing.policies")
    if found.rejected:
        first = found.rejected[0]
        raise InvalidPolicy(first.reason, str(first))
    return found.as_policies()


def parse_taint(text: str) -> dict[str, str]:
    """``key[=value]:Effect`` → a node taint."""
    body, sep, effect = text.rpartition(":")
    if not sep or not body:
        raise ValueError(f"taint {text!r} must read key[=value]:Effect")
    key, has_value, value = body.partition("=")
    taint = {"key": key, "effect": effect}
    if has_value:
        taint["value"] = value
    return taint


def node(
    name: str,
    arch: str,
    os: str = "linux",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str] | str] = (),
    windows_build: str = "",
    x86_64_level: int = 1,
) -> dict[str, Any]:
    """A v1 Node with the well-known labels the kubelet sets; ``arch`` may carry a variant (``arm/v7``).

    ``windows_build`` (``10.0.20348``) sets ``node.kubernetes.io/windows-build``; ``x86_64_level``
    2 to 4 sets node-feature-discovery's cumulative ``feature.node.kubernetes.io/cpu-cpuid.X86_64_V<n>``.
    """
    platform = NodePlatform(os, arch.split("/", 1)[0], windows_build, x86_64_level)
    node_labels = {**platform.labels(), "kubernetes.io/hostname": name}
    node_labels.update(labels or {})
    spec: dict[str, Any] = {}
    taint_list = [parse_taint(t) if isinstance(t, str) else dict(t) for t in taints]
    if taint_list:
        spec["taints"] = taint_list
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": spec}


def _spec_of(pod_or_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    kind = pod_or_spec.get("kind")
    if kind == "DaemonSet":
        template: Mapping[str, Any] = pod_or_spec.get("spec", {}).get("template", {})
        return template.get("spec") or {}
    if kind == "Pod" or ("spec" in pod_or_spec and "containers" not in pod_or_spec):
        return pod_or_spec.get("spec") or {}
    return pod_or_spec


def schedulable(pod_or_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """True when kube-scheduler's spec-only filters let the pod (a Pod, a DaemonSet or a pod spec) run on
    ``node``: :func:`noe_core.k8s.node_selection.schedulable` on its pod spec."""
    return node_schedulable(_spec_of(pod_or_spec), node)


def runnable(
    pod_or_workload: Mapping[str, Any], node: Mapping[str, Any], lookups: Lookups, *, x86_64_levels: str = "off"
) -> bool:
    """:func:`schedulable`, and every image (containers, init containers, image volumes) has an entry usable
    on ``node`` (:func:`noe_core.image.node_platform.usable_on`): what the kubelet's pulls would find.

    Images whose lookup is missing or failed prove nothing and are skipped, as the
    policy leaves them out; an artifact mounted as an image volume runs anywhere,
    and one used as a container's image nowhere (rule 17).
    """
    if not schedulable(pod_or_workload, node):
        return False
    kind = DAEMON_SET if pod_or_workload.get("kind") == DAEMON_SET else POD
    workload = read_workload(pod_or_workload, kind)
    platform = NodePlatform.from_labels((node.get("metadata") or {}).get("labels") or {})
    for image in workload.images:
        found = lookups.get(image)
        if not isinstance(found, ImagePlatforms):
            continue
        if found.is_artifact:
            if image in workload.volume_images:
                continue
            return False
        if not found.usable_on(platform, levels=x86_64_levels == "nfd"):
            return False
    return True


def decide(
    obj: Mapping[str, Any],
    lookups: Lookups,
    settings: PolicySettings | None = None,
    *,
    policies: Policies | None = None,
    learned: LearnedPlatforms | None = None,
    uid: str = "",
    operation: str = "CREATE",
) -> Decision:
    """The webhook's decision for a Pod or DaemonSet built here (its namespace from its metadata): the one
    pipeline (:func:`noe_core.placement.pipeline.decide`), with the flags (``settings``, default ones), the
    placement policies, the learned platforms and the request ``uid`` the rollout draws by."""
    kind = DAEMON_SET if obj.get("kind") == DAEMON_SET else POD
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    return decide_one(
        obj,
        kind=kind,
        operation=operation,
        namespace=namespace,
        lookups=lookups,
        settings=settings or PolicySettings(),
        policies=policies,
        learned=learned,
        uid=uid,
    )
