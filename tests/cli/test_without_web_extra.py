"""The ``noe`` command without the web extra: mutate keeps working, serve/certs say what to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

# Run noe with the web extra's modules made unimportable, as on `pip install noe-webhook` without [web].
WITHOUT_WEB = """
import sys
for name in ("flask", "gunicorn", "prometheus_client", "cryptography"):
    sys.modules[name] = None
from noe_web.commands import main
sys.exit(main(sys.argv[1:]))
"""


def noe_without_web(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_WEB, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_mutate_works_without_the_web_extra() -> None:
    proc = noe_without_web("mutate", "-f", "examples/pod.yaml", "--platforms", "examples/platforms.json", "--patch")
    assert proc.returncode == 0, proc.stderr
    assert "/spec/affinity" in proc.stdout


def test_serve_and_certs_name_the_missing_extra(tmp_path: Path) -> None:
    serve = (
        "serve",
        "--image-platforms",
        "examples/platforms.json",
        "--bind",
        "127.0.0.1:0",
        "--metrics-addr",
        "",
        "--state-dir",
        str(tmp_path),
    )
    for args in (serve, ("certs",)):
        proc = noe_without_web(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "pip install 'noe-webhook[web]'" in proc.stderr
        assert "Traceback" not in proc.stderr
