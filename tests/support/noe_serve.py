"""``noe serve`` as a real subprocess for the end-to-end suites: start it, post reviews, read the patched pod."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import requests

from noe_core.testing import node, schedulable
from tests.support.images import PushedImage
from tests.support.paths import ROOT

NODES = [node(f"n-{arch}", arch) for arch in ("amd64", "arm64", "ppc64le", "s390x")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class NoeProcess:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    ca_file: Path
    out_path: Path
    err_path: Path
    handles: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def session(self) -> requests.Session:
        s = requests.Session()
        s.trust_env = False
        s.verify = str(self.ca_file)
        return s

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for handle in self.handles:
            handle.close()


def start_noe(
    workdir: Path,
    args: list[str],
    ca_file: Path | None,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    *,
    code: Path = ROOT,
) -> NoeProcess:
    """Start ``python -m noe_web serve`` on free 127.0.0.1 ports; retry if a port was taken meanwhile.

    ``env`` adds variables (``NOE_*`` ones included: the rest of the environment's are dropped); ``code``
    is the checkout it runs from (a benchmark's "before" runs an older one).
    """
    extra_env = dict(env or {})
    last = ""
    for attempt in range(3):
        port, metrics_port = free_port(), free_port()
        out_path, err_path = workdir / f"out-{attempt}.log", workdir / f"err-{attempt}.log"
        out, err = out_path.open("wb"), err_path.open("wb")
        # no KUBECONFIG either: serve honours it as kubectl does, and a test's cluster is the one it gives
        child_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_")) and k != "KUBECONFIG"
        }
        child_env["HOME"] = str(workdir)  # gunicorn writes nothing there, and neither do we
        child_env.pop("XDG_RUNTIME_DIR", None)
        child_env.update(extra_env)
        if code != ROOT:
            child_env["PYTHONPATH"] = str(code)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "noe_web",
                "serve",
                "--bind",
                f"127.0.0.1:{port}",
                "--metrics-addr",
                f"127.0.0.1:{metrics_port}",
                *args,
            ],
            stdout=out,
            stderr=err,
            cwd=code,
            env=child_env,
        )
        noe = NoeProcess(proc, port, metrics_port, ca_file or Path("/nonexistent"), out_path, err_path, [out, err])
        end = time.monotonic() + timeout
        while time.monotonic() < end and proc.poll() is None:
            if ca_file is None and noe.ca_file == Path("/nonexistent"):
                for line in out_path.read_text(errors="replace").splitlines():
                    if '"self-signed"' in line:
                        noe.ca_file = Path(json.loads(line)["ca_file"])
            if noe.ca_file.exists():
                try:
                    with noe.session() as s, s.get(noe.url + "/livez", timeout=2) as resp:
                        if resp.status_code == 200:
                            return noe
                except requests.RequestException:
                    pass
            time.sleep(0.1)
        last = noe.output()
        noe.stop()
        if "in use" not in last:
            break
    raise AssertionError(f"noe serve did not start:\n{last[-4000:]}")


def post_review(s: requests.Session, noe: NoeProcess, review: Any, timeout: float = 15) -> dict[str, Any]:
    with s.post(noe.url + "/mutate", json=review, timeout=timeout) as resp:
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
    assert body["response"]["uid"] == review["request"]["uid"]
    return body["response"]


def apply(review: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    obj = review["request"]["object"]
    if "patch" not in response:
        return obj
    result: dict[str, Any] = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    return result


def archs_allowed(obj: dict[str, Any]) -> set[str]:
    return {n["metadata"]["labels"]["kubernetes.io/arch"] for n in NODES if schedulable(obj, n)}


def linux_archs(image: PushedImage) -> set[str]:
    return {p.split("/")[1] for p in image.platforms if p.startswith("linux/")}


def uid() -> str:
    return str(uuid.uuid4())
