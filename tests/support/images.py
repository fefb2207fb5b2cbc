"""Push test images to a registry through the Registry HTTP API v2 only.

Content is deterministic: layer bytes come from a ``random.Random`` seeded with the
repository, tag and platform, so each image differs from every other and pushing the
same shape twice gives the same digests. Layers are real gzipped tars whose
uncompressed digests are the config's ``rootfs.diff_ids``.

Shapes (each returns a :class:`PushedImage`):

    push_oci_index_with_attestations   OCI index: linux/amd64, linux/arm64/v8 + 2 buildx attestation manifests
    push_docker_manifest_list          Docker list: amd64, arm64/v8, arm/v7, ppc64le, s390x
    push_docker_single                 one Docker v2.2 manifest (default arm64/v8)
    push_oci_single                    one OCI manifest (default amd64)
    push_windows_index                 Docker list: windows/amd64 x2 os.version + linux/amd64
    push_index_with_deleted_child      OCI index: amd64, arm64/v8; the arm64 child is then deleted
    push_nested_index                  OCI index whose first entry is an OCI index (amd64, arm64/v8)
    push_amd64_v3_index                OCI index: linux/amd64/v3 (the only amd64 entry), linux/arm64/v8
    push_amd64_levels_index            OCI index: linux/amd64 (v1), linux/amd64/v3, linux/arm64/v8
    push_windows_builds_index          OCI index: windows/amd64 for two builds, no Linux entry
    push_artifact                      OCI 1.1 artifact: artifactType, the empty config, one opaque layer
    push_artifact_index                OCI index of two artifacts (linux/amd64, linux/arm64), each with artifactType
    push_image / push_index            the generic builders the shapes use

Platform keys in ``PushedImage.children`` are ``os/architecture[/variant]``, with
``:<os.version>`` appended when the descriptor has one (``windows/amd64:10.0.17763.5458``).
Attestation entries are not in ``children`` but in ``attestations``.

The push session has ``trust_env = False`` (``REQUESTS_CA_BUNDLE`` would override
``verify=``), answers Basic and Bearer challenges with the registry's push
credentials, and sends the user agent ``noe-test-pusher/1`` so that request counting
in :mod:`tests.support.registry_server` can leave the pushes out.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import re
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urljoin

import requests

from tests.support.registry_server import PUSHER_USER_AGENT

__all__ = [
    "DOCKER_CONFIG",
    "DOCKER_LAYER",
    "DOCKER_MANIFEST",
    "DOCKER_MANIFEST_LIST",
    "IN_TOTO",
    "OCI_CONFIG",
    "OCI_INDEX",
    "OCI_LAYER",
    "OCI_MANIFEST",
    "SHAPES",
    "PushTarget",
    "PushedImage",
    "Pusher",
    "image_config",
    "platform_key",
    "push_all_shapes",
    "push_amd64_levels_index",
    "push_amd64_v3_index",
    "push_artifact",
    "push_artifact_index",
    "push_docker_manifest_list",
    "push_docker_single",
    "push_image",
    "push_index",
    "push_index_with_deleted_child",
    "push_nested_index",
    "push_oci_index",
    "push_oci_index_with_attestations",
    "push_oci_single",
    "push_windows_builds_index",
    "push_windows_index",
    "sha256_digest",
]

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
IN_TOTO = "application/vnd.in-toto+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
ARTIFACT_TYPE = "application/vnd.noe.test.model.v1"

INDEX_TYPES = frozenset({DOCKER_MANIFEST_LIST, OCI_INDEX})
ACCEPT_ALL = ", ".join([OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST])

WINDOWS_VERSIONS = ("10.0.17763.5458", "10.0.20348.2227")


class PushTarget(Protocol):
    """What a push needs from a registry (:class:`RegistryServer` has all of it)."""

    @property
    def url(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def verify(self) -> str | bool: ...
    @property
    def push_credentials(self) -> tuple[str, str] | None: ...


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def platform_key(platform: Mapping[str, Any]) -> str:
    """``os/architecture[/variant][:os.version]`` of a descriptor or config."""
    key = f"{platform.get('os', '')}/{platform.get('architecture', '')}"
    if platform.get("variant"):
        key += f"/{platform['variant']}"
    if platform.get("os.version"):
        key += f":{platform['os.version']}"
    return key


@dataclass(frozen=True)
class PushedImage:
    """What was pushed: enough for a test to know the right answer without asking the registry."""

    host: str
    repository: str
    tag: str | None
    digest: str
    media_type: str
    manifest: bytes = field(repr=False)
    children: dict[str, str] = field(default_factory=dict)
    """platform key -> child manifest digest (runnable entries only)."""
    config_digests: dict[str, str] = field(default_factory=dict)
    """platform key -> config blob digest, for this image or each child."""
    attestations: dict[str, str] = field(default_factory=dict)
    """attestation manifest digest -> digest of the image it describes."""
    nested: dict[str, PushedImage] = field(default_factory=dict)
    """digest -> nested index pushed as an entry of this one."""
    deleted: tuple[str, ...] = ()
    """child manifest digests deleted after the push."""
    artifact_type: str = ""
    """set for an artifact (or an index of artifacts): what noe reports instead of platforms."""

    @property
    def reference(self) -> str:
        """``host/repository:tag`` (or ``@digest`` when pushed without a tag)."""
        return f"{self.host}/{self.repository}:{self.tag}" if self.tag else self.by_digest

    @property
    def by_digest(self) -> str:
        return f"{self.host}/{self.repository}@{self.digest}"

    @property
    def size(self) -> int:
        return len(self.manifest)

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    @property
    def platforms(self) -> tuple[str, ...]:
        """Platform keys this image offers (its children, or its own config's platform)."""
        return tuple(self.children) if self.is_index else tuple(self.config_digests)

    def descriptor(
        self,
        platform: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        artifact_type: str = "",
    ) -> dict[str, Any]:
        """A descriptor pointing at this manifest, for use in an index."""
        d: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if artifact_type:
            d["artifactType"] = artifact_type
        if platform:
            d["platform"] = dict(platform)
        if annotations:
            d["annotations"] = dict(annotations)
        return d

    @property
    def json(self) -> Any:
        return json.loads(self.manifest)


class PushError(RuntimeError):
    pass


_PARAM = re.compile(r'(\w+)="([^"]*)"')


class Pusher:
    """An authenticated Registry API v2 client for pushing (a context manager)."""

    def __init__(self, target: PushTarget) -> None:
        self.target = target
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.verify = target.verify
        self.session.headers["User-Agent"] = PUSHER_USER_AGENT
        self._bearer: dict[str, str] = {}

    def __enter__(self) -> Pusher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.session.close()

    # -- auth ------------------------------------------------------------------------

    def _request(self, method: str, url: str, repo: str, **kw: Any) -> requests.Response:
        url = urljoin(self.target.url + "/", url)
        headers = dict(kw.pop("headers", {}) or {})
        for attempt in range(2):
            if repo in self._bearer:
                headers["Authorization"] = f"Bearer {self._bearer[repo]}"
            resp = self.session.request(method, url, headers=headers, timeout=30, **kw)
            if resp.status_code != 401 or attempt:
                return resp
            challenge = resp.headers.get("WWW-Authenticate", "")
            resp.close()
            self._answer(challenge, repo)
        raise AssertionError("unreachable")

    def _answer(self, challenge: str, repo: str) -> None:
        creds = self.target.push_credentials
        if creds is None:
            raise PushError(f"{self.target.host} asks for credentials but none are configured: {challenge}")
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            self.session.auth = creds
            return
        if scheme != "bearer":
            raise PushError(f"unsupported challenge {challenge!r}")
        params = dict(_PARAM.findall(challenge))
        query = {"service": params.get("service", ""), "scope": f"repository:{repo}:pull,push,delete"}
        # the token service may have its own CA (RegistryServer.token_verify)
        verify = getattr(self.target, "token_verify", self.session.verify)
        with self.session.get(params["realm"], params=query, auth=creds, verify=verify, timeout=30) as resp:
            if resp.status_code != 200:
                raise PushError(f"token request for {repo} failed: {resp.status_code} {resp.text}")
            body = resp.json()
        self._bearer[repo] = body.get("token") or body["access_token"]

    def _check(self, resp: requests.Response, *expected: int, what: str) -> requests.Response:
        if resp.status_code not in expected:
            text = resp.text
            resp.close()
            raise PushError(f"{what} on {self.target.host}: {resp.status_code} {text}")
        return resp

    # -- API -------------------------------------------------------------------------

    def push_blob(self, repo: str, data: bytes) -> str:
        """Upload a blob unless present (HEAD first); POST an upload session then PUT ?digest=."""
        digest = sha256_digest(data)
        with self._request("HEAD", f"/v2/{repo}/blobs/{digest}", repo) as head:
            if head.status_code == 200:
                return digest
        with self._request("POST", f"/v2/{repo}/blobs/uploads/", repo) as start:
            self._check(start, 202, what=f"starting an upload to {repo}")
            location = urljoin(self.target.url + "/", start.headers["Location"])
        sep = "&" if "?" in location else "?"
        with self._request(
            "PUT",
            f"{location}{sep}digest={digest}",
            repo,
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        ) as put:
            self._check(put, 201, what=f"uploading blob {digest} to {repo}")
        return digest

    def push_blob_monolithic(self, repo: str, data: bytes) -> str:
        """Upload a blob in one request: POST /v2/<name>/blobs/uploads/?digest=."""
        digest = sha256_digest(data)
        with self._request(
            "POST",
            f"/v2/{repo}/blobs/uploads/?digest={digest}",
            repo,
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        ) as resp:
            self._check(resp, 201, what=f"monolithic upload of {digest} to {repo}")
        return digest

    def put_manifest(self, repo: str, reference: str, body: bytes, media_type: str) -> str:
        """PUT a manifest by tag or digest; returns its digest (checked against the registry's)."""
        digest = sha256_digest(body)
        with self._request(
            "PUT", f"/v2/{repo}/manifests/{reference}", repo, data=body, headers={"Content-Type": media_type}
        ) as resp:
            self._check(resp, 201, what=f"pushing manifest {repo}:{reference}")
            answered = resp.headers.get("Docker-Content-Digest")
        if answered and answered != digest:
            raise PushError(f"registry computed {answered} for a manifest hashing to {digest}")
        return digest

    def delete_manifest(self, repo: str, digest: str) -> None:
        with self._request("DELETE", f"/v2/{repo}/manifests/{digest}", repo) as resp:
            self._check(resp, 202, what=f"deleting {repo}@{digest}")

    def get_manifest(self, repo: str, reference: str) -> tuple[int, bytes, str]:
        with self._request("GET", f"/v2/{repo}/manifests/{reference}", repo, headers={"Accept": ACCEPT_ALL}) as r:
            return r.status_code, r.content, r.headers.get("Content-Type", "")


# -- content ---------------------------------------------------------------------------


def add_tags(target: PushTarget, image: PushedImage, tags: Sequence[str]) -> None:
    """Point more tags of ``image``'s repository at it: one manifest PUT per tag, no blob uploaded again."""
    with Pusher(target) as p:
        for tag in tags:
            p.put_manifest(image.repository, tag, image.manifest, image.media_type)


def _layer(seed: str) -> tuple[bytes, str]:
    """A small gzipped tar with seeded random content; returns (gzip bytes, diff_id)."""
    rng = random.Random(seed)
    payload = rng.randbytes(512) + seed.encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(f"noe-test/{hashlib.sha256(seed.encode()).hexdigest()[:16]}.bin")
        info.size = len(payload)
        info.mtime = 0
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(payload))
    tar_bytes = raw.getvalue()
    return gzip.compress(tar_bytes, mtime=0), sha256_digest(tar_bytes)


