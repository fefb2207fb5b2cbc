"""Hostile input anywhere gets a 400, a warning or one line and exit 2 — never a 500 or a traceback.

Issue 13, defects 5, 6 and 9: deep structures in AdmissionReviews and pull
Secrets, thousands of imagePullSecrets on one pod, and hostile files given to
``noe mutate``, ``noe inspect`` and ``noe serve`` (deep JSON/YAML, a YAML
"billion laughs", binary content).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from noe_core.image.declared import StaticPlatforms
from noe_core.k8s.object_meta import read_object_meta
from noe_core.policies.settings import PolicySettings
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.testing import admission_review, pod
from noe_core.util.printable import printable
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.events import REASON_FAILED, EventRequest, build_event, object_ref
from noe_web.metrics import Metrics
from noe_web.webhook.admission import MAX_PULL_SECRETS, AdmissionService
from noe_web.webhook.app import Services, create_app
from tests.support.certs import CA, make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.images import PushedImage
from tests.support.paths import ROOT

TOKEN = "hostile-input-token"
INSECURE = RegistrySettings(insecure_registries=("127.0.0.1:*",))
DEEP_JSON = "[" * 100_000 + "]" * 100_000
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"  {name}: &{name} [{','.join(['*' + prev] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
BILLION_LAUGHS = (  # a pod whose spec holds 9**9 "lol"s once the aliases are expanded
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: laughs\nlaughs:\n  "
    + LAUGHS
    + "spec:\n  containers: [{name: c, image: 'x86:1'}]\n  extra: *i\n"
)
DEEP_YAML = "".join("  " * i + "k:\n" for i in range(5000)) + "  " * 5000 + "v\n"


@pytest.fixture(scope="module")
def kube_ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca("hostile-input kube CA", tmp_path_factory.mktemp("hostile-kube-ca"))


@pytest.fixture(scope="module")
def kube_api(kube_ca: CA) -> Iterator[FakeKubeAPI]:
    with start_fake_kube_api(kube_ca, tokens=(TOKEN,)) as api:
        yield api


@pytest.fixture
def app(kube_api: FakeKubeAPI, tmp_path: Path) -> Iterator[Flask]:
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig", token=TOKEN)
    kube = KubeClient(load_kubeconfig(kubeconfig), timeout=5.0, secret_cache_ttl=0)
    session = make_session(INSECURE)
    service = AdmissionService(
        policy=PolicySettings(),
        metrics=Metrics(),
        deadline_seconds=3.0,
        static=StaticPlatforms.from_mapping({"x86:1": ["linux/amd64"]}),
        kube=kube,
        resolver=Resolver(session, settings=INSECURE),
    )
    application = create_app(Services(service))
    yield application
    service.close()
    session.close()


@pytest.fixture
def arm_image(pushed_images: dict[str, PushedImage]) -> str:
    return pushed_images["docker-single-arm64"].reference


def _with_pull_secrets(names: list[str], namespace: str, image: str) -> dict[str, object]:
    review = admission_review(pod([image], namespace=namespace))
    review["request"]["object"]["spec"]["imagePullSecrets"] = [{"name": n} for n in names]
    return review


def test_pull_secret_nested_50000_deep_is_a_warning(app: Flask, kube_api: FakeKubeAPI, arm_image: str) -> None:
    deep = '{"auths": ' * 50_000 + "{}" + "}" * 50_000
    kube_api.add_secret(
        "deep",
        "bomb",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "bomb", "namespace": "deep"},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(deep.encode()).decode()},
        },
    )
    resp = app.test_client().post("/mutate", json=_with_pull_secrets(["bomb"], "deep", arm_image))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    answer = resp.get_json()["response"]
    assert answer["allowed"] is True and "patch" in answer  # the image is still placed
    assert any("deep/bomb" in w and "nested deeper" in w for w in answer["warnings"]), answer["warnings"]


def test_thousands_of_pull_secret_names_are_capped(app: Flask, kube_api: FakeKubeAPI, arm_image: str) -> None:
    before = len([r for r in kube_api.requests_snapshot() if "/namespaces/many/secrets/" in r.path])
    names = [f"s-{i}" for i in range(5000)]
    resp = app.test_client().post("/mutate", json=_with_pull_secrets(names, "many", arm_image))
    assert resp.status_code == 200
    answer = resp.get_json()["response"]
    gets = len([r for r in kube_api.requests_snapshot() if "/namespaces/many/secrets/" in r.path]) - before
    assert gets <= MAX_PULL_SECRETS, gets
    capped = [w for w in answer["warnings"] if "more imagePullSecrets not read" in w]
    assert len(capped) == 1 and str(5000 - MAX_PULL_SECRETS) in capped[0]


# ----------------------------------------------------------------------------- CLIs


def _noe(*args: str, module: str = "noe_web") -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    return proc.returncode, proc.stderr, time.monotonic() - start


def _assert_one_line(code: int, err: str, elapsed: float) -> None:
    assert code == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert elapsed < 30, f"took {elapsed:.0f}s"


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("hostile-files")
    files = {
        "deep.json": DEEP_JSON,
        "deep.yaml": DEEP_YAML,
        "laughs.yaml": BILLION_LAUGHS,
    }
    out = {name: where / name for name in files}
    for name, text in files.items():
        out[name].write_text(text)
    out["binary"] = where / "binary"
    out["binary"].write_bytes(bytes(range(256)) * 64)
    return out


@pytest.mark.parametrize("name", ["deep.json", "deep.yaml", "laughs.yaml", "binary"])
def test_noe_mutate_refuses_hostile_objects(hostile_files: dict[str, Path], name: str) -> None:
    _assert_one_line(*_noe("mutate", "-f", str(hostile_files[name]), "--platforms", "examples/platforms.json"))


@pytest.mark.parametrize("name", ["deep.json", "deep.yaml", "laughs.yaml", "binary"])
def test_noe_mutate_refuses_hostile_platforms_files(hostile_files: dict[str, Path], name: str) -> None:
    _assert_one_line(*_noe("mutate", "-f", "examples/pod.yaml", "--platforms", str(hostile_files[name])))


@pytest.mark.parametrize("name", ["deep.json", "binary"])
def test_noe_inspect_refuses_a_hostile_docker_config(hostile_files: dict[str, Path], name: str) -> None:
    _assert_one_line(
        *_noe("inspect", "127.0.0.1:9/app:v1", "--timeout", "2", "--docker-config", str(hostile_files[name]))
    )


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("--image-platforms", "deep.yaml"),
        ("--image-platforms", "binary"),
        ("--image-platforms", "laughs.yaml"),
        ("--kubeconfig", "deep.yaml"),
        ("--kubeconfig", "binary"),
        ("--kubeconfig", "laughs.yaml"),
    ],
)
def test_noe_serve_refuses_hostile_files(hostile_files: dict[str, Path], tmp_path: Path, flag: str, name: str) -> None:
    _assert_one_line(
        *_noe(
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path),
            flag,
            str(hostile_files[name]),
        )
    )


def test_event_messages_are_printable() -> None:
    """Owner names reach Events straight from the pod as sent (validation comes after admission)."""
    ref = object_ref(read_object_meta(pod(["x86:1"], name="p")), kind="Pod", namespace="team")
    hostile = "replicasets of ReplicaSet web-\x1b[31m\u202eevil\x00: cannot inspect \x07img"
    event = build_event(EventRequest(ref, "Warning", REASON_FAILED, hostile), instance="noe-0")
    assert printable(event["message"]) == event["message"]
    assert not any(c in event["message"] for c in "\x1b\u202e\x00\x07")
