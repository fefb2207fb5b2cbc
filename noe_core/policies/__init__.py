"""Placement policies as Kubernetes objects: a cluster default, team exceptions, and the same YAML offline.

The contract is ``docs/policies.md``. Pure: no I/O beyond what the caller reads.

* :mod:`.objects` — ``ClusterPlacementPolicy`` / ``PlacementPolicy`` documents → frozen, validated values
  (:func:`~.objects.read_policy`; an invalid one raises :class:`~noe_core.errors.InvalidPolicy`);
* :mod:`.merge` — which settings a pod gets: :class:`~.merge.PolicySet` (indexed by namespace) and
  :func:`~.merge.merge`, the one merge the webhook, ``noe mutate``, the controller and users' tests call;
* :mod:`.documents` — policy files (``--policy FILE``) with ``Namespace`` documents for their labels.
"""

from noe_core.policies.documents import PolicyDocuments, Rejected, read_documents
from noe_core.policies.merge import MergedSettings, PolicySet, merge, namespace_labels
from noe_core.policies.objects import PlacementPolicy, PolicyRef, Rollout, read_policy, read_ref

__all__ = [
    "MergedSettings",
    "PlacementPolicy",
    "PolicyDocuments",
    "PolicyRef",
    "PolicySet",
    "Rejected",
    "Rollout",
    "merge",
    "namespace_labels",
    "read_documents",
    "read_policy",
    "read_ref",
]