def _dumps(doc: Mapping[str, Any], media_type: str) -> bytes:
    # Docker's tools write 3-space indented JSON, BuildKit writes compact JSON: clients see both.
    if media_type.startswith("application/vnd.docker."):
        return json.dumps(doc, indent=3).encode()
    return json.dumps(doc, separators=(",", ":")).encode()


def image_config(
    os: str = "linux", architecture: str = "amd64", variant: str | None = None, os_version: str | None = None
) -> dict[str, Any]:
    """A container config blob (without ``rootfs``, which :func:`push_image` fills in)."""
    config: dict[str, Any] = {
        "architecture": architecture,
        "os": os,
        "created": "2024-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/noe-test"]},
    }
    if variant:
        config["variant"] = variant
    if os_version:
        config["os.version"] = os_version
    return config


def _default_variant(architecture: str) -> str | None:
    return {"arm64": "v8", "arm": "v7"}.get(architecture)


def _split_platform(platform: str) -> dict[str, str]:
    """``linux/arm64/v8`` or ``windows/amd64:10.0.17763.1`` -> descriptor platform dict."""
    base, _, os_version = platform.partition(":")
    parts = base.split("/")
    d = {"os": parts[0], "architecture": parts[1]}
    if len(parts) > 2:
        d["variant"] = parts[2]
    if os_version:
        d["os.version"] = os_version
    return d


