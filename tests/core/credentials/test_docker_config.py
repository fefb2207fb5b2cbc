"""docker config.json, legacy .dockercfg and image pull Secrets as keychains."""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from noe_core.credentials.docker_config import (
    keychain_from_docker_config,
    keychain_from_file,
    keychain_from_pull_secret,
)
from noe_core.errors import CredentialError, InvalidSettings
from noe_core.name.reference import parse_reference

SECRET = "Sup3r-s3cret-value"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def users(keychain: Any, image: str) -> list[str]:
    return [credential.username for credential in keychain.resolve(parse_reference(image))]


CONFIG = {
    "auths": {
        "https://index.docker.io/v1/": {"auth": b64(f"hubuser:{SECRET}")},
        "reg.corp": {"username": "plain", "password": SECRET},
        "reg.corp/team": {"auth": b64(f"team:{SECRET}2"), "email": "x@y"},
        "https://eu.gcr.io": {"auth": b64('_json_key:{"a": "b:c"}')},
        "myregistry.azurecr.io": {
            "auth": b64("00000000-0000-0000-0000-000000000000:"),
            "identitytoken": "refresh-" + SECRET,
        },
        "helper.corp": {},
        "localhost:5000": {"username": "local", "password": "pw"},
    },
    "credsStore": "desktop",
}


def test_config_json_entries() -> None:
    keychain = keychain_from_docker_config(json.dumps(CONFIG).encode(), "docker config test")
    assert users(keychain, "nginx") == ["hubuser"]
    assert users(keychain, "docker.io/myorg/app:1") == ["hubuser"]
    assert users(keychain, "reg.corp/team/app") == ["team", "plain"]
    assert users(keychain, "reg.corp/other") == ["plain"]
    assert users(keychain, "eu.gcr.io/p/img") == ["_json_key"]
    assert users(keychain, "localhost:5000/x") == ["local"]
    assert users(keychain, "localhost/x") == []
    assert users(keychain, "helper.corp/x") == []
    [gcr] = keychain.resolve(parse_reference("eu.gcr.io/p/img"))
    assert gcr.password == '{"a": "b:c"}'  # split at the first ':'
    [acr] = keychain.resolve(parse_reference("myregistry.azurecr.io/app"))
    assert acr.is_refresh_token and acr.identity_token == "refresh-" + SECRET
    assert acr.source == "docker config test"
    [plain] = keychain.resolve(parse_reference("reg.corp/x"))
    assert plain.password == SECRET


def test_mapping_input_and_auth_wins_over_username() -> None:
    doc = {"auths": {"reg.corp": {"auth": b64("fromauth:pw"), "username": "ignored", "password": "x"}}}
    assert users(keychain_from_docker_config(doc, "m"), "reg.corp/a") == ["fromauth"]


def test_empty_and_helper_only_configs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert len(keychain_from_docker_config(b"{}", "s")) == 0
    assert len(keychain_from_docker_config(b'{"auths": null}', "s")) == 0
    keychain = keychain_from_docker_config(b'{"credHelpers": {"gcr.io": "gcloud"}, "auths": {}}', "cfg")
    assert len(keychain) == 0
    assert "credHelpers ignored" in caplog.text


def test_legacy_dockercfg() -> None:
    doc = {"https://index.docker.io/v1/": {"auth": b64("old:pw"), "email": "e"}}
    assert users(keychain_from_docker_config(json.dumps(doc), "legacy", legacy=True), "busybox") == ["old"]


MALFORMED = [
    (b"not json " + SECRET.encode(), "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[]", "must be a JSON object"),
    (json.dumps({"auths": []}).encode(), "registry map"),
    (json.dumps({"auths": {"reg.corp": "x" + SECRET}}).encode(), "entry for 'reg.corp' must be an object"),
    (json.dumps({"auths": {"reg.corp": {"auth": "!!" + SECRET}}}).encode(), "not base64"),
    (json.dumps({"auths": {"reg.corp": {"auth": b64("nocolon" + SECRET)}}}).encode(), "no ':'"),
    (json.dumps({"auths": {"reg.corp": {"password": 5}}}).encode(), "must be a string"),
    (json.dumps({"auths": {"reg corp": {"auth": b64("a:b")}}}).encode(), "whitespace"),
    (json.dumps({"auths": {"reg.corp": {"username": "a:b", "password": SECRET}}}).encode(), "':'"),
]


