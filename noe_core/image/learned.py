"""Learning from exec format errors: image digests proven not to run on an architecture (``docs/policies.md``).

An ``exec format error`` on a node of architecture A for an image digest D
proves D does not run on A, whatever its manifest claims (a hand-made
"multi-arch" image with amd64 binaries in its arm64 entry). ``noe controller``
records it in the ConfigMap :data:`CONFIGMAP` of noe's namespace, one data key
per digest (:func:`data_key`: ``sha256-<hex>``) whose value is JSON
``{"architectures": [...], "evidence": ["namespace/pod"], "time": "RFC 3339"}``;
at most :data:`MAX_ENTRIES` digests (the oldest dropped first). The webhook
reads it (:class:`LearnedPlatforms`) and treats A as absent from D, matched
against an image's index digest and each platform manifest's digest, with a
warning naming the architecture, the digest and the proving pod. Deleting the
entry undoes it. Pure: the callers read and write the ConfigMap.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from noe_core.errors import InvalidSettings
from noe_core.image.image_platforms import ImagePlatforms, Lookup, LookupResult
from noe_core.image.platform import normalize_arch_name
from noe_core.util.text_file import read_document

CONFIGMAP = "noe-learned-platforms"
MAX_ENTRIES = 256
MAX_EVIDENCE = 5
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_KEY = re.compile(r"sha256-[0-9a-f]{64}")


def data_key(digest: str) -> str:
    """``sha256:<hex>`` → ``sha256-<hex>`` (a ConfigMap key cannot hold ``:``)."""
    return digest.replace(":", "-", 1)


def digest_of_image_id(image_id: str) -> str | None:
    """The digest of a container status's ``imageID`` (``docker-pullable://repo@sha256:…``, ``sha256:…``)."""
    found = _DIGEST.search(image_id.rsplit("@", 1)[-1]) if image_id else None
    return found.group(0) if found else None


@dataclass(frozen=True)
class Learned:
    """One digest's record: the architectures it does not run on, the pods that proved it, and when."""

    digest: str
    architectures: tuple[str, ...]
    evidence: tuple[str, ...]
    time: str

    def to_value(self) -> str:
        body = {"architectures": list(self.architectures), "evidence": list(self.evidence), "time": self.time}
        return json.dumps(body, separators=(",", ":"))


def read_learned(data: object) -> dict[str, Learned]:
    """The ConfigMap's ``data``, by digest; a malformed entry (edited by hand) is skipped, never fatal."""
    out: dict[str, Learned] = {}
    if not isinstance(data, Mapping):
        return out
    for key, value in data.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key) or not isinstance(value, str):
            continue
        try:
            body = json.loads(value)
        except ValueError:
            continue
        if not isinstance(body, Mapping):
            continue
        archs = body.get("architectures")
        evidence = body.get("evidence")
        if not isinstance(archs, list) or not all(isinstance(a, str) and a for a in archs):
            continue
        digest = key.replace("-", ":", 1)
        out[digest] = Learned(
            digest,
            tuple(sorted({normalize_arch_name(a) for a in archs})),
            tuple(e for e in evidence if isinstance(e, str))[:MAX_EVIDENCE] if isinstance(evidence, list) else (),
            str(body.get("time") or ""),
        )
    return out


def recorded(
    data: object, digest: str, architecture: str, evidence: str, time: str, *, limit: int = MAX_ENTRIES
) -> dict[str, str] | None:
    """The ConfigMap ``data`` with (digest, architecture, evidence) recorded; ``None`` when it says so already.

    Bounded: past ``limit`` digests the oldest (by ``time``) are dropped first.
    """
    current = (
        {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(data, Mapping)
        else {}
    )
    entries = read_learned(current)
    arch = normalize_arch_name(architecture)
    before = entries.get(digest)
    if before is not None and arch in before.architectures:
        return None
    archs = tuple(sorted({*(before.architectures if before else ()), arch}))
    proof = tuple(dict.fromkeys((*(before.evidence if before else ()), evidence)))[-MAX_EVIDENCE:]
    current[data_key(digest)] = Learned(digest, archs, proof, time).to_value()
    entries[digest] = Learned(digest, archs, proof, time)
    if len(entries) > limit:
        for old in sorted(entries.values(), key=lambda e: (e.time, e.digest))[: len(entries) - limit]:
            current.pop(data_key(old.digest), None)
    return current


@dataclass(frozen=True)
class LearnedPlatforms:
    """What the webhook knows from the ConfigMap: digests and the architectures they do not run on."""

    entries: Mapping[str, Learned] = field(default_factory=dict)

    def apply(self, result: LookupResult) -> LookupResult:
        """``result`` with every learned architecture taken out of the images it concerns, and a warning each."""
        if not self.entries:
            return result
        lookups: dict[str, Lookup] = dict(result.lookups)
        sources = dict(result.sources)
        warnings = list(result.warnings)
        for image, found in result.lookups.items():
            if isinstance(found, ImagePlatforms):
                lookups[image], said = self._without(image, found)
                if said:
                    warnings.extend(said)
                    sources[image] = "learned"
        return LookupResult(lookups, tuple(dict.fromkeys(warnings)), sources)

    def _without(self, image: str, found: ImagePlatforms) -> tuple[ImagePlatforms, list[str]]:
        index = self.entries.get(found.digest) if found.digest else None
        kept, manifests, said = [], [], []
        for resolved in found.resolved:
            arch = normalize_arch_name(resolved.platform.architecture) if resolved.platform.architecture else ""
            proof = None
            for entry in (index, self.entries.get(resolved.digest) if resolved.digest else None):
                if entry is not None and arch in entry.architectures:
                    proof = entry
            if proof is None:
                kept.append(resolved.platform)
                manifests.append(resolved.digest)
                continue
            by = proof.evidence[-1] if proof.evidence else "a pod"
            said.append(f"{image}: {arch} left out: {proof.digest} failed with exec format error on {arch} (pod {by})")
        if not said:
            return found, []
        return ImagePlatforms(
            tuple(kept), found.digest, found.media_type, tuple(manifests) if found.manifests else ()
        ), said


def load_learned(path: str | os.PathLike[str]) -> LearnedPlatforms:
    """``--learned FILE``: the ``noe-learned-platforms`` ConfigMap as ``kubectl get -o yaml|json`` prints it
    (or its ``data`` alone), so a cluster's answer is reproduced offline. Entries are read as the webhook
    reads them (a malformed one skipped); a file that holds no ConfigMap is an :class:`InvalidSettings`."""
    name = os.fspath(path)
    doc = read_document(name, f"learned platforms file {name}")
    if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
    elif isinstance(doc, Mapping) and "kind" not in doc:
        data = doc
    else:
        raise InvalidSettings(
            f"learned platforms file {name} holds no ConfigMap: give `kubectl get configmap {CONFIGMAP} -o yaml`"
        )
    if not isinstance(data, Mapping):
        raise InvalidSettings(f"learned platforms file {name}: data must be a mapping of sha256-<hex> keys")
    return LearnedPlatforms(read_learned(data))
