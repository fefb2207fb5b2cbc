"""Image platforms given in a file instead of asked of a registry.

Used by ``noe mutate`` to decide offline, by users' policy tests, and by the
webhook for images no registry can describe (``--platforms FILE``). The file is
a JSON or YAML mapping; each key is an image reference exactly as written in
pods, or an ``fnmatch`` glob (``registry.corp/legacy/*``); each value is either

* a list of platform strings: ``["linux/amd64", "linux/arm64/v8"]``;
* ``{"platforms": [...], "digest": "sha256:..."}`` when the digest matters;
* ``{"error": "reason"}``: the image cannot be inspected (tests warnings and strict namespaces);
* ``{"artifactType": "application/vnd.…"}``: an OCI artifact, not a program (rule 17).

Entries such as ``unknown/unknown`` are kept: the policy ignores them exactly as
it ignores a registry's attestation entries. Exact keys win over globs; globs
are tried in file order.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from noe_core.errors import InvalidPlatform, InvalidSettings
from noe_core.image.image_platforms import Declared, ImagePlatforms, Lookup, LookupFailure
from noe_core.image.platform import parse_platform
from noe_core.util import fields
from noe_core.util.text_file import read_document

_GLOB_CHARS = frozenset("*?[")


def _is_glob(key: str) -> bool:
    return any(char in _GLOB_CHARS for char in key)


def _entry(source: str, key: str, value: object) -> Lookup:
    where = f"{source}: image {key!r}"
    if isinstance(value, Mapping):
        unknown = set(value) - {"error", "platforms", "digest", "artifactType"}
        if unknown:
            raise InvalidSettings(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
        if "artifactType" in value:
            if set(value) - {"artifactType", "digest"}:
                raise InvalidSettings(f"{where}: 'artifactType' can only be combined with 'digest'")
            kind = fields.string(value["artifactType"], f"{where}: 'artifactType'", error=InvalidSettings)
            if not kind.strip():
                raise InvalidSettings(f"{where}: 'artifactType' must be a non-empty string")
            digest = fields.string(value.get("digest"), f"{where}: 'digest'", error=InvalidSettings)
            return ImagePlatforms.artifact(kind, digest=digest)
        if "error" in value:
            if set(value) != {"error"}:
                raise InvalidSettings(f"{where}: 'error' cannot be combined with other fields")
            reason = fields.string(value["error"], f"{where}: 'error'", error=InvalidSettings)
            if not reason.strip():
                raise InvalidSettings(f"{where}: 'error' must be a non-empty string")
            return LookupFailure(reason)
        digest = fields.string(value.get("digest"), f"{where}: 'digest'", error=InvalidSettings)
        if "platforms" not in value:
            raise InvalidSettings(f"{where}: give 'platforms' or 'error' (or 'artifactType')")
        return _platforms(where, value["platforms"], digest)
    return _platforms(where, value, "")


def _platforms(where: str, value: object, digest: str) -> ImagePlatforms:
    if not isinstance(value, list):
        raise InvalidSettings(f'{where}: expected a list of platforms such as ["linux/amd64"] or {{"error": "reason"}}')
    try:
        return ImagePlatforms(tuple(parse_platform(item) for item in value), digest)
    except InvalidPlatform as exc:
        raise InvalidSettings(f"{where}: {exc}") from None


@dataclass(frozen=True)
class StaticPlatforms:
    """Answers for images named in a platforms file: exact keys first, then globs in file order."""

    exact: Mapping[str, Lookup]
    globs: tuple[tuple[str, Lookup], ...] = ()
    source: str = "<mapping>"

    @classmethod
    def from_mapping(cls, data: object, source: str = "<mapping>") -> StaticPlatforms:
        """Build from an already-decoded mapping; raise :class:`InvalidSettings` naming the bad key."""
        if not isinstance(data, Mapping):
            raise InvalidSettings(f"{source}: expected a mapping of image to platforms, not {type(data).__name__}")
        exact: dict[str, Lookup] = {}
        globs: list[tuple[str, Lookup]] = []
        for key, value in data.items():
            if not isinstance(key, str) or not key.strip():
                raise InvalidSettings(f"{source}: image keys must be non-empty strings, got {key!r}")
            lookup = _entry(source, key, value)
            if _is_glob(key):
                globs.append((key, lookup))
            else:
                exact[key] = lookup
        return cls(exact, tuple(globs), source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> StaticPlatforms:
        """Read a ``.json`` file as JSON and anything else as YAML (a superset of JSON)."""
        name = os.fspath(path)
        data = read_document(name, f"platforms file {name}")
        if data is None:
            data = {}
        return cls.from_mapping(data, name)

    def get(self, image: str) -> Lookup | None:
        """The answer for ``image``, or ``None`` when the file does not mention it."""
        found = self.exact.get(image)
        if found is not None:
            return found
        for pattern, lookup in self.globs:
            if fnmatch.fnmatchcase(image, pattern):
                return lookup
        return None

    def lookups(self, images: list[str]) -> dict[str, Lookup]:
        """Answers for those ``images`` the file mentions (a ready ``Lookups`` for the policy)."""
        out: dict[str, Lookup] = {}
        for image in images:
            found = self.get(image)
            if found is not None:
                out[image] = found
        return out

    def __len__(self) -> int:
        return len(self.exact) + len(self.globs)


@dataclass(frozen=True)
class LayeredPlatforms:
    """Declarations from several sources, applied in order (the flag's file, then each matching policy's).

    An exact key of any layer beats every glob; for the same key the later layer
    wins; globs of later layers are tried first, the first layer's last
    (``docs/policies.md``, ``imagePlatforms``). Nothing is copied: an admission
    layers its policies' declarations over a file of any size for free.
    """

    layers: tuple[StaticPlatforms, ...]

    def get(self, image: str) -> Lookup | None:
        for layer in reversed(self.layers):
            found = layer.exact.get(image)
            if found is not None:
                return found
        for layer in reversed(self.layers):
            for pattern, lookup in layer.globs:
                if fnmatch.fnmatchcase(image, pattern):
                    return lookup
        return None

    def lookups(self, images: list[str]) -> dict[str, Lookup]:
        """Answers for those ``images`` some layer mentions."""
        return {image: found for image in images if (found := self.get(image)) is not None}

    def __len__(self) -> int:
        return sum(len(layer) for layer in self.layers)

    @property
    def source(self) -> str:
        return self.layers[0].source if self.layers else "<none>"


Declarations: TypeAlias = StaticPlatforms | LayeredPlatforms


def layered(*sources: Declared | None) -> Declarations | None:
    """The declarations of ``sources`` applied in order (later ones win), without copying any of them."""
    layers: list[StaticPlatforms] = []
    for source in sources:
        if isinstance(source, LayeredPlatforms):
            layers.extend(source.layers)
        elif isinstance(source, StaticPlatforms):
            layers.append(source)
        elif source is not None:
            raise TypeError(f"declared platforms are {type(source).__name__}, not StaticPlatforms")
    if not layers:
        return None
    return layers[0] if len(layers) == 1 else LayeredPlatforms(tuple(layers))