def push_image(
    target: PushTarget,
    repo: str,
    tag: str | None,
    config: Mapping[str, Any],
    media_type: str = DOCKER_MANIFEST,
    *,
    layers: int = 1,
    layer_media_type: str | None = None,
    config_media_type: str | None = None,
    layer_blobs: Sequence[bytes] | None = None,
    annotations: Mapping[str, str] | None = None,
    seed: str | None = None,
) -> PushedImage:
    """Push an image manifest (Docker v2.2 or OCI) with *config*; ``tag=None`` pushes by digest only.

    Unless *config* has ``rootfs``, *layers* seeded gzipped tars are made and listed in
    ``rootfs.diff_ids``. *layer_blobs* replaces them with the given bytes (pushed as is).
    """
    oci = media_type == OCI_MANIFEST
    if not oci and media_type != DOCKER_MANIFEST:
        raise ValueError(f"push_image pushes image manifests, not {media_type}")
    seed = seed or f"{repo}:{tag}:{platform_key(config)}"
    layer_type = layer_media_type or (OCI_LAYER if oci else DOCKER_LAYER)
    config_type = config_media_type or (OCI_CONFIG if oci else DOCKER_CONFIG)
    config = dict(config)
    blobs: list[bytes]
    if layer_blobs is not None:
        blobs = list(layer_blobs)
    else:
        made = [_layer(f"{seed}#{i}") for i in range(layers)]
        blobs = [gz for gz, _ in made]
        config.setdefault("rootfs", {"type": "layers", "diff_ids": [d for _, d in made]})
    config_bytes = json.dumps(config, separators=(",", ":")).encode()
    with Pusher(target) as p:
        layer_descs = [{"mediaType": layer_type, "digest": p.push_blob(repo, b), "size": len(b)} for b in blobs]
        config_digest = p.push_blob(repo, config_bytes)
        doc: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": config_type, "digest": config_digest, "size": len(config_bytes)},
            "layers": layer_descs,
        }
        if annotations:
            doc["annotations"] = dict(annotations)
        body = _dumps(doc, media_type)
        digest = p.put_manifest(repo, tag or sha256_digest(body), body, media_type)
    return PushedImage(
        host=target.host,
        repository=repo,
        tag=tag,
        digest=digest,
        media_type=media_type,
        manifest=body,
        config_digests={platform_key(config): config_digest},
    )


