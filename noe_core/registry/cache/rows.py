"""An image's platforms as the shared caches store them: one JSON text per digest, and back.

The node's :class:`~noe_core.registry.cache.sqlite.CacheStore` and the replicas'
:class:`~noe_core.registry.cache.redis.RedisCache` keep, per digest, the media type and
this text; this module is the one encoding (every field, so nothing is lost on the way
back) and the one decoding, for the resolver and for ``noe cache list``.

The text is versioned, so that a field added to :class:`~noe_core.image.image_platforms.ImagePlatforms`
fits without a new cache layout::

    {"v": 2, "platforms": [[os, arch, variant, os.version, [features], manifest digest], …]}

* a new image-level field is a new key beside ``platforms``; a new per-platform field is
  appended to each platform's list. Readers ignore keys and trailing items they do not
  know, so older and newer replicas sharing one cache read each other's rows;
* a change an older reader would misread (a field moved or redefined) raises ``v``: a row
  of a higher version is refused (a miss, looked up again), never misread;
* version 1, the bare list of platforms (the store's first rows), is still read;
* version 3 is an artifact's row (rule 17): ``{"v": 3, "artifactType": …, "platforms": []}``.
  A version-2 reader would misread it as an image of no platforms, so it refuses it;
  every other row is still written as version 2, so replicas of the previous release
  sharing the cache during an upgrade keep reading them.
"""

from __future__ import annotations

import json
from typing import Any

from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.platform import Platform

ROW_VERSION = 3
"""The highest version this noe reads."""
_IMAGE_VERSION = 2
_ARTIFACT_VERSION = 3
_PLATFORM_FIELDS = 6


def platforms_row(found: ImagePlatforms) -> str:
    """The platforms column of ``found``'s row (see the module's docstring for its shape)."""
    if found.artifact_type:
        return json.dumps(
            {"v": _ARTIFACT_VERSION, "artifactType": found.artifact_type, "platforms": []}, separators=(",", ":")
        )
    return json.dumps(
        {
            "v": _IMAGE_VERSION,
            "platforms": [
                [
                    p.platform.os,
                    p.platform.architecture,
                    p.platform.variant,
                    p.platform.os_version,
                    list(p.platform.os_features),
                    p.digest,
                ]
                for p in found.resolved
            ],
        },
        separators=(",", ":"),
    )


def from_row(digest: str, media_type: str, platforms: str) -> ImagePlatforms:
    """The answer a row holds; raises ``ValueError`` or ``TypeError`` for a row this version cannot read."""
    document: Any = json.loads(platforms)
    if isinstance(document, dict):
        version = document.get("v")
        if not isinstance(version, int) or version < 2:
            raise ValueError(f"a row of version {version!r}")
        if version > ROW_VERSION:
            raise ValueError(f"a row of version {version}, written by a newer noe (this one reads {ROW_VERSION})")
        if "platforms" not in document:
            raise ValueError("a row without platforms")
        rows = document["platforms"]
        if version >= _ARTIFACT_VERSION and "artifactType" in document:
            artifact_type = document["artifactType"]
            if not isinstance(artifact_type, str) or not artifact_type:
                raise ValueError("an artifact row without its artifactType")
            return ImagePlatforms.artifact(artifact_type, digest=digest, media_type=media_type)
    else:
        rows = document  # version 1
    if not isinstance(rows, list):
        raise TypeError("platforms are not a list")
    read = []
    for row in rows:
        if not isinstance(row, list) or len(row) < _PLATFORM_FIELDS:
            raise ValueError("a platform of fewer fields than version 1's")
        os, arch, variant, os_version, features, manifest = row[:_PLATFORM_FIELDS]
        read.append((Platform(os, arch, variant, os_version, tuple(features)), manifest))
    return ImagePlatforms(
        tuple(platform for platform, _ in read),
        digest,
        media_type,
        tuple(manifest for _, manifest in read) if any(manifest for _, manifest in read) else (),
    )
