"""Registry flags (declared in :mod:`noe_core.cli.flags`) → :class:`RegistrySettings` and the node keychain.

Shared by ``noe serve``, ``noe mutate`` and ``noe inspect``; every flag is also
an environment variable (``--registry-proxies`` → ``NOE_REGISTRY_PROXIES``).
``--docker-config`` and ``--containerd-config`` may be repeated; paths that do
not exist are skipped with a note on the log, so a chart can list the usual
candidate paths on every node image.
"""

from __future__ import annotations

import argparse
import logging
import os

from noe_core.cli.flags import CREDENTIAL_PROVIDER_BIN_DIR, CREDENTIAL_PROVIDER_CONFIG, REGISTRY_CA_FILE, REGISTRY_FLAGS
from noe_core.cli.parser import add_flags, require, usage_error
from noe_core.credentials.containerd_config import keychain_from_containerd_config
from noe_core.credentials.docker_config import keychain_from_file
from noe_core.credentials.keychain import ANONYMOUS, Keychain, MultiKeychain
from noe_core.registry.settings import RegistrySettings

log = logging.getLogger(__name__)


def add_registry_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the registry access flags to ``parser`` (in their own help group)."""
    add_flags(parser.add_argument_group("registry access"), REGISTRY_FLAGS)


def registry_settings_from_args(ns: argparse.Namespace) -> RegistrySettings:
    """The :class:`RegistrySettings` the parsed flags describe; raises :class:`InvalidSettings`."""
    ca_file = require(ns, REGISTRY_CA_FILE)
    return RegistrySettings(
        registry_proxies=ns.registry_proxies,
        insecure_registries=ns.insecure_registries,
        registry_ca_file=str(ca_file) if ca_file is not None else None,
        private_registries=ns.private_registries,
        cache_ttl=ns.cache_ttl,
        negative_cache_ttl=ns.negative_cache_ttl,
        verify_platform_manifests=ns.verify_platform_manifests,
    )


def _usable_candidate(path: str, flag: str) -> bool:
    """Node credential files are candidates: absent or unreadable ones are skipped, never fatal.

    The chart lists the usual host paths; a node may lack them, or hold them
    root-only (the webhook runs as non-root) — neither may keep it from serving.
    """
    if not os.path.exists(path):
        log.info("%s %s does not exist; skipped", flag, path)
        return False
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        log.warning("%s %s is not a readable file (directory or permissions); skipped", flag, path)
        return False
    return True


def node_keychain_from_args(ns: argparse.Namespace) -> Keychain:
    """Node-level credentials: docker configs, containerd configs, then credential providers."""
    keychains: list[Keychain] = [
        keychain_from_file(path) for path in ns.docker_config or () if _usable_candidate(path, "--docker-config")
    ]
    keychains += [
        keychain_from_containerd_config(path)
        for path in ns.containerd_config or ()
        if _usable_candidate(path, "--containerd-config")
    ]
    config = require(ns, CREDENTIAL_PROVIDER_CONFIG)
    bin_dir = require(ns, CREDENTIAL_PROVIDER_BIN_DIR)
    if config is not None:
        if bin_dir is None:
            raise usage_error(ns, CREDENTIAL_PROVIDER_CONFIG, f"needs {CREDENTIAL_PROVIDER_BIN_DIR.name}")
        from noe_core.credentials.provider import CredentialProviderKeychain  # noqa: PLC0415

        keychains.append(CredentialProviderKeychain(config, bin_dir))
    if not keychains:
        return ANONYMOUS
    return keychains[0] if len(keychains) == 1 else MultiKeychain(*keychains)
