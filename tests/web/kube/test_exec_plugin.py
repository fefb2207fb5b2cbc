"""Kubeconfig exec credential plugins: a real plugin program, a real HTTPS API peer, `noe certs` end to end."""

from __future__ import annotations

import argparse
import json
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core.errors import InvalidSettings
from noe_web.commands.certs import add_certs_parser, run_certs
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.errors import CredentialPluginFailed
from noe_web.kube.exec_plugin import MAX_OUTPUT, ExecCredentialError, ExecCredentialSource
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.fake_kube_certs_api import fake_kube_api as fake_kube_certs_api

FIRST, SECOND = "exec-token-first-0123", "exec-token-second-4567"

# The plugin: counts its runs, prints the token in $STATE/token with the expiry in $EXPIRES (none when empty),
# and records its arguments and what KUBERNETES_EXEC_INFO told it. With $STATE/fail it fails; with $STATE/flood
# it prints its token forever; with $STATE/fork it first starts a helper that inherits its stdout and hangs.
PLUGIN = """#!{python}
import json, os, sys
state = os.environ["STATE"]
with open(os.path.join(state, "runs"), "a") as f:
    f.write(json.dumps({{"args": sys.argv[1:], "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"])}}) + "\\n")
if os.path.exists(os.path.join(state, "fail")):
    print("error: the SSO session has expired; run aws sso login", file=sys.stderr)
    sys.exit(1)
status = {{"token": open(os.path.join(state, "token")).read().strip()}}
if os.path.exists(os.path.join(state, "flood")):  # a broken plugin printing its token forever
    while True:
        sys.stdout.write(status["token"] * 100)
if os.path.exists(os.path.join(state, "fork")):  # a helper left behind, holding our stdout open
    import subprocess
    helper = subprocess.Popen(["sleep", "300"])
    open(os.path.join(state, "grandchild"), "w").write(str(helper.pid))
if os.environ.get("EXPIRES"):
    status["expirationTimestamp"] = os.environ["EXPIRES"]
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}}))
"""


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("exec kube CA", tmp_path_factory.mktemp("exec-kube-ca"))