def push_index(
    target: PushTarget,
    repo: str,
    tag: str | None,
    children: Sequence[Mapping[str, Any]],
    media_type: str = OCI_INDEX,
    *,
    annotations: Mapping[str, str] | None = None,
    config_digests: Mapping[str, str] | None = None,
    nested: Mapping[str, PushedImage] | None = None,
) -> PushedImage:
    """Push an OCI index or Docker manifest list of the given descriptors (children must exist)."""
    if media_type not in INDEX_TYPES:
        raise ValueError(f"push_index pushes indexes, not {media_type}")
    doc: dict[str, Any] = {"schemaVersion": 2, "mediaType": media_type, "manifests": [dict(c) for c in children]}
    if annotations:
        doc["annotations"] = dict(annotations)
    body = _dumps(doc, media_type)
    with Pusher(target) as p:
        digest = p.put_manifest(repo, tag or sha256_digest(body), body, media_type)
    runnable: dict[str, str] = {}
    attestations: dict[str, str] = {}
    for c in children:
        ann = c.get("annotations") or {}
        if ann.get("vnd.docker.reference.type") == "attestation-manifest":
            attestations[c["digest"]] = ann.get("vnd.docker.reference.digest", "")
        elif c.get("platform"):
            runnable[platform_key(c["platform"])] = c["digest"]
    return PushedImage(
        host=target.host,
        repository=repo,
        tag=tag,
        digest=digest,
        media_type=media_type,
        manifest=body,
        children=runnable,
        config_digests=dict(config_digests or {}),
        attestations=attestations,
        nested=dict(nested or {}),
    )


