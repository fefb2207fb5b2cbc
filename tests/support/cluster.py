"""A generated cluster for ``noe report`` tests and benchmarks, with the answers known in advance.

:func:`generate` writes what ``kubectl get pods -A -o json`` would print for a
cluster of Deployments, StatefulSets, DaemonSets, CronJobs (finished and
running Jobs) and bare pods across many namespaces, with init containers and
requests written in every unit (``100m``, ``0.5``, ``1Gi``, ``512M``, ``1e3``…),
plus a platforms file. Alongside it returns the truth the file was made from —
each workload's pods and integer requests, each image's usable architectures —
so a test can compute the expected report without any noe code.

Images of the platforms file carry the noise rule 4 must drop (``unknown/unknown``,
other OSes, variants, aliases such as ``x86_64``); some answer ``{"error": …}``
and some are not listed at all (both "unknown"). Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.images import PushTarget, push_oci_index, push_oci_single

ARCHS = ("amd64", "arm64")

# image -> (platform strings written to the file, usable linux architectures among amd64/arm64 or None)
_IMAGES: dict[str, tuple[Any, frozenset[str] | None]] = {
    "docker.io/library/nginx:1.27": (
        ["linux/amd64", "linux/arm64/v8", "linux/arm/v7", "unknown/unknown"],
        frozenset(ARCHS),
    ),
    "busybox:1.36": (["linux/amd64", "linux/arm64/v8", "linux/386", "linux/s390x"], frozenset(ARCHS)),
    "redis:7": (["linux/x86_64", "linux/aarch64"], frozenset(ARCHS)),
    "postgres:16@sha256:" + "a" * 64: (["linux/amd64", "linux/arm64", "windows/amd64"], frozenset(ARCHS)),
    "registry.corp/team/api:2.1": (["linux/amd64", "unknown/unknown"], frozenset({"amd64"})),
    "registry.corp/team/worker:1.0": (["linux/amd64", "windows/arm64"], frozenset({"amd64"})),
    "registry.corp/team/encoder:3": (["linux/amd64"], frozenset({"amd64"})),
    "registry.corp/team/arm-batch:1": (["linux/arm64/v8"], frozenset({"arm64"})),
    "registry.corp/legacy/billing:9": (None, frozenset({"amd64"})),  # answered by the glob below
    "registry.corp/team/flaky:0.9": ({"error": "registry.corp answered 503"}, None),
    "quay.io/unlisted/tool:1": (None, None),  # not in the file at all
    "ghcr.io/org/win-only:1": (["windows/amd64"], frozenset()),
    "gcr.io/distroless/static:nonroot": (["linux/amd64", "linux/arm64", "linux/ppc64le"], frozenset(ARCHS)),
    "registry.corp/team/init-migrate:5": (["linux/amd64"], frozenset({"amd64"})),
    "alpine:3.20": (["linux/amd64", "linux/arm64/v8", "linux/arm/v6"], frozenset(ARCHS)),
}
_GLOBS = {"registry.corp/legacy/*": ["linux/amd64"]}
_INIT_IMAGES = ("busybox:1.36", "alpine:3.20", "registry.corp/team/init-migrate:5", "quay.io/unlisted/tool:1")
_MAIN_IMAGES = tuple(i for i in _IMAGES if i not in ("busybox:1.36", "quay.io/unlisted/tool:1"))


@dataclass
class TrueWorkload:
    namespace: str
    kind: str
    name: str
    images: list[str] = field(default_factory=list)
    pods: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0


@dataclass
class Truth:
    workloads: dict[tuple[str, str, str], TrueWorkload]
    support: dict[str, frozenset[str] | None]
    pods: int


def _cpu_text(rng: random.Random, millis: int) -> Any:
    options = [f"{millis}m", f"{millis / 1000:g}"]
    if millis % 1000 == 0:
        options += [millis // 1000, f"{millis // 1000}e0"]
    return rng.choice(options)


def _memory_text(rng: random.Random, size: int) -> str:
    options = [str(size)]
    for suffix, factor in (("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("k", 10**3), ("M", 10**6), ("G", 10**9)):
        if size % factor == 0:
            options.append(f"{size // factor}{suffix}")
    if size % 10**6 == 0:
        options.append(f"{size // 10**6}e6")
    return rng.choice(options)


def _memory(rng: random.Random) -> int:
    return rng.choice([64 * 2**20, 128 * 2**20, 256 * 2**20, 512 * 10**6, 2**30, 3 * 2**29, 100 * 10**6, 300_000])


def _container(rng: random.Random, name: str, image: str, cpu: int, memory: int) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if cpu:
        # a request, or (as the API server defaults it) a limit alone
        (requests if rng.random() < 0.9 else limits)["cpu"] = _cpu_text(rng, cpu)
    if memory:
        requests["memory"] = _memory_text(rng, memory)
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": image, "resources": resources}


def on_registry(image: str, registry: str) -> str:
    """The generator's image as it would be named on ``registry`` (``host:port``): same path, tag kept,
    a digest dropped (content on a test registry has its own digests)."""
    name = image.split("@", 1)[0]
    first, _, rest = name.partition("/")
    if not rest or not ("." in first or ":" in first):
        rest = name if "/" in name else f"library/{name}"
    return f"{registry}/{rest}"


def generate(
    directory: Path, *, pods: int = 5000, namespaces: int = 40, seed: int = 11, registry: str = ""
) -> tuple[Path, Path, Truth]:
    """Write ``cluster.json`` and ``platforms.json`` in ``directory``; return their paths and the truth.

    With ``registry``, every image is named on that registry instead (:func:`on_registry`), for a run
    against a real one; the platforms file then still names the original images (it is not for that run).
    """
    rng = random.Random(seed)
    rename = (lambda image: on_registry(image, registry)) if registry else (lambda image: image)
    truth: dict[tuple[str, str, str], TrueWorkload] = {}
    items: list[dict[str, Any]] = []
    made = 0
    serial = 0
    while made < pods:
        serial += 1
        namespace = f"team-{serial % namespaces:02d}"
        kind = rng.choices(["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Pod"], [50, 15, 10, 15, 10])[0]
        name = f"{kind.lower()}-{serial}"
        count = 1 if kind == "Pod" else min(pods - made, rng.randint(1, 12))
        images = rng.sample(_MAIN_IMAGES, rng.choice([1, 1, 2, 3]))
        inits = rng.sample(_INIT_IMAGES, rng.choice([0, 0, 0, 0, 1, 1, 2]))
        cpus = [rng.choice([0, 10, 100, 250, 500, 1000, 1500, 2000]) for _ in images]
        mems = [_memory(rng) for _ in images]
        init_cpus = [rng.choice([50, 100, 3000]) for _ in inits]
        init_mems = [_memory(rng) for _ in inits]
        cpu = max(sum(cpus), max(init_cpus, default=0))
        memory = max(sum(mems), max(init_mems, default=0))
        images, inits = [rename(i) for i in images], [rename(i) for i in inits]
        key = (namespace, kind, name)
        truth[key] = TrueWorkload(namespace, kind, name, list(dict.fromkeys(images + inits)))
        template_hash = f"{rng.getrandbits(40):010x}"
        for index in range(count):
            meta: dict[str, Any] = {"namespace": namespace, "labels": {"app": name}}
            phase = "Running"
            if kind == "Deployment":
                meta["name"] = f"{name}-{template_hash}-{index:05d}"
                meta["labels"]["pod-template-hash"] = template_hash
                owner = ("ReplicaSet", f"{name}-{template_hash}")
            elif kind == "StatefulSet":
                meta["name"], owner = f"{name}-{index}", ("StatefulSet", name)
            elif kind == "DaemonSet":
                meta["name"], owner = f"{name}-{index:05x}", ("DaemonSet", name)
            elif kind == "CronJob":
                job = f"{name}-{28458840 + index * 60}"
                meta["name"], owner = f"{job}-x{index}", ("Job", job)
                phase = "Succeeded" if index < count - 1 else "Running"
            else:
                meta["name"], owner = name, None
            if owner:
                meta["ownerReferences"] = [
                    {
                        "apiVersion": "v1",
                        "kind": owner[0],
                        "name": owner[1],
                        "uid": f"uid-{serial}-{index}",
                        "controller": True,
                    }
                ]
            spec = {
                "containers": [_container(rng, f"c{i}", image, cpus[i], mems[i]) for i, image in enumerate(images)],
                "nodeName": f"node-{rng.randint(1, 300)}",
            }
            if inits:
                spec["initContainers"] = [
                    _container(rng, f"init{i}", image, init_cpus[i], init_mems[i]) for i, image in enumerate(inits)
                ]
            items.append(
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}
            )
            if phase not in ("Succeeded", "Failed"):
                truth[key].pods += 1
                truth[key].cpu_millis += cpu
                truth[key].memory_bytes += memory
            made += 1
    cluster = directory / "cluster.json"
    cluster.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items})
    )
    platforms: dict[str, Any] = {image: value for image, (value, _) in _IMAGES.items() if value is not None}
    platforms.update(_GLOBS)
    platforms_file = directory / "platforms.json"
    platforms_file.write_text(json.dumps(platforms, indent=1))
    support = {rename(image): archs for image, (_, archs) in _IMAGES.items()}
    return cluster, platforms_file, Truth(truth, support, made)


# Newer tags of some images that block arm64, for runs against a real registry: (tag, usable architectures).
# The lowest newer tag offering arm64 is the hint: api 2.3, worker 1.1, billing 10; encoder has none among
# the five looked at (4 to 8), init-migrate and win-only no newer tag at all.
NEWER_TAGS: dict[str, list[tuple[str, frozenset[str]]]] = {
    "team/api": [("2.2", frozenset({"amd64"})), ("2.3", frozenset(ARCHS))],
    "team/worker": [("1.1", frozenset(ARCHS))],
    "team/encoder": [(str(n), frozenset({"amd64"})) for n in range(4, 10)],
    "legacy/billing": [("10", frozenset(ARCHS))],
}


def _push(target: PushTarget, repo: str, tag: str, archs: frozenset[str]) -> None:
    if not archs:
        push_oci_single(target, repo, tag, "amd64", os="windows")
    elif len(archs) == 1:
        push_oci_single(target, repo, tag, next(iter(archs)))
    else:
        push_oci_index(target, repo, tag, [f"linux/{a}" for a in sorted(archs)])


def push_cluster_images(target: PushTarget, truth: Truth) -> None:
    """Push the images of a cluster generated with ``registry=target.host``, with their architectures, and
    :data:`NEWER_TAGS`; an image whose truth is "cannot be inspected" is left out (the registry answers 404)."""
    for image, archs in truth.support.items():
        if archs is not None:
            repo, tag = image.split("/", 1)[1].rsplit(":", 1)
            _push(target, repo, tag, archs)
    for repo, tags in NEWER_TAGS.items():
        for tag, archs in tags:
            _push(target, repo, tag, archs)
