"""containerd config.toml registry credentials, in the layouts of containerd 1.x and 2.x."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from noe_core.credentials.containerd_config import keychain_from_containerd_config, keychain_from_containerd_toml
from noe_core.credentials.keychain import Keychain
from noe_core.errors import CredentialError, InvalidSettings
from noe_core.name.reference import parse_reference

SECRET = "c0ntainerd-s3cret"


def users(keychain: Keychain, image: str) -> list[str]:
    return [credential.username for credential in keychain.resolve(parse_reference(image))]


VERSION_2 = f"""
version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = ""
[plugins."io.containerd.grpc.v1.cri".registry.configs."reg.corp:5000".auth]
  username = "robot"
  password = "{SECRET}"
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".auth]
  auth = "{base64.b64encode(b"_json_key:k").decode()}"
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".tls]
  insecure_skip_verify = false
[plugins."io.containerd.grpc.v1.cri".registry.configs."myacr.azurecr.io".auth]
  identitytoken = "tok-{SECRET}"
[plugins."io.containerd.grpc.v1.cri".registry.configs."tlsonly.corp".tls]
  ca_file = "/etc/ca.pem"
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry-1.docker.io".auth]
  username = "hub"
  password = "x"
"""

VERSION_3 = f"""
version = 3
[plugins."io.containerd.cri.v1.images".registry.configs."reg.corp".auth]
  username = "v3user"
  password = "{SECRET}"
"""

VERSION_1 = """
[plugins.cri.registry.configs."old.corp".auth]
  username = "v1user"
  password = "p"
[plugins.cri.registry.auths."https://older.corp"]
  username = "auths-user"
  password = "p"
"""


def test_version_2() -> None:
    keychain = keychain_from_containerd_toml(VERSION_2, "containerd config test")
    assert users(keychain, "reg.corp:5000/app") == ["robot"]
    assert users(keychain, "reg.corp/app") == []
    assert users(keychain, "gcr.io/p/i") == ["_json_key"]
    assert users(keychain, "tlsonly.corp/x") == []
    assert users(keychain, "nginx") == ["hub"]
    [acr] = keychain.resolve(parse_reference("myacr.azurecr.io/app"))
    assert acr.is_refresh_token
    assert acr.source == "containerd config test"


def test_version_3_and_1() -> None:
    assert users(keychain_from_containerd_toml(VERSION_3.encode(), "v3"), "reg.corp/a") == ["v3user"]
    keychain = keychain_from_containerd_toml(VERSION_1, "v1")
    assert users(keychain, "old.corp/a") == ["v1user"]
    assert users(keychain, "older.corp/a") == ["auths-user"]


def test_no_registry_section() -> None:
    assert (
        users(keychain_from_containerd_toml('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n', "x"), "reg.corp/a")
        == []
    )
    assert users(keychain_from_containerd_toml("", "x"), "reg.corp/a") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f'password = "{SECRET}', "not valid TOML"),
        (f"x = {SECRET}", "not valid TOML"),
        ("plugins = 1", "must be a table"),
        ('[plugins."io.containerd.grpc.v1.cri"]\nregistry = "x"', "registry must be a table"),
        (f'[plugins.cri.registry.configs."r.corp"]\nauth = "{SECRET}"', "must be an object"),
        (f'[plugins.cri.registry.configs."r.corp".auth]\nauth = "!{SECRET}"', "not base64"),
        (f'[plugins.cri.registry.configs."r.corp".auth]\nusername = 1\npassword = "{SECRET}"', "must be a string"),
        ('[plugins.cri.registry.configs."bad host".auth]\nusername = "a"', "whitespace"),
    ],
)
def test_malformed(text: str, message: str) -> None:
    with pytest.raises(CredentialError) as info:
        keychain_from_containerd_toml(text, "containerd config /etc/containerd/config.toml")
    assert message in str(info.value)
    assert "containerd config /etc/containerd/config.toml" in str(info.value)
    assert SECRET not in str(info.value)


def test_not_utf8() -> None:
    with pytest.raises(CredentialError, match="UTF-8"):
        keychain_from_containerd_toml(b"\xff\xfe", "x")


def test_file_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(VERSION_3)
    keychain = keychain_from_containerd_config(path)
    assert users(keychain, "reg.corp/a") == ["v3user"]
    path.write_text(VERSION_3.replace("v3user", "rotated"))
    os.utime(path, ns=(1, 10**18))
    assert users(keychain, "reg.corp/a") == ["rotated"]
    with pytest.raises(InvalidSettings, match="containerd config"):
        keychain_from_containerd_config(tmp_path / "missing.toml")
