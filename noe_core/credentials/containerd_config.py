"""Registry credentials from containerd's ``config.toml``, as a keychain.

On nodes whose runtime is containerd, static registry credentials often live in
its configuration rather than in a docker ``config.json``; the webhook can read
the same file (mounted from the node) so it sees what the node can pull.

Layouts read, whatever the file's ``version`` says (a table that is absent is
simply empty):

* version 3 (containerd 2.x): ``[plugins."io.containerd.cri.v1.images".registry.configs."HOST".auth]``
* version 2 (containerd 1.x): ``[plugins."io.containerd.grpc.v1.cri".registry.configs."HOST".auth]``
* version 1: ``[plugins.cri.registry.configs."HOST".auth]``
* the older ``registry.auths."https://HOST"`` tables of each, deprecated by containerd but still met.

An ``auth`` table has ``username``/``password``, or ``auth`` (base64 of
``user:password``), and optionally ``identitytoken`` (an OAuth2 refresh token,
see :class:`~noe_core.credentials.keychain.Credential`). containerd looks credentials up by
exact registry host; here the HOST is read as a kubelet image pattern, which for
a plain host means the same thing (``docker.io`` and ``registry-1.docker.io``
are one registry). ``imports = [...]`` drop-in files are not followed: point
noe at the file that holds the credentials.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from noe_core.credentials.docker_config import credential_from_entry
from noe_core.credentials.keychain import Credential, FileKeychain, Keychain, StaticKeychain
from noe_core.errors import CredentialError, InvalidSettings
from noe_core.name.hostmatch import ImagePattern, parse_image_pattern

log = logging.getLogger(__name__)

CRI_PLUGINS = ("io.containerd.cri.v1.images", "io.containerd.grpc.v1.cri", "cri")


def _table(parent: Mapping[str, Any], key: str, where: str, source: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise CredentialError(f"{source}: {where}.{key} must be a table")
    return value


def keychain_from_containerd_toml(data: bytes | str, source: str) -> StaticKeychain:
    """A keychain from the text of a containerd ``config.toml``; ``source`` names it in messages."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        document = tomllib.loads(text)
    except UnicodeDecodeError:
        raise CredentialError(f"{source}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        # tomllib's messages give a position, not the offending text.
        raise CredentialError(f"{source}: not valid TOML: {exc}") from None
    if document.get("imports"):
        log.info("%s: 'imports' are not followed; only this file's registry credentials are used", source)
    entries: list[tuple[ImagePattern, Credential]] = []
    plugins = _table(document, "plugins", "", source)
    for plugin in CRI_PLUGINS:
        where = f'plugins."{plugin}"'
        registry = _table(_table(plugins, plugin, "plugins", source), "registry", where, source)
        where += ".registry"
        for host, config in _table(registry, "configs", where, source).items():
            if not isinstance(config, Mapping):
                raise CredentialError(f'{source}: {where}.configs."{host}" must be a table')
            auth = config.get("auth")
            if auth is not None:
                _add(entries, host, auth, source)
        for host, auth in _table(registry, "auths", where, source).items():
            _add(entries, host, auth, source)
    return StaticKeychain(entries)


def _add(entries: list[tuple[ImagePattern, Credential]], host: str, auth: object, source: str) -> None:
    try:
        pattern = parse_image_pattern(host, docker_config_key=True)
    except InvalidSettings as exc:
        raise CredentialError(f"{source}: {exc}") from None
    credential = credential_from_entry(host, auth, source)
    if credential is not None:
        entries.append((pattern, credential))


def keychain_from_containerd_config(path: str | os.PathLike[str]) -> Keychain:
    """A keychain from a containerd ``config.toml`` on disk, re-read when it changes.

    Raises :class:`InvalidSettings` when the file cannot be read or parsed at start-up.
    """
    text_path = os.fspath(path)
    return FileKeychain(text_path, keychain_from_containerd_toml, f"containerd config {text_path}")
