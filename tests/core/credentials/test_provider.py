"""Kubelet credential-provider plugins, run for real: small executables written by the tests."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from noe_core.credentials.keychain import Keychain, MultiKeychain
from noe_core.credentials.provider import (
    CredentialProviderKeychain,
    ProviderConfig,
    parse_credential_provider_config,
)
from noe_core.errors import DeadlineExceeded, InvalidSettings, RegistryError
from noe_core.name.reference import Reference, parse_reference

SECRET = "plugin-Pa55word-0123456789abcdefXYZ"

# The plugin: records each request, then behaves as its MODE variable says.
PLUGIN = r"""#!/usr/bin/env python3
import json, os, subprocess, sys, time
state = os.environ["STATE_DIR"]
request = sys.stdin.read()
with open(os.path.join(state, "calls.jsonl"), "a") as f:
    f.write(json.dumps({"request": json.loads(request), "args": sys.argv[1:], "env": dict(os.environ)}) + "\n")
mode = os.environ.get("MODE", "ok")
if mode == "sleep":
    time.sleep(30)
if mode == "orphan":
    subprocess.Popen(["sleep", "30"])
    time.sleep(30)
if mode == "fail":
    sys.stderr.write("debug: token=" + os.environ["PW"] + "\nAccessDenied: not authorized " + os.environ["PW"] + "\n")
    sys.exit(1)
if mode == "garbage":
    print("here is your password " + os.environ["PW"] + " {not json")
    sys.exit(0)
if mode == "slow":
    time.sleep(float(os.environ.get("DELAY", "0.5")))
req = json.loads(request)
response = {
    "apiVersion": os.environ.get("ANSWER_VERSION", req["apiVersion"]),
    "kind": os.environ.get("ANSWER_KIND", "CredentialProviderResponse"),
    "cacheKeyType": os.environ.get("KEY_TYPE", "Image"),
    "auth": {
        os.environ.get("AUTH_KEY", "*.corp"): {"username": "robot", "password": os.environ["PW"]},
        "reg.corp/team": {"username": "team", "password": os.environ["PW"] + "-team"},
    },
}
if "DURATION" in os.environ:
    response["cacheDuration"] = os.environ["DURATION"]
