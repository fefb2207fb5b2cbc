"""Whether a bound pod's images run on its node: the misplaced check, judged once per distinct inputs.

A large cluster's pods are mostly replicas. The pods of one workload carry the same labels,
containers and pull Secrets (kept once by :class:`~.podview.SharedParts`), so the one placement
pipeline reads the same inputs for each of them, the lookup service gives the same answers, and
the check gives the same verdict on every node of one platform. At 60,000 pods that check, done
afresh for each pod, was most of the controller's first reconcile.

:class:`MisplacedCheck` keeps what is the same:

* a pod's decision inputs (:class:`~noe_core.k8s.workload.Workload`) per namespace, labels and
  spec fields other than ``nodeName`` — the only spec field the decision of a running pod does
  not read — compared by identity of the shared parts;
* the verdict per lookups and learned platforms (compared by identity: the declared platforms and
  the resolver's cache give the same object for as long as an answer stands) and node platform;
* whether a pod's container statuses can say ``exec format error`` at all, per shared statuses;
* a node's platform, per version of the node the cache holds.

It stays exact: each pod's merged settings and lookups are still read when it is examined, exactly
as :meth:`~noe_core.placement.decider.Decider.decide` reads them, so a policy, a learned
architecture or a cache answer that changed gives other objects and so a verdict of its own. A key
holds ids of objects its entry keeps alive, so an id is never reused while its entry stands. The
memories are explicit caches, bounded; concurrent workers may compute an entry twice, never read a
half-written one (a dict item is set whole).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.image.node_platform import NodePlatform
from noe_core.k8s.object_meta import read_object_meta
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.placement.compatibility import Unsupported, unsupported_images
from noe_core.placement.decider import Decider
from noe_web.controller.podview import container_states, node_platform

LIMIT = 16_384
"""Entries per memory; past it a memory starts again."""
TEMPLATES = 4_096
"""Remembered Workloads (about 1 KB each): a cluster's replicas are examined workload by workload (the full
pass goes in list order), so a few thousand are enough; pods that share nothing (a StatefulSet's pods carry
their own name as a label) cost a read each, as without the memory, and hold no more than these."""


class _Memory:
    """A bounded dict: past ``limit`` entries it is emptied (what it held is computed again when asked)."""

    def __init__(self, limit: int) -> None:
        self.items: dict[Hashable, Any] = {}
        self.limit = limit

    def put(self, key: Hashable, value: Any) -> None:
        if len(self.items) >= self.limit:
            self.items.clear()
        self.items[key] = value


class MisplacedCheck:
    """The images of a bound pod with no build for its node, as the one pipeline reads them."""

    def __init__(
        self, decider: Decider, *, levels: bool = False, limit: int = LIMIT, templates: int = TEMPLATES
    ) -> None:
        self.decider, self.levels = decider, levels
        self._workloads, self._verdicts, self._statuses = _Memory(templates), _Memory(limit), _Memory(limit)
        self._nodes = _Memory(limit)
        self.judged = 0
        """Verdicts worked out (not remembered): what a test counts."""

    def unsupported(self, workload: Workload, namespace: str, node: NodePlatform) -> tuple[Unsupported, ...]:
        """The pod's images that offer nothing usable on ``node`` (an image not inspected proves nothing)."""
        decider = self.decider
        prepared = decider.prepare(workload, namespace, stage="running")
        found = decider.result_for(prepared)
        if found is None:
            return ()
        answers = found.lookups
        learned = prepared.inputs.learned
        key = (tuple((image, id(answer)) for image, answer in answers.items()), id(learned), node)
        kept = self._verdicts.items.get(key)
        if kept is None:
            decision = prepared.decide(found)
            bad = unsupported_images(workload.images, decision.lookups, node=node, levels=self.levels)
            kept = (tuple(answers.values()), learned, bad)  # the objects whose ids the key holds, kept alive
            self._verdicts.put(key, kept)
            self.judged += 1
        verdict: tuple[Unsupported, ...] = kept[2]
        return verdict

    def fine(self, pod: Mapping[str, Any], namespace: str, node: NodePlatform) -> bool:
        """``True`` when examining the bound pod has nothing to say or do: no container state says or may say
        (crash-looping) ``exec format error``, and every inspected image runs on ``node``. ``False`` when
        the pod needs the full examination (or is not readable: the examination says why)."""
        if not self.quiet(pod["status"]["containerStatuses"]):
            return False
        workload = self._workload(pod, namespace)
        return workload is not None and not (workload.images and self.unsupported(workload, namespace, node))

    def platform(self, node: Mapping[str, Any]) -> NodePlatform:
        """:func:`~.podview.node_platform` of a node as the cache keeps it, read once per version of the node."""
        kept = self._nodes.items.get(id(node))
        if kept is None:
            kept = (node, node_platform(node))
            self._nodes.put(id(node), kept)
        platform: NodePlatform = kept[1]
        return platform

    def quiet(self, statuses: list[dict[str, Any]]) -> bool:
        """No container crash-looping, no state message saying ``exec format error``."""
        key = id(statuses)
        kept = self._statuses.items.get(key)
        if kept is None:
            calm = not any(c.crash_looping or c.says_exec_format_error for c in container_states(statuses))
            kept = (statuses, calm)
            self._statuses.put(key, kept)
        calm_now: bool = kept[1]
        return calm_now

    def _workload(self, pod: Mapping[str, Any], namespace: str) -> Workload | None:
        """The decision inputs of the pod, read once for the replicas that share them (``None``: unreadable).

        The decision of a running pod reads its namespace, labels and images (containers, image
        volumes, pull Secrets), never its name, uid or node: one replica's Workload stands for all.
        """
        spec = pod["spec"]
        labels = pod["metadata"].get("labels")
        parts: list[Hashable] = [namespace, id(labels)]
        for field, value in spec.items():
            if field != "nodeName":
                parts += (field, id(value))
        key = tuple(parts)
        kept = self._workloads.items.get(key)
        if kept is None:
            workload: Workload | None
            try:
                meta = read_object_meta(pod)
                if type(labels) is dict:  # its labels are valid (read): kept as the pods share them, not copied
                    meta = replace(meta, labels=labels)
                workload = read_workload(pod, POD, meta=meta)
            except InvalidObject:
                workload = None
            # the labels and spec values whose ids the key holds, kept alive with it
            kept = (labels, tuple(spec.values()), workload)
            self._workloads.put(key, kept)
        found: Workload | None = kept[2]
        return found