def _push_platforms(
    target: PushTarget, repo: str, tag: str, platforms: Sequence[str], media_type: str
) -> list[tuple[dict[str, str], PushedImage]]:
    pushed = []
    for plat in platforms:
        p = _split_platform(plat)
        config = image_config(p["os"], p["architecture"], p.get("variant"), p.get("os.version"))
        pushed.append((p, push_image(target, repo, None, config, media_type, seed=f"{repo}:{tag}:{plat}")))
    return pushed


def _multi(
    target: PushTarget, repo: str, tag: str | None, platforms: Sequence[str], index_type: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    image_type = OCI_MANIFEST if index_type == OCI_INDEX else DOCKER_MANIFEST
    descs, configs = [], {}
    for plat, img in _push_platforms(target, repo, tag or "", platforms, image_type):
        descs.append(img.descriptor(platform=plat))
        configs.update(img.config_digests)
    return descs, configs


def push_oci_single(
    target: PushTarget,
    repo: str,
    tag: str | None = "latest",
    arch: str = "amd64",
    *,
    variant: str | None = None,
    os: str = "linux",
) -> PushedImage:
    """One OCI image manifest whose config says *os*/*arch*[/variant]."""
    config = image_config(os, arch, variant if variant is not None else _default_variant(arch))
    return push_image(target, repo, tag, config, OCI_MANIFEST)


def push_docker_single(
    target: PushTarget,
    repo: str,
    tag: str | None = "latest",
    arch: str = "arm64",
    *,
    variant: str | None = None,
    os: str = "linux",
) -> PushedImage:
    """One Docker v2.2 manifest whose config says *os*/*arch*[/variant] (arm64 -> v8, arm -> v7 by default;
    ``variant=""`` for none)."""
    config = image_config(os, arch, variant if variant is not None else _default_variant(arch))
    return push_image(target, repo, tag, config, DOCKER_MANIFEST)


def push_docker_manifest_list(
    target: PushTarget,
    repo: str,
    tag: str | None = "latest",
    platforms: Sequence[str] = ("linux/amd64", "linux/arm64/v8", "linux/arm/v7", "linux/ppc64le", "linux/s390x"),
) -> PushedImage:
    descs, configs = _multi(target, repo, tag, platforms, DOCKER_MANIFEST_LIST)
    return push_index(target, repo, tag, descs, DOCKER_MANIFEST_LIST, config_digests=configs)


def push_oci_index(
    target: PushTarget,
    repo: str,
    tag: str | None = "latest",
    platforms: Sequence[str] = ("linux/amd64", "linux/arm64/v8"),
) -> PushedImage:
    descs, configs = _multi(target, repo, tag, platforms, OCI_INDEX)
    return push_index(target, repo, tag, descs, OCI_INDEX, config_digests=configs)


def _attestation(target: PushTarget, repo: str, subject: Mapping[str, Any], seed: str) -> PushedImage:
    """A BuildKit-style attestation manifest: OCI image manifest, ``unknown/unknown`` config,
    one in-toto statement layer (``application/vnd.in-toto+json``)."""
    statement = {
        "_type": "https://in-toto.io/Statement/v0.1",
        "predicateType": "https://spdx.dev/Document",
        "subject": [{"name": "_", "digest": {"sha256": subject["digest"].removeprefix("sha256:")}}],
        "predicate": {"spdxVersion": "SPDX-2.3", "name": seed},
    }
    blob = json.dumps(statement, separators=(",", ":")).encode()
    config = {
        "architecture": "unknown",
        "os": "unknown",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [sha256_digest(blob)]},
    }
    img = push_image(target, repo, None, config, OCI_MANIFEST, layer_blobs=[blob], layer_media_type=IN_TOTO, seed=seed)
    return img


