"""Real kubectl binaries, and ``kubectl-noe`` put where kubectl's plugin mechanism finds it.

Two kubectls run the plugin tests: the one on ``PATH`` (this machine's
``/usr/bin/kubectl``; Debian's ``kubernetes-client`` where there is none, installed
by ``tests/support/system_deps.py``) and kubectl 1.35 from the helm wheel of the
``test`` extra (:func:`tests.support.helm.kubectl_binary`). A missing one is an
error that says how to install it, never a skip.

:func:`install_plugin` writes an executable ``kubectl-noe`` into a directory: a
shell script that runs this checkout's ``noe_web.commands.kubectl`` with the
test's interpreter, as the console script pip installs would. :func:`run_kubectl`
runs a kubectl with that directory first on ``PATH``, a scratch ``HOME`` (no
``~/.kube/config`` unless the test writes one) and no stray ``KUBECONFIG`` or
``NOE_*`` variable.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.helm import kubectl_binary
from tests.support.paths import ROOT

__all__ = ["KUBECTLS", "install_plugin", "kubectl_path", "run_kubectl"]

KUBECTLS = ("path", "wheel")
"""The kubectls a plugin test runs through: the one on PATH and the helm wheel's 1.35."""


def kubectl_path(which: str) -> Path:
    """The kubectl named ``which`` (one of :data:`KUBECTLS`)."""
    if which == "wheel":
        return kubectl_binary()
    found = shutil.which("kubectl") or shutil.which("kubectl", path="/usr/bin")
    if found is None:
        raise AssertionError(
            "the plugin tests run the kubectl on PATH: install Debian's kubernetes-client "
            "(python -m tests.support.system_deps)"
        )
    return Path(found)


def install_plugin(directory: Path) -> Path:
    """An executable ``kubectl-noe`` in ``directory`` that runs this checkout's CLI."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "kubectl-noe"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH={shlex.quote(str(ROOT))} exec {shlex.quote(sys.executable)} -m noe_web.commands.kubectl "$@"\n'
    )
    script.chmod(0o755)
    return script


def run_kubectl(
    kubectl: Path,
    args: Sequence[str],
    *,
    plugins: Path,
    home: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``kubectl ARGS`` with ``plugins`` first on PATH; ``env`` adds variables (``KUBECONFIG``…).

    Directories of PATH that hold another ``kubectl-noe`` (the test environment's own install, as tox puts its
    ``bin`` first) are left out, so kubectl finds exactly the plugin under test and warns of no shadowing.
    """
    base = {name: value for name, value in os.environ.items() if name != "KUBECONFIG" and not name.startswith("NOE_")}
    inherited = [
        d for d in base.get("PATH", "/usr/bin:/bin").split(os.pathsep) if not (Path(d) / "kubectl-noe").exists()
    ]
    base.update(HOME=str(home), PATH=os.pathsep.join([str(plugins), *inherited]))
    base.update(env or {})
    return subprocess.run(
        [str(kubectl), *args], cwd=cwd, env=base, capture_output=True, text=True, timeout=timeout, check=False
    )
