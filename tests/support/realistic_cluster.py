"""Pods, Nodes and Namespaces shaped like a real cluster's, for benchmarks at Kubernetes' own limits.

A pod here is about 4.8 KB of JSON, as a ReplicaSet's pod is once running:
an owner reference, 8 to 15 labels (``app``, ``pod-template-hash``, team and
release labels), annotations, two containers with ports, environment and
resources, tolerations, five conditions and two container statuses with
image IDs. Images are drawn from a pool of a few hundred, one set per
workload, so they repeat across its replicas as they do in a cluster. A node
carries what a kubelet reports (labels, capacity, conditions, addresses,
node info and its cached images). Everything is deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

IMAGE_POOL = 300
TEAMS = ("payments", "search", "ads", "identity", "catalog", "checkout", "media", "platform")


@dataclass(frozen=True)
class Image:
    reference: str
    digest: str
    platforms: tuple[str, ...]


def image_pool(count: int = IMAGE_POOL) -> list[Image]:
    """``count`` images; one in five offers amd64 only, the rest amd64 and arm64."""
    pool = []
    for index in range(count):
        team = TEAMS[index % len(TEAMS)]
        digest = "sha256:" + hashlib.sha256(f"image-{index}".encode()).hexdigest()
        platforms = ("linux/amd64",) if index % 5 == 0 else ("linux/amd64", "linux/arm64")
        pool.append(Image(f"registry.example.com/{team}/service-{index:03d}:v1.{index % 40}.3", digest, platforms))
    return pool


def _arch(node_index: int) -> str:
    return "amd64" if node_index % 2 == 0 else "arm64"


def node_name(index: int) -> str:
    return f"ip-10-{index // 250 % 256}-{index % 250}-{index // 64000}.eu-west-1.compute.internal"


def realistic_node(index: int, images: list[Image]) -> dict[str, Any]:
    name, arch = node_name(index), _arch(index)
    zone = "eu-west-1" + "abc"[index % 3]
    cached = [images[(index * 7 + k) % len(images)] for k in range(12)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": hashlib.md5(name.encode()).hexdigest(),
            "creationTimestamp": "2026-11-02T08:14:51Z",
            "labels": {
                "kubernetes.io/arch": arch,
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "beta.kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m7g.2xlarge" if arch == "arm64" else "m6i.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                "karpenter.sh/capacity-type": "spot" if index % 4 else "on-demand",
                "node-pool": f"general-{index % 3}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{index:017x}"},
        "status": {
            "capacity": {"cpu": "8", "memory": "32386544Ki", "pods": "110", "ephemeral-storage": "104845292Ki"},
            "allocatable": {"cpu": "7910m", "memory": "31371696Ki", "pods": "110", "ephemeral-storage": "95551679760"},
            "conditions": [
                {
                    "type": kind,
                    "status": "False" if kind != "Ready" else "True",
                    "lastHeartbeatTime": "2026-12-01T10:00:00Z",
                    "lastTransitionTime": "2026-11-02T08:15:30Z",
                    "reason": "KubeletReady" if kind == "Ready" else f"KubeletHasNo{kind}",
                    "message": "kubelet is posting ready status" if kind == "Ready" else f"kubelet has no {kind}",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{index // 250 % 256}.{index % 250}.{index % 7 + 10}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": arch,
                "operatingSystem": "linux",
                "kernelVersion": "6.1.112-124.190.amzn2023.aarch64",
                "osImage": "Amazon Linux 2023.6.20241121",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.31.2-eks-94953ac",
                "kubeProxyVersion": "v1.31.2-eks-94953ac",
                "machineID": hashlib.md5(f"m{index}".encode()).hexdigest(),
                "systemUUID": hashlib.md5(f"s{index}".encode()).hexdigest(),
                "bootID": hashlib.md5(f"b{index}".encode()).hexdigest(),
            },
            "images": [
                {"names": [f"{image.reference.split(':')[0]}@{image.digest}", image.reference], "sizeBytes": 48_000_000}
                for image in cached
            ],
        },
    }


def realistic_pod(
    index: int, node_index: int, images: list[Image], *, namespace: str, rng: random.Random
) -> dict[str, Any]:
    """Pod ``index``: the replica of a workload (50 pods each), bound to node ``node_index``."""
    workload = index // 50
    team = TEAMS[workload % len(TEAMS)]
    app = f"{team}-svc-{workload:04d}"
    template = hashlib.sha1(app.encode()).hexdigest()[:10]
    suffix = hashlib.sha1(f"{index}".encode()).hexdigest()[:5]
    name = f"{app}-{template}-{suffix}"
    main, sidecar = images[workload * 2 % len(images)], images[(workload * 2 + 1) % len(images)]
    labels = {
        "app": app,
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": f"{app}-prod",
        "app.kubernetes.io/part-of": team,
        "app.kubernetes.io/managed-by": "Helm",
        "pod-template-hash": template,
        "team": team,
        "env": "production",
    }
    for extra in range(rng.randint(0, 7)):
        labels[f"example.com/label-{extra}"] = f"value-{workload % 13}-{extra}"
    arch = _arch(node_index)
    started = f"2026-12-01T09:{index % 60:02d}:{index % 59:02d}Z"

    def container(image: Image, role: str, port: int) -> dict[str, Any]:
        return {
            "name": role,
            "image": image.reference,
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
            "env": [
                {"name": "APP_NAME", "value": app},
                {"name": "LOG_LEVEL", "value": "info"},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability:4317"},
            ],
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "512Mi"},
            },
            "readinessProbe": {"httpGet": {"path": "/ready", "port": port, "scheme": "HTTP"}, "periodSeconds": 10},
            "volumeMounts": [
                {
                    "name": f"kube-api-access-{suffix}",
                    "readOnly": True,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }

    def status(image: Image, role: str) -> dict[str, Any]:
        return {
            "name": role,
            "image": image.reference,
            "imageID": f"{image.reference.split(':')[0]}@{image.digest}",
            "containerID": "containerd://" + hashlib.sha256(f"{index}{role}".encode()).hexdigest(),
            "ready": True,
            "started": True,
            "restartCount": index % 3,
            "state": {"running": {"startedAt": started}},
        }

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{app}-{template}-",
            "namespace": namespace,
            "uid": hashlib.md5(name.encode()).hexdigest(),
            "resourceVersion": str(1000 + index),
            "creationTimestamp": "2026-12-01T09:00:00Z",
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T12:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-{template}",
                    "uid": hashlib.md5(f"rs-{app}".encode()).hexdigest(),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [container(main, "app", 8080), container(sidecar, "proxy", 15001)],
            "nodeName": node_name(node_index),
            "serviceAccountName": app,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ],
            "nodeSelector": {"kubernetes.io/arch": arch} if main.platforms == ("linux/amd64",) else {},
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": f"10.{node_index // 250 % 256}.{node_index % 250}.{node_index % 7 + 10}",
            "podIP": f"100.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}",
            "podIPs": [{"ip": f"100.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"}],
            "startTime": started,
            "qosClass": "Burstable",
            "containerStatuses": [status(main, "app"), status(sidecar, "proxy")],
        },
    }


def realistic_pods(count: int, nodes: int, *, namespaces: int = 1000, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``count`` pods over ``nodes`` nodes and ``namespaces`` namespaces; amd64-only images on amd64 nodes."""
    rng = random.Random(seed)
    images = image_pool()
    for index in range(count):
        workload = index // 50
        node_index = index % nodes
        if images[workload * 2 % len(images)].platforms == ("linux/amd64",):
            node_index &= ~1  # even nodes are amd64
        yield realistic_pod(index, node_index, images, namespace=f"ns-{workload % namespaces:05d}", rng=rng)


def realistic_nodes(count: int) -> Iterator[dict[str, Any]]:
    images = image_pool()
    for index in range(count):
        yield realistic_node(index, images)


def platforms_file() -> dict[str, list[str]]:
    """What ``--image-platforms`` reads: every image of the pool with its platforms."""
    return {image.reference: list(image.platforms) for image in image_pool()}