print(json.dumps(response))
"""


class Plugin:
    """A provider setup in tmp_path: bin dir, config file, state dir, recorded calls and errors."""

    def __init__(self, tmp_path: Path) -> None:
        self.bin_dir = tmp_path / "bin"
        self.state = tmp_path / "state"
        self.bin_dir.mkdir()
        self.state.mkdir()
        self.config = tmp_path / "config.yaml"
        self.errors: list[tuple[str, RegistryError]] = []
        self.now = 1000.0

    def install(self, name: str = "test-provider") -> None:
        path = self.bin_dir / name
        path.write_text(PLUGIN)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def configure(
        self,
        env: dict[str, str] | None = None,
        *,
        name: str = "test-provider",
        match: tuple[str, ...] = ("*.corp", "reg.corp:5000"),
        default_cache: str = "0s",
        api_version: str = "credentialprovider.kubelet.k8s.io/v1",
        extra: list[dict[str, Any]] | None = None,
    ) -> None:
        all_env = {"STATE_DIR": str(self.state), "PW": SECRET, **(env or {})}
        provider = {
            "name": name,
            "matchImages": list(match),
            "defaultCacheDuration": default_cache,
            "apiVersion": api_version,
            "args": ["get-credentials", "--flag"],
            "env": [{"name": k, "value": v} for k, v in all_env.items()],
        }
        document = {
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [provider, *(extra or [])],
        }
        self.config.write_text(json.dumps(document))

    def keychain(self, **kwargs: Any) -> CredentialProviderKeychain:
        def on_error(provider: ProviderConfig, reference: Reference, error: RegistryError) -> None:
            self.errors.append((provider.name, error))

        kwargs.setdefault("on_error", on_error)
        kwargs.setdefault("clock", lambda: self.now)
        return CredentialProviderKeychain(self.config, self.bin_dir, **kwargs)

    def calls(self) -> list[dict[str, Any]]:
        path = self.state / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    setup = Plugin(tmp_path)
    setup.install()
    return setup


def users(keychain: Keychain, image: str, timeout: float | None = None) -> list[str]:
    return [c.username for c in keychain.resolve(parse_reference(image), timeout=timeout)]


def test_protocol_request_and_credentials(plugin: Plugin, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOE_SOME_SETTING", "must-not-leak")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/x")
    plugin.configure({"EXTRA": "configured"})
    keychain = plugin.keychain()
    credentials = keychain.resolve(parse_reference("reg.corp/team/app:1.0"))
    assert [c.username for c in credentials] == ["team", "robot"]
    assert credentials[1].password == SECRET
    assert credentials[0].source == "credential provider test-provider"
    [call] = plugin.calls()
    assert call["request"] == {
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": "reg.corp/team/app",
    }
    assert call["args"] == ["get-credentials", "--flag"]
    assert call["env"]["EXTRA"] == "configured"
    assert call["env"]["AWS_ROLE_ARN"] == "arn:aws:iam::1:role/x"
    assert "NOE_SOME_SETTING" not in call["env"]
    assert "PATH" in call["env"]
    assert plugin.errors == []


def test_unmatched_images_do_not_run_the_plugin(plugin: Plugin) -> None:
    plugin.configure()
    keychain = plugin.keychain()
    assert users(keychain, "quay.io/x") == []
    assert users(keychain, "a.b.corp/x") == []  # `*` is one label
    assert users(keychain, "reg.corp:5001/x") == []  # ports must match
    assert plugin.calls() == []
    assert users(keychain, "reg.corp:5000/x") == []  # matched, but the response's keys have no port
    assert len(plugin.calls()) == 1


@pytest.mark.parametrize("api_version", ["v1", "v1beta1", "v1alpha1"])
def test_api_versions(plugin: Plugin, api_version: str) -> None:
    plugin.configure(api_version=f"credentialprovider.kubelet.k8s.io/{api_version}")
    assert users(plugin.keychain(), "x.corp/a") == ["robot"]
    assert plugin.calls()[0]["request"]["apiVersion"] == f"credentialprovider.kubelet.k8s.io/{api_version}"


def test_cache_by_image(plugin: Plugin) -> None:
    plugin.configure({"KEY_TYPE": "Image", "DURATION": "5m0s"})
    keychain = plugin.keychain()
    assert users(keychain, "x.corp/a:1") == ["robot"]
    assert users(keychain, "x.corp/a:2") == ["robot"]  # same repository, other tag
    assert len(plugin.calls()) == 1
    assert users(keychain, "x.corp/b") == ["robot"]
    assert len(plugin.calls()) == 2
    plugin.now += 301
    assert users(keychain, "x.corp/a") == ["robot"]
    assert len(plugin.calls()) == 3


def test_cache_by_registry(plugin: Plugin) -> None:
    plugin.configure({"KEY_TYPE": "Registry", "DURATION": "1h"})
    keychain = plugin.keychain()
    users(keychain, "x.corp/a")
    users(keychain, "x.corp/b/c")
    assert len(plugin.calls()) == 1
    users(keychain, "y.corp/a")
    assert len(plugin.calls()) == 2
    plugin.now += 3599
    users(keychain, "y.corp/z")
    assert len(plugin.calls()) == 2
    plugin.now += 2
    users(keychain, "y.corp/z")
    assert len(plugin.calls()) == 3


def test_cache_global(plugin: Plugin) -> None:
    plugin.configure({"KEY_TYPE": "Global", "DURATION": "10m"})
    keychain = plugin.keychain()
    assert users(keychain, "x.corp/a") == ["robot"]
    assert users(keychain, "reg.corp/team/b") == ["team", "robot"]  # cached answer, matched for this image
    assert users(keychain, "y.corp/c") == ["robot"]
    assert len(plugin.calls()) == 1
    keychain.clear_cache()
    users(keychain, "y.corp/c")
    assert len(plugin.calls()) == 2


def test_cache_duration_defaults_and_zero(plugin: Plugin) -> None:
    plugin.configure({"KEY_TYPE": "Global"}, default_cache="1m")
    keychain = plugin.keychain()
    users(keychain, "x.corp/a")
    users(keychain, "x.corp/a")
    assert len(plugin.calls()) == 1  # no cacheDuration: the config's default
    plugin.now += 61
    users(keychain, "x.corp/a")
    assert len(plugin.calls()) == 2

    plugin.configure({"KEY_TYPE": "Global", "DURATION": "0s"}, default_cache="1h")
    keychain = plugin.keychain()
    users(keychain, "x.corp/a")
    users(keychain, "x.corp/a")
    assert len(plugin.calls()) == 4  # cacheDuration 0: never cached


def test_timeout_kills_a_slow_plugin(plugin: Plugin) -> None:
    plugin.configure({"MODE": "sleep"})
    keychain = plugin.keychain(timeout=0.5, clock=time.monotonic)
    started = time.monotonic()
    assert users(keychain, "x.corp/a") == []
    assert time.monotonic() - started < 5
    [(name, error)] = plugin.errors
    assert name == "test-provider"
    assert isinstance(error, DeadlineExceeded)
    assert "test-provider" in str(error) and "0.5s" in str(error)


def test_timeout_kills_what_the_plugin_started(plugin: Plugin) -> None:
    plugin.configure({"MODE": "orphan"})
    keychain = plugin.keychain(timeout=0.5, clock=time.monotonic)
    started = time.monotonic()
    assert users(keychain, "x.corp/a") == []
    assert time.monotonic() - started < 5
    assert isinstance(plugin.errors[0][1], DeadlineExceeded)


def test_caller_remaining_time_bounds_the_plugin(plugin: Plugin) -> None:
    plugin.configure({"MODE": "sleep"})
    keychain = plugin.keychain(timeout=10, clock=time.monotonic)
    started = time.monotonic()
    assert users(keychain, "x.corp/a", timeout=0.4) == []
    assert time.monotonic() - started < 5
    assert users(keychain, "x.corp/a", timeout=0) == []  # no time left: not even started
    assert len(plugin.calls()) == 1
    assert all(isinstance(error, DeadlineExceeded) for _, error in plugin.errors)


def test_failing_plugin(plugin: Plugin) -> None:
    plugin.configure({"MODE": "fail"})
    assert users(plugin.keychain(), "x.corp/a") == []
    [(_, error)] = plugin.errors
    message = str(error)
    assert "'test-provider' exited with status 1" in message
    assert "AccessDenied: not authorized <redacted>" in message
    assert "debug" not in message  # only the last line of stderr
    assert SECRET not in message and SECRET not in repr(error)
    assert error.temporary


def test_garbage_printing_plugin(plugin: Plugin) -> None:
    plugin.configure({"MODE": "garbage"})
    assert users(plugin.keychain(), "x.corp/a") == []
    [(_, error)] = plugin.errors
    assert "not a JSON CredentialProviderResponse" in str(error)
    assert SECRET not in str(error)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ANSWER_VERSION": "credentialprovider.kubelet.k8s.io/v1beta1"}, "apiVersion"),
        ({"ANSWER_KIND": "Other"}, "kind 'Other'"),
        ({"KEY_TYPE": "Pod"}, "cacheKeyType 'Pod'"),
        ({"DURATION": "five minutes"}, "cacheDuration"),
    ],
)
def test_invalid_responses(plugin: Plugin, env: dict[str, str], message: str) -> None:
    plugin.configure(env)
    assert users(plugin.keychain(), "x.corp/a") == []
    [(_, error)] = plugin.errors
    assert message in str(error)
    assert SECRET not in str(error)


def test_bad_auth_key_is_skipped(plugin: Plugin) -> None:
    plugin.configure({"AUTH_KEY": "bad key"})
    assert users(plugin.keychain(), "reg.corp/team/x") == ["team"]


def test_concurrent_lookups_share_one_run(plugin: Plugin) -> None:
    plugin.configure({"MODE": "slow", "DELAY": "0.7"})
    keychain = plugin.keychain(clock=time.monotonic)
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(users(keychain, "x.corp/a"))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [["robot"]] * 6
    assert len(plugin.calls()) == 1


def test_several_providers_in_order(plugin: Plugin) -> None:
    plugin.install("second")
    second = {
        "name": "second",
        "matchImages": ["x.corp"],
        "defaultCacheDuration": "0s",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "env": [{"name": "STATE_DIR", "value": str(plugin.state)}, {"name": "PW", "value": "other"}],
    }
    plugin.configure(extra=[second])
    keychain = plugin.keychain()
    credentials = keychain.resolve(parse_reference("x.corp/a"))
    assert [c.source for c in credentials] == ["credential provider test-provider", "credential provider second"]
    assert len(plugin.calls()) == 2
    assert [c.username for c in MultiKeychain(keychain).resolve(parse_reference("y.corp/a"))] == ["robot"]


def test_yaml_config(plugin: Plugin) -> None:
    plugin.config.write_text(
        f"""
