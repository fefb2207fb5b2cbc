"""One log schema: every line a real ``noe serve`` writes is one JSON object with the same base keys.

The run goes through good admissions (one reading a private image through a
pull Secret), bad requests (not JSON, wrong kind, 405, oversized) and a
SIGTERM shutdown; then every line of stdout and stderr is parsed. The uid of
an admission must be on its lines — the registry's, logged from a lookup
thread, included — each 4xx answer has one line with its reason, and no
credential appears anywhere.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core.testing import admission_review, pod
from tests.support.certs import make_ca
from tests.support.fake_kube_api import FakeKubeAPI, start_fake_kube_api
from tests.support.images import PushedImage
from tests.support.noe_serve import NoeProcess, start_noe
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.registry]


BASE_KEYS = ("time", "level", "logger", "msg")
KUBE_TOKEN = "kube-log-token-" + uuid.uuid4().hex
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    ca = make_ca("log-schema kube CA", tmp_path_factory.mktemp("log-kube-ca"))
    with start_fake_kube_api(ca, tokens=(KUBE_TOKEN,)) as api:
        yield api


def _pull_secret(registry: RegistryServer, user: str, password: str) -> dict[str, Any]:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = {"auths": {registry.host: {"username": user, "password": password, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": "logs"},
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


def _records(noe: NoeProcess) -> list[dict[str, Any]]:
    """Every line of the process's stdout and stderr, each parsed as one JSON object with the base keys."""
    records = []
    for path in (noe.out_path, noe.err_path):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            try:
                doc = json.loads(line)
            except ValueError:
                pytest.fail(f"{path.name}:{number} is not JSON: {line[:300]!r}")
            assert isinstance(doc, dict), line
            missing = [key for key in BASE_KEYS if not isinstance(doc.get(key), str)]
            assert not missing, f"{path.name}:{number} lacks {missing}: {line[:300]}"
            assert TIME.match(doc["time"]), doc["time"]
            assert doc["level"] in ("debug", "info", "warning", "error", "critical"), doc
            records.append(doc)
    return records