@pytest.mark.parametrize(("data", "message"), MALFORMED)
def test_malformed_config_names_source_never_secret(data: bytes, message: str) -> None:
    with pytest.raises(CredentialError) as info:
        keychain_from_docker_config(data, "docker config /x/config.json")
    text = str(info.value)
    assert message in text
    assert "docker config /x/config.json" in text
    assert SECRET not in text
    assert SECRET not in repr(info.value)


def secret(secret_type: str, key: str, payload: object, name: str = "regcred") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "team-a"},
        "type": secret_type,
        "data": {key: b64(json.dumps(payload))},
    }


def test_pull_secret_dockerconfigjson() -> None:
    obj = secret(
        "kubernetes.io/dockerconfigjson", ".dockerconfigjson", {"auths": {"reg.corp": {"auth": b64(f"robot:{SECRET}")}}}
    )
    keychain = keychain_from_pull_secret(obj)
    [credential] = keychain.resolve(parse_reference("reg.corp/app"))
    assert credential.username == "robot"
    assert credential.source == "imagePullSecret team-a/regcred"
    assert keychain_from_pull_secret(obj, "custom").resolve(parse_reference("reg.corp/a"))[0].source == "custom"


def test_pull_secret_dockercfg() -> None:
    obj = secret("kubernetes.io/dockercfg", ".dockercfg", {"reg.corp": {"auth": b64("legacy:pw")}})
    assert users(keychain_from_pull_secret(obj), "reg.corp/app") == ["legacy"]


BAD_SECRETS: list[tuple[dict[str, Any], str]] = [
    (secret("Opaque", ".dockerconfigjson", {"auths": {}}), "not an image pull Secret type"),
    (secret("kubernetes.io/dockerconfigjson", ".dockercfg", {}), "missing or empty"),
    ({**secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", {}), "data": None}, "missing"),
    ({**secret("kubernetes.io/dockercfg", ".dockercfg", {}), "data": {".dockercfg": "%%" + SECRET}}, "not base64"),
    ({**secret("kubernetes.io/dockercfg", ".dockercfg", {}), "data": {".dockercfg": b64(SECRET)}}, "not valid JSON"),
]


@pytest.mark.parametrize(("obj", "message"), BAD_SECRETS)
def test_bad_pull_secrets(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(CredentialError) as info:
        keychain_from_pull_secret(obj)
    assert message in str(info.value)
    assert "imagePullSecret team-a/regcred" in str(info.value)
    assert SECRET not in str(info.value)


def test_keychain_from_file_follows_rotation(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"auths": {"reg.corp": {"auth": b64("first:pw")}}}))
    keychain = keychain_from_file(path)
    assert users(keychain, "reg.corp/app") == ["first"]
    [credential] = keychain.resolve(parse_reference("reg.corp/app"))
    assert credential.source == f"docker config {path}"
    path.write_text(json.dumps({"auths": {"reg.corp": {"auth": b64("second:pw2")}}}))
    os.utime(path, ns=(1, 10**18))
    assert users(keychain, "reg.corp/app") == ["second"]


def test_keychain_from_legacy_file(tmp_path: Path) -> None:
    path = tmp_path / ".dockercfg"
    path.write_text(json.dumps({"reg.corp": {"auth": b64("legacy:pw")}}))
    assert users(keychain_from_file(path), "reg.corp/app") == ["legacy"]


def test_keychain_from_missing_or_bad_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidSettings, match="docker config"):
        keychain_from_file(tmp_path / "nope.json")
    bad = tmp_path / "config.json"
    bad.write_text("{" + SECRET)
    with pytest.raises(InvalidSettings) as info:
        keychain_from_file(bad)
    assert SECRET not in str(info.value)
