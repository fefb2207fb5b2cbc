"""Docker client configuration and Kubernetes image pull Secrets, read as keychains.

Three shapes carry the same ``registry key → entry`` map:

* docker ``config.json`` and the ``.dockerconfigjson`` key of a
  ``kubernetes.io/dockerconfigjson`` Secret: ``{"auths": {KEY: ENTRY}}``;
* the legacy ``~/.dockercfg`` and the ``.dockercfg`` key of a
  ``kubernetes.io/dockercfg`` Secret: ``{KEY: ENTRY}`` at top level.

An ENTRY carries ``auth`` (base64 of ``user:password``, which wins as in the
docker CLI and the kubelet), or ``username``/``password``, and optionally
``identitytoken`` (an OAuth2 refresh token: see :class:`~noe_core.credentials.keychain.Credential`).
``email`` and ``registrytoken`` are ignored. An entry with none of these is
skipped: ``docker login`` writes such empty entries when a ``credsStore`` holds
the secret. ``credsStore`` and ``credHelpers`` run programs of the docker CLI
that the webhook's image does not ship, so they are ignored, with a log line.

KEYs are kubelet image patterns (:mod:`noe_core.name.hostmatch`, with ``https://``
and ``/v1/``/``/v2/`` dropped), so ``https://index.docker.io/v1/`` is Docker Hub.

Errors name the source and the key, never a value: a Secret's content must not
reach a log or an admission warning.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from noe_core.credentials.keychain import Credential, FileKeychain, Keychain, StaticKeychain
from noe_core.errors import CredentialError, InvalidSettings
from noe_core.name.hostmatch import ImagePattern, parse_image_pattern
from noe_core.util import fields
from noe_core.util.safe_load import TooComplex, load_json

log = logging.getLogger(__name__)

DOCKER_CONFIG_JSON_TYPE = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
DOCKERCFG_TYPE = "kubernetes.io/dockercfg"
DOCKERCFG_KEY = ".dockercfg"

_HELPER_KEYS = ("credsStore", "credHelpers")


def _decode_json(data: bytes | str, source: str) -> Any:
    try:
        return load_json(data)
    except TooComplex as exc:
        raise CredentialError(f"{source}: refused: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        # JSONDecodeError's message gives the position, never the document.
        where = f" (line {exc.lineno} column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise CredentialError(f"{source}: not valid JSON{where}") from None


def credential_from_entry(key: str, entry: object, source: str) -> Credential | None:
    """The credential of one ``auths`` entry, ``None`` when it holds none (a credsStore stub).

    Also used for containerd's ``auth`` tables, which have the same fields.
    """
    where = f"{source}: the entry for {key!r}"
    entry = fields.mapping(entry, where, required=True, missing=f"{where} must be an object", error=CredentialError)
    text = {
        name: fields.string(entry.get(name), f"{source}: {name!r} of the entry for {key!r}", error=CredentialError)
        for name in ("auth", "username", "password", "identitytoken")
    }
    username, password = text["username"], text["password"]
    auth = text["auth"]
    if auth:
        try:
            decoded = base64.b64decode(auth, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise CredentialError(f"{source}: 'auth' of the entry for {key!r} is not base64 text") from None
        username, colon, password = decoded.partition(":")
        if not colon:
            raise CredentialError(
                f"{source}: 'auth' of the entry for {key!r} must encode 'username:password' (no ':' found)"
            )
    token = text["identitytoken"]
    if not (username or password or token):
        return None
    try:
        return Credential(username, password, source, identity_token=token)
    except CredentialError as exc:
        raise CredentialError(f"{source}: entry for {key!r}: {exc}") from None


def _auths_keychain(auths: object, source: str) -> StaticKeychain:
    auths = fields.mapping(
        auths,
        f"{source}: the registry map",
        required=True,
        missing=f"{source}: the registry map must be an object of registry → credentials",
        error=CredentialError,
    )
    entries: list[tuple[ImagePattern, Credential]] = []
    for key, entry in auths.items():
        if not isinstance(key, str):  # pragma: no cover - JSON keys are strings
            raise CredentialError(f"{source}: registry keys must be strings")
        try:
            pattern = parse_image_pattern(key, docker_config_key=True)
        except InvalidSettings as exc:
            raise CredentialError(f"{source}: {exc}") from None
        credential = credential_from_entry(key, entry, source)
        if credential is None:
            log.debug("%s: entry %r has no inline credentials, skipped", source, key)
            continue
        entries.append((pattern, credential))
    return StaticKeychain(entries)


def keychain_from_docker_config(
    data: bytes | str | Mapping[str, Any], source: str, *, legacy: bool = False
) -> StaticKeychain:
    """A keychain from a ``config.json`` document (``legacy=True``: a ``.dockercfg`` one).

    ``source`` names where it came from in credentials and error messages,
    e.g. ``"docker config /root/.docker/config.json"``.
    """
    document = data if isinstance(data, Mapping) else _decode_json(data, source)
    if not isinstance(document, Mapping):
        raise CredentialError(f"{source}: the document must be a JSON object")
    if legacy:
        return _auths_keychain(document, source)
    helpers = [key for key in _HELPER_KEYS if document.get(key)]
    if helpers:
        log.info(
            "%s: %s ignored; only credentials written inline under 'auths' are used", source, " and ".join(helpers)
        )
    auths = document.get("auths")
    return _auths_keychain({} if auths is None else auths, source)


def keychain_from_pull_secret(secret: Mapping[str, Any], source: str | None = None) -> StaticKeychain:
    """A keychain from an image pull Secret as the Kubernetes API returns it (base64 ``data``).

    Like the kubelet, only the two docker Secret types are read, each from its
    own key; any other Secret is an error naming it, so a mistyped
    ``imagePullSecrets`` entry is reported instead of silently pulling anonymously.
    """
    if not isinstance(secret, Mapping):
        raise CredentialError(f"{source or 'image pull Secret'}: a Secret must be an object")
    metadata = secret.get("metadata")
    if source is None:
        namespace = name = "?"
        if isinstance(metadata, Mapping):
            namespace = str(metadata.get("namespace") or "?")
            name = str(metadata.get("name") or "?")
        source = f"imagePullSecret {namespace}/{name}"
    secret_type = secret.get("type")
    if secret_type == DOCKER_CONFIG_JSON_TYPE:
        key, legacy = DOCKER_CONFIG_JSON_KEY, False
    elif secret_type == DOCKERCFG_TYPE:
        key, legacy = DOCKERCFG_KEY, True
    else:
        raise CredentialError(
            f"{source}: type {secret_type!r} is not an image pull Secret type "
            f"({DOCKER_CONFIG_JSON_TYPE!r} or {DOCKERCFG_TYPE!r}); the kubelet ignores it too"
        )
    data = fields.mapping(secret.get("data"), f"{source}: data", error=CredentialError)
    encoded = fields.string(data.get(key), f"{source}: data[{key!r}]", error=CredentialError)
    if not encoded:
        raise CredentialError(f"{source}: data[{key!r}] is missing or empty")
    try:
        payload = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise CredentialError(f"{source}: data[{key!r}] is not base64") from None
    return keychain_from_docker_config(payload, source, legacy=legacy)


def keychain_from_file(path: str | os.PathLike[str], *, legacy: bool | None = None) -> Keychain:
    """A keychain from a docker config file on disk, re-read when the file changes.

    ``legacy=None`` reads a file named ``.dockercfg`` in the legacy shape and
    anything else as ``config.json``. Raises :class:`InvalidSettings` if the
    file cannot be read at start-up.
    """
    text_path = os.fspath(path)
    is_legacy = os.path.basename(text_path) == ".dockercfg" if legacy is None else legacy

    def load(data: bytes, source: str) -> Keychain:
        return keychain_from_docker_config(data, source, legacy=is_legacy)

    return FileKeychain(text_path, load, f"docker config {text_path}")
