"""The fields of a Pod that :func:`~noe_web.controller.podview.slim_pod` reads, as a schema a list page is decoded into.

Why: the controller lists every pod of the cluster and keeps about a tenth of
each (:mod:`noe_web.kube.list_schema`). These ``TypedDict`` s name the objects
and arrays on the way to what ``slim_pod`` reads, and nothing else; what it
reads is ``Any``, so it checks a value's type as it does in a fully decoded pod
(tests/web/controller/test_pod_fields.py keeps the two views equal). An object
or array on the way may also be ``null``; of another type, it fails the page's
decoding, which is then read item by item. Add a field here when ``slim_pod``
starts reading it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from noe_web.kube.list_schema import ListSchema, list_schema


class OwnerFields(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    name: Any
    uid: Any
    controller: Any


class MetaFields(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    resourceVersion: Any
    ownerReferences: list[OwnerFields] | None
    labels: Any


class ContainerFields(TypedDict, total=False):
    name: Any
    image: Any
    resources: Any
    restartPolicy: Any


class ImageSourceFields(TypedDict, total=False):
    reference: Any


class VolumeFields(TypedDict, total=False):
    name: Any
    image: ImageSourceFields | None


class NodeAffinityFields(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: Any


class AffinityFields(TypedDict, total=False):
    nodeAffinity: NodeAffinityFields | None


class SpecFields(TypedDict, total=False):
    containers: list[ContainerFields] | None
    initContainers: list[ContainerFields] | None
    volumes: list[VolumeFields] | None
    nodeName: Any
    imagePullSecrets: Any
    schedulingGates: Any
    overhead: Any
    resources: Any
    nodeSelector: Any
    affinity: AffinityFields | None
    tolerations: Any


class ConditionFields(TypedDict, total=False):
    type: Any
    status: Any
    reason: Any
    message: Any


class StatePartFields(TypedDict, total=False):
    reason: Any
    message: Any


class StateFields(TypedDict, total=False):
    waiting: StatePartFields | None
    terminated: StatePartFields | None
    running: Any


class ContainerStatusFields(TypedDict, total=False):
    name: Any
    image: Any
    imageID: Any
    restartCount: Any
    state: StateFields | None
    lastState: StateFields | None


class StatusFields(TypedDict, total=False):
    conditions: list[ConditionFields] | None
    phase: Any
    startTime: Any
    initContainerStatuses: list[ContainerStatusFields] | None
    containerStatuses: list[ContainerStatusFields] | None


class PodFields(TypedDict, total=False):
    metadata: MetaFields | None
    spec: SpecFields | None
    status: StatusFields | None


POD_LIST: ListSchema | None = list_schema(PodFields)
"""A page of pods decoded into :class:`PodFields` (``None`` without msgspec: item by item, whole)."""
