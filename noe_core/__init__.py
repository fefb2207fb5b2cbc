"""noe_core: image references, manifests, platforms and the placement policy of the Noe webhook.

The stable surface is what ``__all__`` lists. Model and policy functions do no
I/O; the registry client (``Resolver``, ``resolve_platforms``) is the only code
here that speaks HTTP, over a ``requests.Session`` the caller hands in.
"""

from __future__ import annotations

from noe_core import testing
from noe_core.admission import AdmissionRequest, parse_admission_review, review_response
from noe_core.credentials.keychain import Credential, Keychain, MultiKeychain
from noe_core.deadline import Deadline
from noe_core.errors import (
    AuthError,
    DeadlineExceeded,
    DigestMismatch,
    InvalidInput,
    InvalidObject,
    InvalidPlatform,
    InvalidReference,
    InvalidSettings,
    ManifestError,
    NoeError,
    RegistryError,
    UnsupportedManifest,
)
from noe_core.lookup import ImagePlatforms, Lookup, LookupFailure, Lookups
from noe_core.manifest import Descriptor, ImageManifest, Index, MediaType, parse_config, parse_manifest
from noe_core.patch import apply_patch, make_patch
from noe_core.platform import Platform, parse_platform
from noe_core.platforms_file import StaticPlatforms
from noe_core.policy import Decision, decide, images_to_inspect
from noe_core.reference import Reference, parse_reference
from noe_core.registry.inspection import ImageInspector
from noe_core.registry.resolver import ImageInfo, ResolvedPlatform, Resolver, resolve_platforms
from noe_core.registry_settings import RegistrySettings
from noe_core.settings import PREFERRED_ARCH_LABEL, ArchToleration, PolicySettings

__all__ = [
    "PREFERRED_ARCH_LABEL",
    "AdmissionRequest",
    "ArchToleration",
    "AuthError",
    "Credential",
    "Deadline",
    "DeadlineExceeded",
    "Decision",
    "Descriptor",
    "DigestMismatch",
    "ImageInfo",
    "ImageInspector",
    "ImageManifest",
    "ImagePlatforms",
    "Index",
    "InvalidInput",
    "InvalidObject",
    "InvalidPlatform",
    "InvalidReference",
    "InvalidSettings",
    "Keychain",
    "Lookup",
    "LookupFailure",
    "Lookups",
    "ManifestError",
    "MediaType",
    "MultiKeychain",
    "NoeError",
    "Platform",
    "PolicySettings",
    "Reference",
    "RegistryError",
    "RegistrySettings",
    "ResolvedPlatform",
    "Resolver",
    "StaticPlatforms",
    "UnsupportedManifest",
    "apply_patch",
    "decide",
    "images_to_inspect",
    "make_patch",
    "parse_admission_review",
    "parse_config",
    "parse_manifest",
    "parse_platform",
    "parse_reference",
    "resolve_platforms",
    "review_response",
    "testing",
]
