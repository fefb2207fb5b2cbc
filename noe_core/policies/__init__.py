"""Placement policies as Kubernetes objects: a cluster default, team exceptions, and the same YAML offline.

The contract is ``docs/policies.md``. Pure: no I/O beyond what the caller reads.
The settings they merge into (:class:`~.settings.PolicySettings`) live here,
below the placement rules that apply them.

* :mod:`.settings` — the placement settings and their flag syntax: ``PolicySettings``, ``ArchToleration``
* :mod:`.objects` — ``ClusterPlacementPolicy`` / ``PlacementPolicy`` documents → validated frozen values
* :mod:`.merge` — which settings a pod gets: ``PolicySet``, the one ``merge``, ``Policies``
* :mod:`.selection` — which policies select a pod and which do not, with the reason (``noe why``)
* :mod:`.documents` — policy files (``--policy FILE``) with ``Namespace`` documents for their labels
* :mod:`.status` — what noe says of each policy: the ``Accepted`` condition (``Verdict``)
* :mod:`.rollout` — rollout at admission: the cohort draw, the ``arch.noe.adevinta.com/rollout`` label
* :mod:`.rollback` — when a workload's rollout is rolled back: cohort against control (``rollback_verdict``)
* :mod:`.trail` — the decision trail: the ``arch.noe.adevinta.com/policies`` annotation
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
