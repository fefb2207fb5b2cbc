"""noe_web.kube.config: which kubeconfig is read and how several merge — kubectl's rules, checked against kubectl.

Files are written here and read back; the last tests ask a real kubectl
(``kubectl config view --minify``) what it resolves for the same files and
compare. Reaching a server through the result is tested elsewhere
(tests/web/kube/test_client.py, tests/web/commands/test_kubectl.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from noe_core.errors import InvalidSettings
from noe_web.kube.config import ApiConfig, discover, find_kubeconfig, in_cluster_config, load_kubeconfig
from tests.support.kubectl import KUBECTLS, kubectl_path


def cluster(name: str, server: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "cluster": {"server": server, **extra}}


def user(name: str, token: str) -> dict[str, Any]:
    return {"name": name, "user": {"token": token}}


def context(name: str, cluster_name: str, user_name: str, namespace: str | None = None) -> dict[str, Any]:
    body = {"cluster": cluster_name, "user": user_name}
    if namespace:
        body["namespace"] = namespace
    return {"name": name, "context": body}


def write(path: Path, *, current: str | None = None, **sections: list[dict[str, Any]]) -> Path:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", **sections}
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    """Two files that overlap: both define cluster ``shared`` and user ``me``, only the second sets current-context."""
    first = write(
        tmp_path / "one" / "config",
        clusters=[cluster("shared", "https://first.example:6443"), cluster("only-first", "https://one.example")],
        users=[user("me", "first-token")],
        contexts=[context("one", "only-first", "me", "team-one")],
    )
    second = write(
        tmp_path / "two" / "config",
        current="two",
        clusters=[cluster("shared", "https://second.example:6443")],
        users=[user("me", "second-token"), user("robot", "robot-token")],
        contexts=[context("two", "shared", "robot"), context("one", "shared", "robot", "ignored")],
    )
    return first, second


def env(*paths: Path | str, home: Path | None = None) -> dict[str, str]:
    out = {"KUBECONFIG": os.pathsep.join(str(p) for p in paths)}
    if home is not None:
        out["HOME"] = str(home)
    return out


def test_the_first_file_to_define_a_name_wins_it_whole(two_files: tuple[Path, Path]) -> None:
    first, second = two_files
    merged = find_kubeconfig(None, env(first, second))
    assert merged is not None and merged.files == (first, second)
    # current-context only in the second file; its context names cluster `shared`, which the first file defines
    api = merged.api_config()
    assert (api.server, api.token, api.namespace) == ("https://first.example:6443", "robot-token", "default")
    assert api.source == f"kubeconfig {second} context two"
    # context `one` is in both: the first file's, whole (its namespace, its cluster, its user)
    api = merged.api_config("one")
    assert (api.server, api.token, api.namespace) == ("https://one.example", "first-token", "team-one")


def test_current_context_comes_from_the_first_file_that_sets_it(tmp_path: Path, two_files: tuple[Path, Path]) -> None:
    first, second = two_files
    third = write(tmp_path / "three", current="one")
    assert find_kubeconfig(None, env(first, third, second)).api_config().token == "first-token"  # type: ignore[union-attr]
    assert find_kubeconfig(None, env(first, second, third)).api_config().token == "robot-token"  # type: ignore[union-attr]


def test_missing_files_empty_entries_and_repeats_are_skipped(tmp_path: Path, two_files: tuple[Path, Path]) -> None:
    first, second = two_files
    empty = tmp_path / "empty"
    empty.write_text("")  # kubectl reads an empty file as an empty config
    listed = os.pathsep.join(["", str(tmp_path / "missing"), str(second), str(empty), "", str(second), str(first)])
    merged = find_kubeconfig(None, {"KUBECONFIG": listed})
    assert merged is not None and merged.files == (second, empty, first)
    assert merged.api_config("one").token == "robot-token"  # the second file comes first now


def test_kubeconfig_flag_is_read_alone_and_beats_the_variable(two_files: tuple[Path, Path]) -> None:
    first, second = two_files
    alone = find_kubeconfig(first, env(second))
    assert alone is not None and alone.files == (first,)
    with pytest.raises(InvalidSettings) as info:
        alone.api_config()  # the first file sets no current-context, and the second is not read
    assert str(info.value) == (f"--kubeconfig {first}: no current-context set; give --context NAME (contexts: one)")


def test_home_config_only_without_the_variable_and_only_when_asked(
    tmp_path: Path, two_files: tuple[Path, Path]
) -> None:
    _, second = two_files
    home = tmp_path / "home"
    write(
        home / ".kube" / "config",
        current="h",
        clusters=[cluster("c", "https://home.example")],
        users=[user("u", "home-token")],
        contexts=[context("h", "c", "u", "from-home")],
    )
    found = find_kubeconfig(None, {"HOME": str(home)})
    assert found is not None and found.api_config().namespace == "from-home"
    assert find_kubeconfig(None, {"HOME": str(home)}, home=False) is None  # serve, controller, certs
    assert find_kubeconfig(None, env(second, home=home)).api_config().token == "robot-token"  # type: ignore[union-attr]
    assert find_kubeconfig(None, {"HOME": str(tmp_path / "nobody")}) is None


def test_relative_paths_are_read_from_the_file_that_holds_them(tmp_path: Path) -> None:
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "ca.crt").write_text(ca)
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "token").write_text("from-a-file")
    clusters = write(
        tmp_path / "clusters" / "config",
        clusters=[cluster("c", "https://c.example", **{"certificate-authority": "ca.crt"})],
    )
    users = write(
        tmp_path / "users" / "config",
        current="ctx",
        users=[{"name": "u", "user": {"tokenFile": "token"}}],
        contexts=[context("ctx", "c", "u")],
    )
    api = find_kubeconfig(None, env(users, clusters)).api_config()  # type: ignore[union-attr]
    assert api.ca_pem == ca
    assert api.token_file == tmp_path / "users" / "token"


def test_the_context_namespace_and_the_pods_own(tmp_path: Path, two_files: tuple[Path, Path]) -> None:
    first, _ = two_files
    assert load_kubeconfig(first, "one").namespace == "team-one"
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster_config(pod, sa_dir=sa).namespace == "default"  # type: ignore[union-attr]
    (sa / "namespace").write_text("noe\n")
    assert in_cluster_config(pod, sa_dir=sa).namespace == "noe"  # type: ignore[union-attr]
    assert in_cluster_config({**pod, "POD_NAMESPACE": "elsewhere"}, sa_dir=sa).namespace == "elsewhere"  # type: ignore[union-attr]


def in_pod(tmp_path: Path) -> tuple[dict[str, str], Path]:
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text("pod-token")
    return {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", "HOME": str(tmp_path)}, sa


def test_a_kubeconfig_that_defines_nothing_gives_way_to_the_service_account(tmp_path: Path) -> None:
    environ, sa = in_pod(tmp_path)
    empty = tmp_path / "empty"
    empty.write_text("")
    for listed in (str(empty), str(tmp_path / "missing")):
        api = discover(None, {**environ, "KUBECONFIG": listed}, sa_dir=sa)
        assert api is not None and api.source == "in-cluster service account"


def test_discover_names_each_dead_end_in_one_line(tmp_path: Path, two_files: tuple[Path, Path]) -> None:
    first, second = two_files
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    nowhere = {"HOME": str(tmp_path)}
    cases: list[tuple[Path | None, Mapping[str, str], str | None, str]] = [
        (
            None,
            env(tmp_path / "a", tmp_path / "b"),
            None,
            f"no Kubernetes API: $KUBECONFIG ({tmp_path / 'a'}, {tmp_path / 'b'}): none of these files exists",
        ),
        (None, env(empty), None, f"no Kubernetes API: $KUBECONFIG ({empty}) defines no context, cluster or user"),
        (
            None,
            nowhere,
            "prod",
            "--context prod: no kubeconfig to find it in (give --kubeconfig FILE or set $KUBECONFIG)",
        ),
        (
            None,
            env(first, second),
            "prod",
            f"$KUBECONFIG ({first}, {second}): no context named 'prod' (contexts: one, two)",
        ),
        (empty, nowhere, None, f"--kubeconfig {empty}: no current-context set; give --context NAME (contexts: none)"),
    ]
    for explicit, environ, ctx, message in cases:
        with pytest.raises(InvalidSettings) as info:
            discover(explicit, environ, context=ctx, home=True)
        assert str(info.value) == message
    assert discover(None, nowhere, home=True) is None  # nothing configured: the command says what to give


def test_a_bad_file_in_the_list_is_named(tmp_path: Path, two_files: tuple[Path, Path]) -> None:
    first, _ = two_files
    bad = tmp_path / "bad"
    bad.write_text("contexts: {not: a list}\n")
    with pytest.raises(InvalidSettings) as info:
        find_kubeconfig(None, env(first, bad))
    assert str(info.value) == f"$KUBECONFIG file {bad}: contexts must be a list"


# ------------------------------------------------------------------ the same files, read by kubectl


def kubectl_view(which: str, environ: Mapping[str, str], context_name: str | None) -> dict[str, Any]:
    args = [str(kubectl_path(which)), "config", "view", "--minify", "--raw", "-o", "json"]
    if context_name:
        args += ["--context", context_name]
    proc = subprocess.run(
        args,
        env={"PATH": os.environ.get("PATH", ""), **environ},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    view: dict[str, Any] = json.loads(proc.stdout)
    return view


def resolved_by_kubectl(view: Mapping[str, Any]) -> tuple[str, str, str]:
    ctx = view["contexts"][0]["context"]
    return (
        view["clusters"][0]["cluster"]["server"],
        view["users"][0]["user"]["token"],
        ctx.get("namespace") or "default",
    )


def resolved_by_noe(api: ApiConfig) -> tuple[str, str, str]:
    return api.server, api.token or "", api.namespace


@pytest.mark.kubectl
@pytest.mark.parametrize("which", KUBECTLS)
def test_kubectl_resolves_the_same_context_server_user_and_namespace(
    which: str, tmp_path: Path, two_files: tuple[Path, Path]
) -> None:
    first, second = two_files
    third = write(tmp_path / "three", current="one")
    missing = tmp_path / "missing"
    for paths in ((first, second), (second, first), (missing, first, third, second), (first, third, second)):
        environ = env(*paths, home=tmp_path)
        merged = find_kubeconfig(None, environ)
        assert merged is not None
        for ctx in (None, "one", "two"):
            expected = resolved_by_kubectl(kubectl_view(which, environ, ctx))
            assert resolved_by_noe(merged.api_config(ctx)) == expected, (paths, ctx)
