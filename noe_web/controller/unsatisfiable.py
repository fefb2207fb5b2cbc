"""Pods noe placed that no node can take: one Warning ``NoMatchingNode`` each, and a gauge to alert on.

The scheduler says a pod is unschedulable (``PodScheduled=False``, reason
``Unschedulable``) for many reasons; only one of them is noe's business: the
architectures noe required leave no Ready, uncordoned node whose taints the pod
tolerates (an arm64 pool scaled to zero, or tainted while it is trialled). The
pod would wait for ever, silently. This check runs the one placement pipeline
for the pod as it was admitted (:mod:`noe_core.placement.provenance`), so it
speaks only of pods whose terms are noe's, and counts the Nodes against the
Decision's allowed set (:func:`noe_core.placement.node_fit.fit`). A pod Pending
for any other reason is left alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.offer import Offer
from noe_core.k8s.object_meta import read_object_meta
from noe_core.k8s.workload import POD, Workload, read_workload
from noe_core.placement.node_fit import NodeFacts, NodeFit, fit
from noe_core.placement.rules import Decision
from noe_web.controller.actions import Actions
from noe_web.controller.metrics import ControllerMetrics
from noe_web.controller.podview import is_terminating, unschedulable_because
from noe_web.kube.events import WARNING, object_ref
from noe_web.kube.informer import Key

REASON_NO_MATCHING_NODE = "NoMatchingNode"

Said = Callable[[Any], bool]
"""``True`` the first time a key is seen (the reconciler's bounded memory of what it said)."""


class UnsatisfiableCheck:
    """Which Pending pods noe placed have no node left, kept current as pods change."""

    def __init__(
        self,
        *,
        placement: Callable[[Workload, str], tuple[Decision, Offer] | None],
        nodes: Callable[[], Iterable[Mapping[str, Any]]],
        actions: Actions,
        metrics: ControllerMetrics,
        said: Said,
        levels: bool,
    ) -> None:
        self._placement, self._nodes, self._actions = placement, nodes, actions
        self._metrics, self._said, self._levels = metrics, said, levels
        self._waiting: set[Key] = set()
        self._lock = threading.Lock()

    def observe(self, key: Key, pod: Mapping[str, Any] | None) -> NodeFit | None:
        """Look at an unbound pod (``None``: it is gone or bound); the node fit when none is left for it."""
        found = self._judge(key, pod) if pod is not None else None
        if found is None and key not in self._waiting:
            return None  # most pods, and nothing to forget: no lock taken from the other workers
        with self._lock:
            if found is None:
                self._waiting.discard(key)
            else:
                self._waiting.add(key)
            self._metrics.unsatisfiable.set(len(self._waiting))
        return found

    def _judge(self, key: Key, pod: Mapping[str, Any]) -> NodeFit | None:
        if unschedulable_because(pod) is None or is_terminating(pod):
            return None
        try:
            meta = read_object_meta(pod)
            workload = read_workload(pod, POD, meta=meta)
        except InvalidObject:
            return None
        placed = self._placement(workload, key[0])
        if placed is None:
            return None  # noe's terms are not on this pod: whatever keeps it Pending is not noe's
        decision, terms = placed
        nodes = [node["facts"] for node in self._nodes() if isinstance(node.get("facts"), NodeFacts)]
        result = fit(terms, nodes, workload.spec.get("tolerations") or [], levels=self._levels)
        if result.satisfiable:
            return None
        if self._said((meta.uid, REASON_NO_MATCHING_NODE)):
            self._metrics.no_matching_node.inc()
            self._actions.event(
                object_ref(meta, kind=POD, namespace=key[0]),
                WARNING,
                REASON_NO_MATCHING_NODE,
                _message(result, decision),
            )
        return result


SHOWN_IMAGES = 3
"""Images named in the Event (an Event's message is short; ``noe why`` lists them all)."""


def _message(result: NodeFit, decision: Decision) -> str:
    """``no Ready linux/arm64 node; 3 arm64 nodes are tainted …; images: web:1 (linux/arm64)``."""
    shown = [
        f"{image} ({', '.join(dict.fromkeys(f'{p.os}/{p.architecture}' for p in found.platforms))})"
        for image, found in decision.lookups.items()
        if isinstance(found, ImagePlatforms) and found.platforms
    ]
    more = f" and {len(shown) - SHOWN_IMAGES} more" if len(shown) > SHOWN_IMAGES else ""
    images = f"; images: {', '.join(shown[:SHOWN_IMAGES])}{more}" if shown else ""
    return f"{result.missing()}{images}"


__all__ = ["REASON_NO_MATCHING_NODE", "UnsatisfiableCheck"]