@pytest.fixture
def api(kube_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(kube_ca, tokens=(FIRST,)) as server:
        server.add_secret("team", "pull", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pull"}})
        yield server


def plugin(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "token").write_text(FIRST)
    script = tmp_path / "bin" / "fake-get-token"
    script.parent.mkdir(exist_ok=True)
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return state


def runs(state: Path) -> list[dict[str, Any]]:
    path = state / "runs"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def exec_kubeconfig(kubeconfig: Path, state: Path, *, expires: str = "", **extra: Any) -> Path:
    """Replace the current user of *kubeconfig* by the exec plugin (a path relative to the kubeconfig)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    user_name = next(c["context"]["user"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    user = next(u for u in doc["users"] if u["name"] == user_name)
    user["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "./bin/fake-get-token",
            "args": ["eks", "get-token", "--cluster-name", "prod"],
            "env": [{"name": "STATE", "value": str(state)}, {"name": "EXPIRES", "value": expires}],
            "interactiveMode": "Never",
            "provideClusterInfo": True,
            **extra,
        }
    }
    kubeconfig.write_text(yaml.safe_dump(doc))
    return kubeconfig


def client_for(api: FakeKubeAPI, tmp_path: Path, **kw: Any) -> tuple[KubeClient, Path]:
    state = plugin(tmp_path)
    config = load_kubeconfig(exec_kubeconfig(api.write_kubeconfig(tmp_path / "kc", token="unused"), state, **kw))
    return KubeClient(config, timeout=5.0, secret_cache_ttl=0), state


def test_token_from_the_plugin_is_cached_until_it_expires(api: FakeKubeAPI, tmp_path: Path) -> None:
    client, state = client_for(api, tmp_path, expires="2999-01-01T00:00:00Z")
    try:
        assert client.get_secret("team", "pull")["metadata"]["name"] == "pull"
        client.create_event("team", {"metadata": {"namespace": "team"}, "reason": "Test"})
        assert len(runs(state)) == 1
        assert {r.auth for r in api.requests_snapshot()} == {f"token:{FIRST}"}
        [run] = runs(state)
        assert run["args"] == ["eks", "get-token", "--cluster-name", "prod"]
        assert run["info"]["apiVersion"] == "client.authentication.k8s.io/v1"
        assert run["info"]["spec"]["interactive"] is False
        assert run["info"]["spec"]["cluster"]["server"] == api.url
    finally:
        client.close()
    assert "exec" in client.config.describe()["auth"] and FIRST not in repr(client.config)


def test_an_expired_token_runs_the_plugin_again(api: FakeKubeAPI, tmp_path: Path) -> None:
    client, state = client_for(api, tmp_path, expires="2001-01-01T00:00:00+00:00")
    try:
        client.get_secret("team", "pull")
        client.get_secret("team", "pull")
        assert len(runs(state)) == 2
    finally:
        client.close()


def test_without_expiry_the_token_is_kept_and_a_401_gets_a_fresh_one(api: FakeKubeAPI, tmp_path: Path) -> None:
    client, state = client_for(api, tmp_path)
    try:
        client.get_secret("team", "pull")
        client.get_secret("team", "pull")
        assert len(runs(state)) == 1
        # the identity provider rotated the token: the API refuses the old one, the plugin gives the new one
        (state / "token").write_text(SECOND)
        api.state.tokens = {SECOND}
        client.get_secret("team", "pull")
        assert len(runs(state)) == 2
        assert api.requests_snapshot()[-1].auth == f"token:{SECOND}"
    finally:
        client.close()


def test_a_failing_plugin_is_one_line_naming_it_and_no_token(api: FakeKubeAPI, tmp_path: Path) -> None:
    client, state = client_for(api, tmp_path)
    (state / "fail").touch()
    try:
        with pytest.raises(CredentialPluginFailed) as info:
            client.get_secret("team", "pull")
    finally:
        client.close()
    message = str(info.value)
    assert "./bin/fake-get-token" in message and "exit 1" in message and "aws sso login" in message
    assert "\n" not in message
    assert not api.requests_snapshot()  # nothing was sent without a credential


def test_a_plugin_whose_helper_hangs_is_killed_with_its_process_group_at_the_timeout(
    api: FakeKubeAPI, tmp_path: Path
) -> None:
    state = plugin(tmp_path)
    (state / "fork").touch()
    config = load_kubeconfig(exec_kubeconfig(api.write_kubeconfig(tmp_path / "kc", token="unused"), state))
    assert config.exec_plugin is not None
    source = ExecCredentialSource(config.exec_plugin, server=config.server, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ExecCredentialError) as info:
        source.token()
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 4.0, elapsed  # at the timeout, not when the helper's sleep ends
    message = str(info.value)
    assert message == (
        "exec credential plugin './bin/fake-get-token' did not finish within 1s; its process group was killed"
    )
    assert FIRST not in message + repr(info.value)  # it printed its token before hanging: never shown
    helper = int((state / "grandchild").read_text())
    end = time.monotonic() + 5
    while Path(f"/proc/{helper}").exists() and "Z" not in _state(helper) and time.monotonic() < end:
        time.sleep(0.05)
    assert not Path(f"/proc/{helper}").exists() or "Z" in _state(helper), "the helper outlived its plugin"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "Z"


def test_a_plugin_flooding_its_output_is_killed_at_the_cap_and_nothing_is_sent(
    api: FakeKubeAPI, tmp_path: Path
) -> None:
    client, state = client_for(api, tmp_path)
    (state / "flood").touch()
    started = time.monotonic()
    try:
        with pytest.raises(CredentialPluginFailed) as info:
            client.get_secret("team", "pull")
    finally:
        client.close()
    assert time.monotonic() - started < 20  # at the cap, long before the 60 s timeout
    message = str(info.value)
    assert f"exec credential plugin './bin/fake-get-token' printed more than {MAX_OUTPUT} bytes" in message
    assert "\n" not in message and FIRST not in message
    assert not api.requests_snapshot()  # nothing was sent without a credential


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda e: e.update(interactiveMode="Always"), "interactive terminal"),
        (lambda e: e.update(apiVersion="client.authentication.k8s.io/v1alpha1"), "apiVersion"),
        (lambda e: e.pop("command"), "no command"),
        (lambda e: e.update(env=[{"name": "X"}]), "name/value"),
    ],
)
def test_bad_exec_sections_are_refused_when_the_kubeconfig_is_read(
    api: FakeKubeAPI, tmp_path: Path, edit: Any, needle: str
) -> None:
    state = plugin(tmp_path)
    path = exec_kubeconfig(api.write_kubeconfig(tmp_path / "kc", token="unused"), state)
    doc = yaml.safe_load(path.read_text())
    edit(next(u for u in doc["users"] if "exec" in u["user"])["user"]["exec"])
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidSettings, match=needle):
        load_kubeconfig(path)


def test_a_plugin_missing_from_path_says_how_to_install_it(api: FakeKubeAPI, tmp_path: Path) -> None:
    state = plugin(tmp_path)
    path = exec_kubeconfig(
        api.write_kubeconfig(tmp_path / "kc", token="unused"),
        state,
        installHint="install the AWS CLI: https://aws.amazon.com/cli/",
    )
    doc = yaml.safe_load(path.read_text())
    next(u for u in doc["users"] if "exec" in u["user"])["user"]["exec"]["command"] = "noe-no-such-plugin"
    path.write_text(yaml.safe_dump(doc))
    client = KubeClient(load_kubeconfig(path), timeout=5.0)
    try:
        with pytest.raises(CredentialPluginFailed, match=r"not found on PATH \(install the AWS CLI"):
            client.get_secret("team", "pull")
    finally:
        client.close()


def test_noe_certs_runs_against_an_exec_plugin_kubeconfig(tmp_path: Path) -> None:
    with fake_kube_certs_api(tmp_path) as certs_api:
        state = plugin(tmp_path)
        (state / "token").write_text(certs_api.token)
        kubeconfig = exec_kubeconfig(
            certs_api.kubeconfig(tmp_path / "kubeconfig"), state, expires="2999-01-01T00:00:00Z"
        )
        parser = argparse.ArgumentParser(prog="noe")
        add_certs_parser(parser.add_subparsers(dest="command"))
        ns = parser.parse_args(
            [
                "certs",
                "--namespace=noe",
                "--service=noe",
                "--secret=noe-tls",
                "--webhook-config=noe",
                f"--kubeconfig={kubeconfig}",
            ]
        )
        assert run_certs(ns) == 0
        assert certs_api.requests  # it reached the API, authenticated by the plugin's token
        assert len(runs(state)) == 1  # one token for every call of the run