def push_oci_index_with_attestations(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index: linux/amd64, linux/arm64/v8 and one attestation manifest for each (platform
    ``unknown/unknown``, annotations ``vnd.docker.reference.type: attestation-manifest`` and
    ``vnd.docker.reference.digest: <image digest>``), ordered as BuildKit writes them."""
    descs, configs = _multi(target, repo, tag, ("linux/amd64", "linux/arm64/v8"), OCI_INDEX)
    entries = list(descs)
    for d in descs:
        att = _attestation(target, repo, d, seed=f"{repo}:{tag}:attestation:{platform_key(d['platform'])}")
        entries.append(
            att.descriptor(
                platform={"architecture": "unknown", "os": "unknown"},
                annotations={
                    "vnd.docker.reference.digest": d["digest"],
                    "vnd.docker.reference.type": "attestation-manifest",
                },
            )
        )
    return push_index(target, repo, tag, entries, OCI_INDEX, config_digests=configs)


def push_windows_index(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """Docker manifest list: windows/amd64 for two ``os.version`` values, then linux/amd64."""
    platforms = [f"windows/amd64:{v}" for v in WINDOWS_VERSIONS] + ["linux/amd64"]
    descs, configs = _multi(target, repo, tag, platforms, DOCKER_MANIFEST_LIST)
    return push_index(target, repo, tag, descs, DOCKER_MANIFEST_LIST, config_digests=configs)


def push_index_with_deleted_child(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index of linux/amd64 and linux/arm64/v8 whose arm64 child manifest is deleted after the
    push (the registry refuses an index whose child does not exist, so it is deleted afterwards)."""
    descs, configs = _multi(target, repo, tag, ("linux/amd64", "linux/arm64/v8"), OCI_INDEX)
    index = push_index(target, repo, tag, descs, OCI_INDEX, config_digests=configs)
    gone = index.children["linux/arm64/v8"]
    with Pusher(target) as p:
        p.delete_manifest(repo, gone)
    return PushedImage(**{**index.__dict__, "deleted": (gone,)})


def push_nested_index(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index whose first entry is an OCI index (linux/amd64, linux/arm64/v8; no platform on the
    entry), followed by a linux/s390x image. ``children`` lists the outer runnable entries only;
    the inner index is in ``nested``."""
    inner = push_oci_index(target, repo, None, ("linux/amd64", "linux/arm64/v8"))
    descs, configs = _multi(target, repo, tag, ("linux/s390x",), OCI_INDEX)
    return push_index(
        target,
        repo,
        tag,
        [inner.descriptor(), *descs],
        OCI_INDEX,
        config_digests={**inner.config_digests, **configs},
        nested={inner.digest: inner},
    )


def push_amd64_v3_index(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index whose only amd64 entry is ``linux/amd64/v3`` (older amd64 CPUs cannot run it), and arm64."""
    return push_oci_index(target, repo, tag, ("linux/amd64/v3", "linux/arm64/v8"))


def push_amd64_levels_index(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index with a baseline ``linux/amd64`` and a ``linux/amd64/v3`` build, and arm64."""
    return push_oci_index(target, repo, tag, ("linux/amd64", "linux/amd64/v3", "linux/arm64/v8"))


def push_windows_builds_index(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index of ``windows/amd64`` for Windows Server 2019 and 2022 (two ``os.version``), nothing else."""
    return push_oci_index(target, repo, tag, tuple(f"windows/amd64:{v}" for v in WINDOWS_VERSIONS))


def push_artifact(
    target: PushTarget, repo: str, tag: str | None = "latest", *, artifact_type: str = ARTIFACT_TYPE, seed: str = ""
) -> PushedImage:
    """An OCI 1.1 artifact as ``oras push`` writes it: ``artifactType``, the empty config ``{}``
    (``application/vnd.oci.empty.v1+json``) and one opaque layer. No platform anywhere."""
    empty = b"{}"
    payload = f"model weights of {repo}:{tag}:{seed}".encode()
    with Pusher(target) as p:
        config_digest = p.push_blob(repo, empty)
        layer_digest = p.push_blob(repo, payload)
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": artifact_type,
            "config": {"mediaType": OCI_EMPTY, "digest": config_digest, "size": len(empty)},
            "layers": [
                {"mediaType": "application/vnd.noe.test.weights.v1", "digest": layer_digest, "size": len(payload)}
            ],
        }
        body = _dumps(doc, OCI_MANIFEST)
        digest = p.put_manifest(repo, tag or sha256_digest(body), body, OCI_MANIFEST)
    return PushedImage(
        host=target.host,
        repository=repo,
        tag=tag,
        digest=digest,
        media_type=OCI_MANIFEST,
        manifest=body,
        artifact_type=artifact_type,
    )


def push_artifact_index(target: PushTarget, repo: str, tag: str | None = "latest") -> PushedImage:
    """OCI index of two artifacts, one per platform (as ORAS writes a multi-platform artifact): each entry
    has ``artifactType``, so noe knows without fetching them that the index runs nothing."""
    entries = []
    for plat in ("linux/amd64", "linux/arm64"):
        artifact = push_artifact(target, repo, None, seed=plat)
        entries.append(artifact.descriptor(platform=_split_platform(plat), artifact_type=ARTIFACT_TYPE))
    index = push_index(target, repo, tag, entries, OCI_INDEX)
    return PushedImage(**{**index.__dict__, "children": {}, "artifact_type": ARTIFACT_TYPE})


SHAPES = {
    "oci-index-attestations": push_oci_index_with_attestations,
    "docker-manifest-list": push_docker_manifest_list,
    "docker-single-arm64": push_docker_single,
    "oci-single-amd64": push_oci_single,
    "windows-index": push_windows_index,
    "index-deleted-child": push_index_with_deleted_child,
    "nested-index": push_nested_index,
    "amd64-v3-index": push_amd64_v3_index,
    "amd64-levels-index": push_amd64_levels_index,
    "windows-builds-index": push_windows_builds_index,
    "artifact": push_artifact,
    "artifact-index": push_artifact_index,
}
"""shape name -> builder; every builder takes (target, repo, tag)."""


def push_all_shapes(target: PushTarget, prefix: str = "", tag: str = "v1") -> dict[str, PushedImage]:
    """Push every shape once, each in its own repository ``<prefix><shape>``."""
    return {name: build(target, f"{prefix}{name}", tag) for name, build in SHAPES.items()}
