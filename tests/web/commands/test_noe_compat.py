"""The Go Noe's command lines run ``noe serve`` unchanged.

The end-to-end case runs what the Go Noe's chart (adevinta/noe
charts/noe/templates/webhook.yaml, before its flags got their dashes) gives the
container — ``noe`` with the single argument ``registry-proxies=docker.io=…``
in a working directory holding the serving ``tls.crt``/``tls.key`` — and checks
that it serves TLS with those certificates and that the proxy took effect: an
image written as a Docker Hub name is read from the mirror (a real registry on
127.0.0.1), so the pod is placed on the one architecture the mirror's image has.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from noe_core.cli.options import go_style_argv
from noe_core.testing import admission_review, pod
from noe_web.commands import build_parser
from noe_web.commands.noe_compat import apply_compat_flags, noe_style_argv
from tests.support.certs import make_ca
from tests.support.images import push_docker_single
from tests.support.noe_serve import apply, archs_allowed, free_port
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer


def read(argv: list[str], cwd: Path) -> tuple[object, list[str]]:
    """``argv`` parsed as the ``noe`` command parses it, and the warnings it would log."""
    parser = build_parser()
    args, notes = noe_style_argv(go_style_argv(argv, parser), parser, cwd=cwd, environ={})
    ns = parser.parse_args(args)
    ns.noe_style_notes = notes
    return ns, apply_compat_flags(ns)


@pytest.mark.registry
def test_noe_charts_container_arguments_serve_tls_from_the_workdir_through_the_proxy(
    tmp_path: Path, registry: RegistryServer
) -> None:
    image = push_docker_single(registry, "library/noe-compat-s390x", "1", arch="s390x")
    ca = make_ca("noe chart CA", tmp_path / "ca")
    pair = ca.issue(["127.0.0.1", "localhost"], name="serving")
    workdir = tmp_path / "workdir"  # the chart's workingDir, where its certificate Secret is mounted
    workdir.mkdir()
    (workdir / "tls.crt").write_bytes(pair.cert_file.read_bytes())
    (workdir / "tls.key").write_bytes(pair.key_file.read_bytes())
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOE_", "PROMETHEUS_"))}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "HOME": str(tmp_path),
            # loopback ports and a plain-HTTP mirror for the test; the arguments are the chart's own
            "NOE_BIND": f"127.0.0.1:{port}",
            "NOE_METRICS_ADDR": f"127.0.0.1:{metrics_port}",
            "NOE_INSECURE_REGISTRIES": "127.0.0.1:*",
            "NOE_WORKERS": "1",
            "NOE_STATE_DIR": str(tmp_path / "state"),
        }
    )
    out_path = tmp_path / "out.log"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "noe_web", f"registry-proxies=docker.io={registry.host}"],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        session = requests.Session()
        session.trust_env = False
        session.verify = str(ca.ca_file)
        url = f"https://127.0.0.1:{port}"
        end = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < end, out_path.read_text()[-3000:]
            try:
                if session.get(url + "/livez", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        context = ssl.create_default_context(cafile=str(ca.ca_file))
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            served = tls.getpeercert(binary_form=True)
        assert served == ssl.PEM_cert_to_DER_cert((workdir / "tls.crt").read_text())

        review = admission_review(pod(["noe-compat-s390x:1"], namespace="compat"), uid=str(uuid.uuid4()))
        with session.post(url + "/mutate", json=review, timeout=30) as resp:
            assert resp.status_code == 200, resp.text
            response = resp.json()["response"]
        assert "warnings" not in response, response.get("warnings")
        assert archs_allowed(apply(review, response)) == {"s390x"}, image.platforms
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    lines = [json.loads(line) for line in out_path.read_text().splitlines()]
    warnings = [r["msg"] for r in lines if r["level"] == "warning" and "registry-proxies" in r["msg"]]
    assert len(warnings) == 1 and "read as --registry-proxies" in warnings[0], warnings
    startup = next(r for r in lines if r.get("event") == "startup")
    assert startup["tls"]["cert_file"] == str(workdir.resolve() / "tls.crt")


def test_todays_chart_arguments_mean_serve(tmp_path: Path) -> None:
    """The Go Noe's current chart: Go-style flags, ``--leader-elect=true``, no subcommand."""
    provider = tmp_path / "provider.yaml"
    provider.write_text("{}")
    (tmp_path / "tls.crt").write_text("")
    (tmp_path / "tls.key").write_text("")
    ns, notes = read(
        [
            "--registry-proxies=docker.io=proxy.corp",
            "--cluster-schedulable-archs=amd64,arm64",
            "--leader-elect=true",
            f"--image-credential-provider-bin-dir={tmp_path}",
            f"--image-credential-provider-config={provider}",
            "--private-registries=*.corp",
        ],
        tmp_path,
    )
    assert ns.command == "serve"  # type: ignore[attr-defined]
    assert ns.cert_dir == tmp_path.resolve()  # type: ignore[attr-defined]  # controller-runtime's "./"
    assert ns.cluster_schedulable_archs == ("amd64", "arm64")  # type: ignore[attr-defined]
    assert notes == [
        "--leader-elect accepted for the Go Noe's command line and ignored: "
        "noe elects no leader: every replica answers admissions"
    ]


def test_controller_runtime_flags_are_mapped_or_accepted_with_one_warning_each(tmp_path: Path) -> None:
    ns, notes = read(
        [
            "-metrics-bind-address=:9090",
            "--health-probe-bind-address=:8081",
            "--zap-log-level=debug",
            "--zap-encoder=console",
            "--zap-devel",
            "-leader-elect",
        ],
        tmp_path,
    )
    assert ns.metrics_addr == ("", 9090)  # type: ignore[attr-defined]
    assert ns.log_level == "DEBUG" and ns.log_format == "text"  # type: ignore[attr-defined]
    assert ns.cert_dir is None  # type: ignore[attr-defined]  # no tls.crt here: the self-signed default
    assert sorted(note.split()[0] for note in notes) == ["--health-probe-bind-address", "--leader-elect", "--zap-devel"]
    assert all("\n" not in note for note in notes)
    ns, notes = read(["--metrics-addr=:8080", "--metrics-bind-address=:9090"], tmp_path)
    assert ns.metrics_addr == ("", 8080) and len(notes) == 1  # type: ignore[attr-defined]


def test_named_subcommands_and_mistakes_are_left_alone(tmp_path: Path) -> None:
    parser = build_parser()
    for argv in (["mutate", "registry-proxies=x=y"], ["bogus"], ["--version"], ["-h"]):
        assert noe_style_argv(argv, parser, cwd=tmp_path, environ={}) == (argv, [])
    bogus = subprocess.run(
        [sys.executable, "-m", "noe_web", "bogus"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert bogus.returncode == 2 and bogus.stderr.startswith("noe: argument COMMAND: invalid choice: 'bogus'")
    # a bare word that names no serve flag stays a (refused) argument
    args, notes = noe_style_argv(["--workers=1", "nonsense=1"], parser, cwd=tmp_path, environ={})
    assert args == ["serve", "--workers=1", "nonsense=1"] and notes == []
    # a TLS flag or variable given: the working directory's files are not looked at
    (tmp_path / "tls.crt").write_text("")
    (tmp_path / "tls.key").write_text("")
    assert noe_style_argv([], parser, cwd=tmp_path, environ={"NOE_CERT_DIR": "/x"}) == (["serve"], [])
    assert noe_style_argv([], parser, cwd=tmp_path, environ={}) == (["serve", f"--cert-dir={tmp_path.resolve()}"], [])
