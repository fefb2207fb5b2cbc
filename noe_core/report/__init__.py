"""``noe report``'s answer, pure: what could run on each architecture, what it costs, and the way there.

* :mod:`.pods` — the pods the report reads: :class:`~.pods.PodEntry`, ``read_pod``
* :mod:`.build` — the report: each workload's status per architecture, and what blocks it (``build_report``)
* :mod:`.pricing` — ``--prices`` / ``--memory-prices``: exact monthly costs per architecture
* :mod:`.plan` — the migration plan's values: steps, upgrades, savings
* :mod:`.planner` — the plan computed: the target, the savings, the rebuild order (``with_plan``)
* :mod:`.why` — ``noe why``'s answer for one pod: policies, images, allowed nodes, node counts, a verdict
* :mod:`.policy_reports` — the report as ``wgpolicyk8s.io/v1alpha2`` PolicyReports, one per namespace
* :mod:`.version_tags` — version tags (``1.2.3``, ``v2``) and which newer tags to try (``newer_tags``)
"""

from noe_core import _moved


def __getattr__(name: str) -> object:
    """The names of the module ``noe_core.report`` this package replaced, for one release (with a warning)."""
    return _moved.attribute(__name__, name)