def test_every_line_of_a_serve_run_is_one_json_object(  # noqa: PLR0917
    tmp_path: Path,
    registry: RegistryServer,
    pushed_images: dict[str, PushedImage],
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
    kube_api: FakeKubeAPI,
) -> None:
    user, password = basic_credentials
    kube_api.add_secret("logs", "regcred", _pull_secret(basic_registry, user, password))
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig", token=KUBE_TOKEN)
    noe = start_noe(
        tmp_path,
        [
            "--kubeconfig",
            str(kubeconfig),
            "--insecure-registries",
            "127.0.0.1:*",
            "--workers",
            "1",
            "--max-body-bytes",
            "65536",
            "--log-level",
            "debug",  # gunicorn's configuration dump included
            "--state-dir",
            str(tmp_path / "state"),
        ],
        None,
    )
    good_uid, private_uid = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        with noe.session() as s:
            public = admission_review(
                pod([pushed_images["docker-manifest-list"].reference], namespace="logs"), uid=good_uid
            )
            with s.post(noe.url + "/mutate", json=public, timeout=30) as resp:
                assert resp.status_code == 200 and resp.json()["response"]["uid"] == good_uid
            private = pod([basic_pushed_images["docker-single-arm64"].reference], namespace="logs")
            private["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
            with s.post(noe.url + "/mutate", json=admission_review(private, uid=private_uid), timeout=30) as resp:
                assert resp.status_code == 200 and "warnings" not in resp.json()["response"], resp.text
            bad = {
                "not_json": s.post(noe.url + "/mutate", data=b"{nope " + password.encode(), timeout=10),
                "invalid": s.post(noe.url + "/mutate", json={**public, "kind": "Pod"}, timeout=10),
                "method_not_allowed": s.put(noe.url + "/mutate", json=public, timeout=10),
                "too_large": s.post(noe.url + "/mutate", data=b"x" * 100_000, timeout=10),
            }
            for reason, resp in bad.items():
                assert 400 <= resp.status_code < 500 and resp.json()["reason"] == reason, resp.text
                resp.close()
        noe.proc.send_signal(signal.SIGTERM)
        assert noe.proc.wait(30) == 0
    finally:
        noe.stop()

    records = _records(noe)
    loggers = {r["logger"] for r in records}
    assert {"noe.serve", "noe.admission", "noe.app", "gunicorn.error", "gunicorn.access"} <= loggers, loggers
    startup = [r for r in records if r.get("event") == "startup"]
    assert len(startup) == 1 and startup[0]["msg"] == "noe webhook starting"
    dump = [r for r in records if r.get("event") == "gunicorn-config"]
    assert len(dump) == 1 and "GuardedThreadWorker" in dump[0]["config"]["worker_class"]
    assert any(r["logger"] == "gunicorn.error" and "Handling signal: term" in r["msg"] for r in records)

    # the admission's lines carry its uid, the registry's from the lookup thread included
    good_lines = [r for r in records if r.get("uid") == good_uid]
    assert any(r.get("event") == "admission" for r in good_lines), good_lines
    fallback = [r for r in records if r["logger"] == "noe_core.registry.sender" and "plain HTTP" in r["msg"]]
    assert fallback, "no registry line about the plain-HTTP fallback"
    assert fallback[0].get("uid") == good_uid, fallback
    assert all(r.get("uid") in (good_uid, private_uid, None) for r in records)

    # one line per 4xx answer, with its reason and without the body
    refused = [r for r in records if r.get("event") == "refused"]
    assert sorted(r["reason"] for r in refused) == sorted(bad)
    assert {r["status"] for r in refused} == {400, 405}
    assert all(r["level"] == "warning" and r["path"] == "/mutate" for r in refused)
    access = [r for r in records if r["logger"] == "gunicorn.access"]
    assert sorted(r["status"] for r in access if r["path"] == "/mutate") == [200, 200, 400, 400, 400, 405]

    # no credential anywhere
    text = noe.output()
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    for secret in (password, basic, KUBE_TOKEN):
        assert secret not in text


def test_text_format_is_one_line_per_record(tmp_path: Path) -> None:
    """``--log-format text``: ``time level logger msg key=value…``; still one line per record."""
    state = tmp_path / "state"
    noe = start_noe(tmp_path, ["--log-format", "text", "--workers", "1", "--state-dir", str(state)], state / "ca.crt")
    try:
        with noe.session() as s, s.post(noe.url + "/mutate", data=b"nope", timeout=10) as resp:
            assert resp.status_code == 400
        noe.proc.send_signal(signal.SIGTERM)
        noe.proc.wait(30)
    finally:
        noe.stop()
    lines = noe.output().splitlines()
    line = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+\+00:00 (debug|info|warning|error|critical) [\w.]+ \S")
    assert lines and all(line.match(text) for text in lines), [t for t in lines if not line.match(t)][:3]
    refused = [t for t in lines if " noe.app " in t]
    assert len(refused) == 1 and "reason=not_json" in refused[0] and "status=400" in refused[0]


def test_python_warnings_and_library_records_are_json_lines_too() -> None:
    """``warnings.warn`` (through the ``py.warnings`` logger) and a third-party logger use the same schema."""
    program = (
        "import logging, warnings\n"
        "from noe_web.logs import ADMISSION_UID, configure_logging\n"
        "configure_logging('INFO')\n"
        "ADMISSION_UID.set('uid-1')\n"
        "warnings.warn('a deprecated thing', DeprecationWarning, stacklevel=1)\n"
        "logging.getLogger('urllib3.connectionpool').warning('retrying %s', 'x')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["logger"], r["level"]) for r in records] == [
        ("py.warnings", "warning"),
        ("urllib3.connectionpool", "warning"),
    ]
    assert "a deprecated thing" in records[0]["msg"] and records[1]["msg"] == "retrying x"
    assert all(r["uid"] == "uid-1" and TIME.match(r["time"]) for r in records)
