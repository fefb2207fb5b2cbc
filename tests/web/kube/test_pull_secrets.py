"""noe_web.kube.pull_secrets against a real HTTPS peer: what a pod is told about Secrets noe could not read."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import pytest

from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.pull_secrets import WITHOUT_IT, KubePullSecrets
from tests.support.certs import make_ca
from tests.support.fake_kube_api import FakeKubeAPI, pull_secret, start_fake_kube_api

TOKEN = "kube-token-pull-secrets"
HINT = "noe reads imagePullSecrets only in the namespaces of the Helm value webhook.pullSecrets.namespaces"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[FakeKubeAPI, KubeClient]]:
    with start_fake_kube_api(make_ca("kube CA", tmp_path / "ca"), tokens=(TOKEN,)) as api:
        api.state.secret_namespaces = frozenset({"team-a"})
        for namespace in ("team-a", "team-c"):
            for name in ("one", "two"):
                api.add_secret(
                    namespace, name, pull_secret("registry.corp", "robot", "pw", namespace=namespace, name=name)
                )
        client = KubeClient(load_kubeconfig(api.write_kubeconfig(tmp_path / "kc", token=TOKEN)), timeout=5.0)
        try:
            yield api, client
        finally:
            client.close()


def _read(client: KubeClient, namespace: str, names: list[str], hint: str = "") -> tuple[object, list[str]]:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        read = KubePullSecrets(client, pool, forbidden_hint=hint).read(namespace, names)
    return read.keychain, list(read.warnings)


def test_forbidden_secrets_are_named_and_the_hint_follows_once(kube: tuple[FakeKubeAPI, KubeClient]) -> None:
    _, client = kube
    chain, warnings = _read(client, "team-c", ["one", "two"], HINT)
    assert chain is None
    assert warnings == [
        "imagePullSecret team-c/one could not be read (forbidden to noe); its images are read without it",
        "imagePullSecret team-c/two could not be read (forbidden to noe); its images are read without it",
        HINT,
    ]


def test_the_hint_is_for_forbidden_secrets_only(kube: tuple[FakeKubeAPI, KubeClient]) -> None:
    _, client = kube
    chain, warnings = _read(client, "team-a", ["one", "absent"], HINT)
    assert chain is not None
    assert warnings == [f"imagePullSecret team-a/absent not found; {WITHOUT_IT}"]


def test_without_a_hint_only_the_secret_is_named(kube: tuple[FakeKubeAPI, KubeClient]) -> None:
    _, client = kube
    _, warnings = _read(client, "team-c", ["one"])
    assert warnings == [
        "imagePullSecret team-c/one could not be read (forbidden to noe); its images are read without it"
    ]
