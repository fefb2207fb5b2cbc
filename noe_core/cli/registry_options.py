"""Registry flags shared by ``noe serve``, ``noe mutate`` and ``noe inspect``.

Every flag is also an environment variable (``--registry-proxies`` →
``NOE_REGISTRY_PROXIES``). ``--docker-config`` and ``--containerd-config`` may be
repeated; paths that do not exist are skipped with a note on the log, so a
chart can list the usual candidate paths on every node image.
"""

from __future__ import annotations

import argparse
import logging
import os

from noe_core.cli.options import add_option
from noe_core.credentials.containerd_config import keychain_from_containerd_config
from noe_core.credentials.docker_config import keychain_from_file
from noe_core.credentials.keychain import ANONYMOUS, Keychain, MultiKeychain
from noe_core.errors import InvalidSettings
from noe_core.hostmatch import parse_image_patterns, parse_patterns
from noe_core.registry_settings import RegistrySettings, parse_duration, parse_registry_proxies

log = logging.getLogger(__name__)


def add_registry_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the registry access flags to ``parser`` (in their own help group)."""
    group = parser.add_argument_group("registry access")
    add_option(group, "--registry-proxies", default="", metavar="GLOB=MIRROR,...",
               help="read images of registries matching GLOB from MIRROR (host[:port][/path]), "
                    "e.g. docker.io=mirror.corp,*.gcr.io=gcr-mirror.corp")
    add_option(group, "--private-registries", default="", metavar="PATTERNS",
               help="registries (kubelet image patterns, e.g. '*.corp,123.dkr.ecr.*.amazonaws.com') "
                    "that never get an anonymous request when credentials are known")
    add_option(group, "--insecure-registries", default="", metavar="GLOBS",
               help="registry host globs (e.g. '127.0.0.1:*') allowed over plain HTTP or unverified TLS")
    add_option(group, "--registry-ca-file", default=None, metavar="FILE",
               help="PEM file of a private CA trusted for registries, in addition to the public ones")
    add_option(group, "--docker-config", action="append", default=[], metavar="FILE",
               help="docker config.json (or .dockercfg) with registry credentials; repeatable; "
                    "missing files are skipped")
    add_option(group, "--containerd-config", action="append", default=[], metavar="FILE",
               help="containerd config.toml whose registry auth sections hold credentials; repeatable; "
                    "missing files are skipped")
    add_option(group, "--image-credential-provider-config", default=None, metavar="FILE",
               help="kubelet CredentialProviderConfig (YAML or JSON) naming credential provider plugins")
    add_option(group, "--image-credential-provider-bin-dir", default=None, metavar="DIR",
               help="directory holding the credential provider plugin binaries")
    add_option(group, "--cache-ttl", default="1h", metavar="DURATION",
               help="how long a tag → digest answer is trusted before one HEAD re-validates it "
                    "(seconds or Go syntax: 1h, 30s)")
    add_option(group, "--negative-cache-ttl", default="30s", metavar="DURATION",
               help="how long a failed lookup is remembered, so a failing registry is not hammered")
    verify_default = os.environ.get("NOE_VERIFY_PLATFORM_MANIFESTS", "true").strip().lower()
    group.add_argument(
        "--verify-platform-manifests",
        action=argparse.BooleanOptionalAction,
        default=verify_default not in ("0", "false", "no", "off"),
        help="check each platform manifest of an index with a HEAD request and drop those the "
             "registry no longer has (default: on) [env NOE_VERIFY_PLATFORM_MANIFESTS]",
    )


def registry_settings_from_args(ns: argparse.Namespace) -> RegistrySettings:
    """The :class:`RegistrySettings` the flags describe; raises :class:`InvalidSettings`."""
    ca_file = ns.registry_ca_file or None
    if ca_file is not None and not os.path.isfile(ca_file):
        raise InvalidSettings(f"--registry-ca-file {ca_file}: no such file")
    private = parse_patterns(ns.private_registries)
    parse_image_patterns(",".join(private))  # validate now, not on the first lookup
    return RegistrySettings(
        registry_proxies=parse_registry_proxies(ns.registry_proxies),
        insecure_registries=parse_patterns(ns.insecure_registries),
        registry_ca_file=ca_file,
        private_registries=private,
        cache_ttl=parse_duration(ns.cache_ttl, "--cache-ttl"),
        negative_cache_ttl=parse_duration(ns.negative_cache_ttl, "--negative-cache-ttl"),
        verify_platform_manifests=bool(ns.verify_platform_manifests),
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
    config = ns.image_credential_provider_config
    if config:
        bin_dir = ns.image_credential_provider_bin_dir
        if not bin_dir:
            raise InvalidSettings(
                "--image-credential-provider-config needs --image-credential-provider-bin-dir"
            )
        from noe_core.credentials.provider import CredentialProviderKeychain  # noqa: PLC0415

        keychains.append(CredentialProviderKeychain(config, bin_dir))
    if not keychains:
        return ANONYMOUS
    return keychains[0] if len(keychains) == 1 else MultiKeychain(*keychains)