apiVersion: kubelet.config.k8s.io/v1beta1
kind: CredentialProviderConfig
providers:
  - name: test-provider
    matchImages:
      - "*.corp"
    defaultCacheDuration: "12h"
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    env:
      - name: STATE_DIR
        value: {plugin.state}
      - name: PW
        value: {SECRET}
"""
    )
    keychain = plugin.keychain()
    assert users(keychain, "a.corp/x") == ["robot"]
    [provider] = keychain.providers
    assert provider.default_cache_duration == 12 * 3600
    assert provider.args == ()
    assert SECRET not in repr(provider)


def base_provider(**changes: Any) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "name": "p",
        "matchImages": ["*.corp"],
        "defaultCacheDuration": "1m",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
    }
    provider.update(changes)
    return {k: v for k, v in provider.items() if v is not None}


def config_doc(*providers: dict[str, Any], **changes: Any) -> str:
    doc: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": list(providers),
    }
    doc.update(changes)
    return json.dumps(doc)


BAD_CONFIGS = [
    (f"providers: [{{name: '{SECRET}'\n  x", "not valid YAML"),
    ("[]", "must be an object"),
    (config_doc(base_provider(), kind="Other"), "kind must be"),
    (config_doc(base_provider(), apiVersion="kubelet.config.k8s.io/v2"), "apiVersion"),
    (config_doc(), "non-empty list"),
    (config_doc(base_provider(name="../evil")), "plain file name"),
    (config_doc(base_provider(name="a/b")), "plain file name"),
    (config_doc(base_provider(name="..")), "plain file name"),
    (config_doc(base_provider(name="")), "name must be"),
    (config_doc(base_provider(apiVersion="credentialprovider.kubelet.k8s.io/v2")), "apiVersion"),
    (config_doc(base_provider(matchImages=[])), "matchImages"),
    (config_doc(base_provider(matchImages=["reg.corp:*"])), "port"),
    (config_doc(base_provider(defaultCacheDuration=None)), "defaultCacheDuration is required"),
    (config_doc(base_provider(defaultCacheDuration="-1m")), "defaultCacheDuration"),
    (config_doc(base_provider(args="x")), "args"),
    (config_doc(base_provider(env=["x"])), "env"),
    (config_doc(base_provider(), base_provider()), "unique"),
]


@pytest.mark.parametrize(("text", "message"), BAD_CONFIGS)
def test_bad_configs(text: str, message: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_credential_provider_config(text, "credential provider config /etc/cp.yaml")
    assert message in str(info.value)
    assert "credential provider config /etc/cp.yaml" in str(info.value)
    assert SECRET not in str(info.value)


def test_missing_or_non_executable_plugin(tmp_path: Path) -> None:
    setup = Plugin(tmp_path)
    setup.configure()
    with pytest.raises(InvalidSettings, match="not an executable file"):
        setup.keychain()
    (setup.bin_dir / "test-provider").write_text(PLUGIN)  # not chmod +x
    with pytest.raises(InvalidSettings, match="not an executable file"):
        setup.keychain()
    with pytest.raises(InvalidSettings, match="not a directory"):
        CredentialProviderKeychain(setup.config, tmp_path / "nope")
    with pytest.raises(InvalidSettings, match="cannot read"):
        CredentialProviderKeychain(tmp_path / "missing.yaml", setup.bin_dir)


def test_non_positive_timeout_is_refused(plugin: Plugin) -> None:
    plugin.configure()
    with pytest.raises(InvalidSettings, match="timeout"):
        plugin.keychain(timeout=0)


def test_no_secret_anywhere(plugin: Plugin, caplog: pytest.LogCaptureFixture) -> None:
    plugin.configure({"KEY_TYPE": "Global", "DURATION": "1h"})
    keychain = CredentialProviderKeychain(plugin.config, plugin.bin_dir)  # default logging error hook
    credentials = keychain.resolve(parse_reference("reg.corp/team/a"))
    texts: list[Callable[[], str]] = [
        lambda: repr(keychain), lambda: repr(keychain.providers), lambda: repr(list(credentials)),
        lambda: str(credentials[0]), lambda: credentials[0].identity,
    ]  # fmt: skip
    for text in texts:
        assert SECRET not in text()
    plugin.configure({"MODE": "fail"})
    CredentialProviderKeychain(plugin.config, plugin.bin_dir).resolve(parse_reference("x.corp/a"))
    assert "exited with status 1" in caplog.text
    assert SECRET not in caplog.text
    assert os.environ.get("PW") is None
