"""The pods ``noe report`` reports on: from files (``-f``) or the live cluster, with their top owners.

The cluster is listed page by page (Pods, then the ReplicaSets and Jobs that own
them, only when some pod has such an owner); a file holds what ``kubectl get
pods -A -o json`` prints (a List, or several YAML/JSON documents).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from noe_core import InvalidObject
from noe_core.image.learned import CONFIGMAP, LearnedPlatforms, read_learned
from noe_core.k8s.owners import INTERMEDIATE_KINDS, Owners
from noe_core.policies.documents import read_documents
from noe_core.policies.merge import Policies
from noe_core.policies.objects import CLUSTER_KIND, GROUP, NAMESPACED_KIND, VERSION
from noe_core.report.pods import PodEntry, read_pod


@dataclass(frozen=True)
class Inventory:
    """The pods to report on, where they came from, and what was said about reading them."""

    pods: tuple[PodEntry, ...]
    source: str
    notes: tuple[str, ...] = ()


def _objects(docs: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    """Documents and the items of ``List``/``PodList``… documents, each given its kind."""
    for doc in docs:
        if not isinstance(doc, Mapping):
            raise InvalidObject(f"expected Kubernetes objects, found a {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            item_kind = kind[: -len("List")] or None
            for item in doc["items"]:
                if not isinstance(item, Mapping):
                    raise InvalidObject(f"{kind} items must be objects, found a {type(item).__name__}")
                yield item if "kind" in item or item_kind is None else {**item, "kind": item_kind}
        else:
            yield doc


def pods_from_documents(docs: Iterable[Any], source: str) -> Inventory:
    """Pods from decoded documents; ReplicaSets and Jobs among them tell top owners."""
    pods: list[Mapping[str, Any]] = []
    parents: list[Mapping[str, Any]] = []
    skipped: Counter[str] = Counter()
    for obj in _objects(docs):
        kind = obj.get("kind")
        if kind == "Pod":
            pods.append(obj)
        elif kind in INTERMEDIATE_KINDS:
            parents.append(obj)
        else:
            skipped[str(kind or "(no kind)")] += 1
    owners = Owners.from_objects(parents)
    notes = []
    if skipped:
        listed = ", ".join(f"{kind}: {count}" for kind, count in sorted(skipped.items()))
        notes.append(f"skipped {sum(skipped.values())} objects that are not Pods, ReplicaSets or Jobs ({listed})")
    return Inventory(tuple(read_pod(pod, owners) for pod in pods), source, tuple(notes))


def pods_from_file(filename: str, stdin: TextIO) -> Inventory:
    from noe_core.cli.mutate import load_documents  # noqa: PLC0415 - the one YAML/JSON document reader

    label = "standard input" if filename == "-" else filename
    return pods_from_documents(load_documents(filename, stdin), label)


@dataclass
class ClusterReader:
    """Lists what the report needs from the API: Pods, and the ReplicaSets and Jobs that own them."""

    client: Any  # noe_web.kube.client.KubeClient
    namespace: str = ""

    def _path(self, prefix: str, resource: str) -> str:
        from urllib.parse import quote  # noqa: PLC0415

        return (
            f"{prefix}/namespaces/{quote(self.namespace, safe='')}/{resource}"
            if self.namespace
            else (f"{prefix}/{resource}")
        )

    def learned(self, namespace: str) -> tuple[LearnedPlatforms, tuple[str, ...]]:
        """The ConfigMap ``noe-learned-platforms`` of noe's namespace; none (with a note) when unreadable."""
        from urllib.parse import quote  # noqa: PLC0415

        from noe_web.kube.errors import KubeError, NotFound  # noqa: PLC0415

        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{CONFIGMAP}"
        try:
            found = self.client.call("GET", path)
        except NotFound:
            return LearnedPlatforms(), ()
        except KubeError as exc:
            return LearnedPlatforms(), (f"{namespace}/{CONFIGMAP} not read ({exc}): learned platforms not applied",)
        data = found.get("data") if isinstance(found, Mapping) else None
        return LearnedPlatforms(read_learned(data)), ()

    def policies(self, namespace: str = "") -> tuple[Policies | None, tuple[str, ...]]:
        """The cluster's placement policies and Namespaces, listed once, judged as the webhook judges them
        (``None`` with a note when the CRDs are not installed or cannot be listed: the flags alone apply).

        ``namespace``: only what can concern that namespace's pods (``noe why``): the cluster policies, that
        namespace's policies, and that one Namespace.
        """
        from urllib.parse import quote  # noqa: PLC0415

        from noe_web.kube.errors import KubeError, NotFound  # noqa: PLC0415

        where = f"namespaces/{quote(namespace, safe='')}/" if namespace else ""
        docs: list[Mapping[str, Any]] = []
        try:
            for kind, plural in ((CLUSTER_KIND, "clusterplacementpolicies"), (NAMESPACED_KIND, "placementpolicies")):
                path = f"/apis/{GROUP}/{VERSION}/{where if kind == NAMESPACED_KIND else ''}{plural}"
                docs.extend({**item, "kind": kind} for item in self.client.list_objects(path))
        except NotFound:
            return None, ()
        except KubeError as exc:
            return None, (f"placement policies not read ({exc}): the flags alone apply",)
        found = read_documents(docs, "the cluster")
        if found.as_policies().policy_set.reads_namespace_labels:  # else a namespace's name is all they read
            try:
                if namespace:
                    docs.append({**self.client.call("GET", f"/api/v1/namespaces/{quote(namespace, safe='')}"),
                                 "kind": "Namespace"})  # fmt: skip
                else:
                    docs.extend({**i, "kind": "Namespace"} for i in self.client.list_objects("/api/v1/namespaces"))
            except KubeError as exc:
                return None, (f"Namespaces not read ({exc}): placement policies not applied",)
            found = read_documents(docs, "the cluster")
        notes = tuple(f"policy ignored: {rejected}" for rejected in found.rejected)
        return found.as_policies(), notes

    def inventory(self) -> Inventory:
        pods = [{**p, "kind": "Pod"} for p in self.client.list_objects(self._path("/api/v1", "pods"))]
        owned_by = {
            ref.get("kind")
            for p in pods
            for ref in (p.get("metadata") or {}).get("ownerReferences") or ()
            if isinstance(ref, Mapping)
        }
        parents: list[Mapping[str, Any]] = []
        if "ReplicaSet" in owned_by:
            parents += (
                {**o, "kind": "ReplicaSet"}
                for o in self.client.list_objects(self._path("/apis/apps/v1", "replicasets"))
            )
        if "Job" in owned_by:
            parents += ({**o, "kind": "Job"} for o in self.client.list_objects(self._path("/apis/batch/v1", "jobs")))
        owners = Owners.from_objects(parents)
        return Inventory(tuple(read_pod(pod, owners) for pod in pods), f"cluster {self.client.config.server}")
