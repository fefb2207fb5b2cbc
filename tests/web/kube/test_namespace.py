"""noe's own namespace: the service-account mount's, else the caller's default."""

from __future__ import annotations

from pathlib import Path

from noe_web.kube.namespace import NAMESPACE_FILE, own_namespace


def test_the_mounted_namespace_is_read(tmp_path: Path) -> None:
    path = tmp_path / "namespace"
    path.write_text("noe-system\n")
    assert own_namespace(path) == "noe-system"
    assert own_namespace(path, default="") == "noe-system"


def test_outside_a_pod_the_default(tmp_path: Path) -> None:
    assert own_namespace(tmp_path / "missing") == "default"
    assert own_namespace(tmp_path / "missing", default="") == ""
    (tmp_path / "empty").write_text("  \n")
    assert own_namespace(tmp_path / "empty") == "default"


def test_the_mount_is_the_service_accounts() -> None:
    assert Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace") == NAMESPACE_FILE
