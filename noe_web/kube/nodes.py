"""Nodes' platforms for ``kubectl debug`` checks (rule 18): one GET per node, kept briefly in a small cache.

The webhook reads a Node only for an ephemeral-container request whose pod does
not pin its platform itself, so reads are rare; a Node's OS, architecture,
Windows build and x86-64 labels do not change while it runs, so an answer is
kept for ``ttl`` seconds (failures for a few). The read is bounded by what is
left of the admission's deadline and never raises: any failure (no API access,
RBAC without ``get`` on nodes, a missing node, a slow API) becomes a
:class:`~noe_core.placement.ephemeral.NodeFailure` the policy turns into a warning.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from noe_core.image.node_platform import NodePlatform
from noe_core.placement.ephemeral import NodeFailure
from noe_core.util.deadline import Deadline
from noe_core.util.lru import LRUCache
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import KubeError

_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
NODE_READ_CAP = 2.0
"""Seconds one Node read may take at most, whatever the deadline leaves (the request is only a warning's worth)."""


class KubeNodes:
    """Node name → :class:`NodePlatform` through the Kubernetes API, cached; failures as :class:`NodeFailure`."""

    def __init__(
        self, kube: KubeClient | None, *, ttl: float = 60.0, failure_ttl: float = 5.0, maxsize: int = 512
    ) -> None:
        self._kube = kube
        self._ttl = ttl
        self._failure_ttl = failure_ttl
        self._cache: LRUCache[str, NodePlatform | NodeFailure] = LRUCache(maxsize)

    def platform(self, name: str, deadline: Deadline) -> NodePlatform | NodeFailure:
        """The platform node ``name`` states in its labels, or why it could not be read in time."""
        if self._kube is None:
            return NodeFailure("noe has no Kubernetes API access")
        if not _NODE_NAME.fullmatch(name):
            return NodeFailure("the pod's nodeName is not a node name")
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        budget = min(deadline.remaining(), NODE_READ_CAP)
        if budget <= 0:
            return NodeFailure("no time left in the admission to read it")
        try:
            node = self._kube.call("GET", f"/api/v1/nodes/{quote(name, safe='')}", timeout=budget)
        except KubeError as exc:
            failure = NodeFailure(str(exc))
            self._cache.set(name, failure, self._failure_ttl)
            return failure
        metadata = node.get("metadata") if isinstance(node, dict) else None
        labels = metadata.get("labels") if isinstance(metadata, dict) else None
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            return NodeFailure("the Node's labels cannot be read")
        found = NodePlatform.from_labels(labels)
        self._cache.set(name, found, self._ttl)
        return found
