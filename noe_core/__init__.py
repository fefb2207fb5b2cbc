"""noe_core: image references, manifests, platforms and the placement policy of the Noe webhook.

The stable surface is what ``__all__`` lists. Model and policy functions do no
I/O; the registry client (``Resolver``, ``resolve_platforms``, ``LookupService``
in :mod:`noe_core.registry`) is the only code here that speaks HTTP, and the
credentials (``Credential``, ``Keychain``, ``MultiKeychain`` in
:mod:`noe_core.credentials`) the only code that runs subprocesses. Both are loaded
on first use (PEP 562), so ``import noe_core`` imports no HTTP library and starts
no thread; ``tests/core/test_import_purity.py`` checks it.

Folders by concern: a folder imports only the folders below it (the rules
are ``docs/architecture.md``'s, and ``tests/project/test_architecture.py``
holds the code to them):

* :mod:`.util` — small pure helpers: deadlines, fields of decoded JSON, safe YAML, JSON Patch, caches
* :mod:`.name` — names: image references, registry host patterns, Kubernetes names
* :mod:`.image` — the image model: platforms, manifests, an image's platforms and offer, nodes' platforms
* :mod:`.k8s` — Kubernetes objects as noe reads them: metadata, workloads, owners, selectors, requests
* :mod:`.policies` — placement policies, and the settings they merge into
* :mod:`.placement` — the placement contract's rules and the parts they are built from
* :mod:`.admission` — AdmissionReview in, one decision, AdmissionReview out
* :mod:`.report` — ``noe report``'s answer: what could run where, prices, the migration plan
* :mod:`.registry` — the registry client (the only HTTP) and its cache
* :mod:`.credentials` — keychains: Docker and containerd configuration, pull Secrets, kubelet plugins
* :mod:`.cli` — ``noe mutate``, ``noe inspect``, ``noe policy``
* :mod:`.errors` — the error tree every noe_core error belongs to
* :mod:`.testing` — builders and a scheduler predicate, to test placement offline
* :mod:`._moved` — the module paths noe_core had before its folders, kept for one release
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from noe_core import _moved, testing
from noe_core.admission.admitting import Admission, admit
from noe_core.admission.review import AdmissionRequest, parse_admission_review, review_response
from noe_core.errors import (
    AuthError,
    CredentialError,
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
from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import (
    ImagePlatforms,
    Inspect,
    Lookup,
    LookupFailure,
    LookupRequest,
    LookupResult,
    Lookups,
    ResolvedPlatform,
    fixed,
)
from noe_core.image.manifest import Descriptor, ImageManifest, Index, MediaType, parse_config, parse_manifest
from noe_core.image.node_platform import NodePlatform, usable_on
from noe_core.image.platform import OsVersion, Platform, parse_platform
from noe_core.k8s.workload import Workload, read_workload
from noe_core.name.reference import Reference, parse_reference
from noe_core.placement.pipeline import decide
from noe_core.placement.rules import Decision, images_to_inspect, place
from noe_core.policies.rollout import ROLLOUT_LABEL, in_cohort
from noe_core.policies.settings import PREFERRED_ARCH_LABEL, ArchToleration, PolicySettings
from noe_core.registry.settings import RegistrySettings
from noe_core.util.deadline import Deadline
from noe_core.util.json_patch import apply_patch, make_patch

if TYPE_CHECKING:
    from noe_core.credentials.keychain import Credential, Keychain, MultiKeychain
    from noe_core.registry.lookup_service import LookupService
    from noe_core.registry.resolver import ImageInfo, Resolver, resolve_platforms

_moved.install()  # the module paths noe_core had before its folders, for one release

# Names whose modules import requests, start threads or run subprocesses: loaded on first access.
_LAZY = {
    "Credential": "noe_core.credentials.keychain",
    "Keychain": "noe_core.credentials.keychain",
    "MultiKeychain": "noe_core.credentials.keychain",
    "LookupService": "noe_core.registry.lookup_service",
    "ImageInfo": "noe_core.registry.resolver",
    "Resolver": "noe_core.registry.resolver",
    "resolve_platforms": "noe_core.registry.resolver",
}


def __getattr__(name: str) -> object:
    """Import a registry or credential name on first access, then keep it as a module global."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'noe_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "PREFERRED_ARCH_LABEL",
    "ROLLOUT_LABEL",
    "Admission",
    "AdmissionRequest",
    "ArchToleration",
    "AuthError",
    "Credential",
    "CredentialError",
    "Deadline",
    "DeadlineExceeded",
    "Decision",
    "Descriptor",
    "DigestMismatch",
    "ImageInfo",
    "ImageManifest",
    "ImagePlatforms",
    "Index",
    "Inspect",
    "InvalidInput",
    "InvalidObject",
    "InvalidPlatform",
    "InvalidReference",
    "InvalidSettings",
    "Keychain",
    "Lookup",
    "LookupFailure",
    "LookupRequest",
    "LookupResult",
    "LookupService",
    "Lookups",
    "ManifestError",
    "MediaType",
    "MultiKeychain",
    "NodePlatform",
    "NoeError",
    "OsVersion",
    "Platform",
    "PolicySettings",
    "Reference",
    "RegistryError",
    "RegistrySettings",
    "ResolvedPlatform",
    "Resolver",
    "StaticPlatforms",
    "UnsupportedManifest",
    "Workload",
    "admit",
    "apply_patch",
    "decide",
    "fixed",
    "images_to_inspect",
    "in_cohort",
    "make_patch",
    "parse_admission_review",
    "parse_config",
    "parse_manifest",
    "parse_platform",
    "parse_reference",
    "place",
    "read_workload",
    "resolve_platforms",
    "review_response",
    "testing",
    "usable_on",
]
