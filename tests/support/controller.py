"""``noe controller`` against the stand-in cluster (tests/support/fake_cluster.py): started in-process
from parsed flags (the command's own ``start``), or as its own process (``spawn_controller``) where a
test or a benchmark needs to kill it or measure it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from noe_web.commands import build_parser
from noe_web.controller.command import ControllerConfig, Running, start
from noe_web.kube.config import discover
from tests.support.fake_cluster import FakeCluster
from tests.support.paths import ROOT

FAST = ["--lease-duration", "2s", "--renew-deadline", "1.5s", "--retry-period", "0.2s"]
"""Short leases, so a test sees leadership change within seconds."""


def start_controller(cluster: FakeCluster, kubeconfig_path: Path, token: str, *args: str) -> Running:
    """A controller of ``cluster`` authenticated with ``token``, with short leases and ``args`` added."""
    kubeconfig = cluster.api.write_kubeconfig(kubeconfig_path, token=token)
    ns = build_parser().parse_args(
        [
            "controller",
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-addr",
            "127.0.0.1:0",
            "--leader-election-namespace",
            "noe",
            "--insecure-registries",
            "127.0.0.1:*",
            "--negative-cache-ttl",
            "0",
            *FAST,
            *args,
        ]
    )
    config = ControllerConfig.from_args(ns)
    return start(config, discover(config.kubeconfig))


def spawn_controller(kubeconfig: Path, log: Path, *args: str, code: Path = ROOT) -> subprocess.Popen[bytes]:
    """``python -m noe_web controller`` through ``kubeconfig``, with short leases and ``args`` added, its
    output in ``log``; no ``NOE_*`` variable (nor ``KUBECONFIG``) of the caller's environment reaches it.
    ``code``: the checkout it runs from (a benchmark's "before" runs an older one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOE_") and k != "KUBECONFIG"}
    command = [sys.executable, "-m", "noe_web", "controller", "--kubeconfig", str(kubeconfig)]
    command += ["--metrics-addr", "", "--leader-election-namespace", "noe", *FAST, *args]
    with log.open("wb") as out:  # the child keeps its own descriptor
        env["PYTHONPATH"] = str(code)
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=code, env=env)


class Controllers:
    """Controllers of one stand-in cluster started by a test (each with its own kubeconfig), all stopped at
    its end: the body of a suite's ``controller`` fixture."""

    def __init__(self, cluster: FakeCluster, tmp_path: Path, token: str, *args: str) -> None:
        self.cluster, self.tmp_path, self.token, self.args = cluster, tmp_path, token, args
        self.started: list[Running] = []

    def __call__(self, *args: str) -> Running:
        path = self.tmp_path / f"kubeconfig-{len(self.started)}"
        running = start_controller(self.cluster, path, self.token, *self.args, *args)
        self.started.append(running)
        return running

    def stop(self) -> None:
        for running in self.started:
            running.stop()


def settle(cluster: FakeCluster, running: Running, seconds: float = 1.0) -> None:
    """Wait until the controller has synced, led, and gone idle for a while."""
    assert cluster.wait(running.controller.ready, 15), "caches never synced"
    assert cluster.wait(lambda: running.elector is None or running.elector.is_leader(), 15), "never became leader"
    end = time.monotonic() + 20
    quiet_since = time.monotonic()
    while time.monotonic() < end:
        if not running.controller.idle.is_set() or len(running.controller.queue):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= seconds:
            return
        time.sleep(0.05)
