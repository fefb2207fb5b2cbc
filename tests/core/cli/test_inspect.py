"""``noe inspect`` against the real registry in every auth mode, checked against skopeo."""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from noe_core.cli.inspect import configure_inspect_parser, run_inspect
from noe_core.cli.parser import NoeArgumentParser
from noe_core.cli.registry_options import registry_settings_from_args
from noe_core.image.manifest import sha256_digest
from tests.support.images import SHAPES, PushedImage
from tests.support.paths import ROOT
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.registry


def inspect(*argv: str) -> tuple[int, str, str]:
    """Parse as ``noe inspect`` does (usage errors included) and run; (status, stdout, stderr)."""
    parser = NoeArgumentParser(prog="noe inspect")
    configure_inspect_parser(parser)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    status = run_inspect(ns, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def skopeo_raw(reg: RegistryServer, reference: str, creds: tuple[str, str] | None = None) -> bytes:
    cmd = ["skopeo", "inspect", "--raw", "--retry-times=0"]
    if reg.cert_dir:
        cmd += ["--cert-dir", str(reg.cert_dir)]
    else:
        cmd += ["--tls-verify=false"]
    if creds:
        cmd += ["--creds", f"{creds[0]}:{creds[1]}"]
    return subprocess.run([*cmd, f"docker://{reference}"], check=True, capture_output=True, timeout=60).stdout


def docker_config(tmp_path: Path, host: str, creds: tuple[str, str]) -> Path:
    path = tmp_path / "config.json"
    auth = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path


def check_against_skopeo(
    reg: RegistryServer, img: PushedImage, doc: dict[str, object], creds: tuple[str, str] | None
) -> None:
    raw = skopeo_raw(reg, img.reference, creds)
    assert doc["digest"] == sha256_digest(raw) == img.digest
    assert doc["reference"] == img.reference
    assert doc["mediaType"] == img.media_type
    platforms = doc["platforms"]
    if img.artifact_type:
        assert doc["artifactType"] == img.artifact_type and platforms == []
        return
    assert "artifactType" not in doc
    assert isinstance(platforms, list) and platforms
    manifest = json.loads(raw)
    if "manifests" in manifest:
        listed = {m["digest"] for m in manifest["manifests"]}
        for nested in img.nested.values():
            listed |= {m["digest"] for m in json.loads(skopeo_raw(reg, nested.by_digest, creds))["manifests"]}
        assert {p["digest"] for p in platforms} <= listed
        assert not {p["digest"] for p in platforms} & set(img.deleted)
        assert not {p["digest"] for p in platforms} & set(img.attestations)
    else:
        config = json.loads(
            subprocess.run(
                [
                    "skopeo",
                    "inspect",
                    "--config",
                    "--retry-times=0",
                    *(["--cert-dir", str(reg.cert_dir)] if reg.cert_dir else ["--tls-verify=false"]),
                    *(["--creds", f"{creds[0]}:{creds[1]}"] if creds else []),
                    f"docker://{img.reference}",
                ],
                check=True,
                capture_output=True,
                timeout=60,
            ).stdout
        )
        assert platforms == [
            {
                k: v
                for k, v in {
                    "os": config["os"],
                    "architecture": config["architecture"],
                    "variant": config.get("variant"),
                    "digest": img.digest,
                }.items()
                if v
            }
        ]
    for p in platforms:
        assert set(p) <= {"os", "architecture", "variant", "os.version", "digest"}
        assert "variant" not in p or p["variant"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_anonymous(shape: str, registry: RegistryServer, pushed_images: dict[str, PushedImage]) -> None:
    img = pushed_images[shape]
    status, out, err = inspect("--json", img.reference, "--insecure-registries", "127.0.0.1:*")
    assert status == 0, err
    check_against_skopeo(registry, img, json.loads(out), None)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_basic_auth_with_docker_config(
    shape: str,
    tmp_path: Path,
    basic_registry: RegistryServer,
    basic_pushed_images: dict[str, PushedImage],
    basic_credentials: tuple[str, str],
) -> None:
    img = basic_pushed_images[shape]
    config = docker_config(tmp_path, basic_registry.host, basic_credentials)
    status, out, err = inspect(
        "--json",
        img.reference,
        "--insecure-registries",
        "127.0.0.1:*",
        "--docker-config",
        str(tmp_path / "missing.json"),
        "--docker-config",
        str(config),
    )
    assert status == 0, err
    check_against_skopeo(basic_registry, img, json.loads(out), basic_credentials)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_token_auth_private_and_public(  # noqa: PLR0917 - pytest fixtures
    shape: str,
    tmp_path: Path,
    token_registry: RegistryServer,
    token_pushed_images: dict[str, PushedImage],
    token_public_images: dict[str, PushedImage],
    token_credentials: tuple[str, str],
) -> None:
    config = docker_config(tmp_path, token_registry.host, token_credentials)
    private = token_pushed_images[shape]
    status, out, err = inspect(
        "--json", private.reference, "--insecure-registries", "127.0.0.1:*", "--docker-config", str(config)
    )
    assert status == 0, err
    check_against_skopeo(token_registry, private, json.loads(out), token_credentials)
    public = token_public_images[shape]
    status, out, err = inspect("--json", public.reference, "--insecure-registries", "127.0.0.1:*")
    assert status == 0, err
    check_against_skopeo(token_registry, public, json.loads(out), None)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_tls_with_registry_ca_file(
    shape: str, tls_registry: RegistryServer, tls_pushed_images: dict[str, PushedImage]
) -> None:
    img = tls_pushed_images[shape]
    status, out, err = inspect("--json", img.reference, "--registry-ca-file", str(tls_registry.ca_file))
    assert status == 0, err
    check_against_skopeo(tls_registry, img, json.loads(out), None)


def test_human_output(pushed_images: dict[str, PushedImage]) -> None:
    img = pushed_images["windows-index"]
    status, out, _ = inspect(img.reference, "--insecure-registries", "127.0.0.1:*")
    assert status == 0
    assert f"Digest:     {img.digest}" in out
    assert f"Reference:  {img.reference}" in out
    assert "windows(10.0.17763.5458)/amd64" in out
    for digest in img.children.values():
        assert digest in out


def test_human_output_of_levels_and_artifacts(pushed_images: dict[str, PushedImage]) -> None:
    status, out, _ = inspect(pushed_images["amd64-levels-index"].reference, "--insecure-registries", "127.0.0.1:*")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[4:]] == [
        "PLATFORM",
        "linux/amd64",
        "linux/amd64/v3",
        "linux/arm64/v8",
    ]
    status, out, _ = inspect(pushed_images["artifact"].reference, "--insecure-registries", "127.0.0.1:*")
    assert status == 0
    assert "Artifact:   application/vnd.noe.test.model.v1 (not a container image" in out and "PLATFORM" not in out


def test_auth_failure_is_one_line_without_secret(
    token_registry: RegistryServer,
    token_pushed_images: dict[str, PushedImage],
    tmp_path: Path,
    token_credentials: tuple[str, str],
) -> None:
    wrong = (token_credentials[0], "not-" + token_credentials[1])
    config = docker_config(tmp_path, token_registry.host, wrong)
    img = token_pushed_images["oci-single-amd64"]
    status, out, err = inspect(img.reference, "--insecure-registries", "127.0.0.1:*", "--docker-config", str(config))
    assert status == 1
    assert out == ""
    assert err.count("\n") == 1
    assert token_registry.host in err and "401" in err
    assert wrong[1] not in err and token_credentials[1] not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["Bad Image"],
        ["x/y:z", "--cache-ttl", "soon"],
        ["x/y:z", "--timeout", "-1"],
        ["x/y:z", "--registry-proxies", "nonsense"],
    ],
)
def test_bad_input_exits_2(argv: list[str]) -> None:
    status, out, err = inspect(*argv)
    assert status == 2
    assert out == "" and err.startswith("noe inspect: ")


@pytest.mark.parametrize(
    ("text", "seconds"), [("3600", 3600.0), ("1h30m", 5400.0), (".5h", 1800.0), ("1500us", 0.0015), ("+2m", 120.0)]
)
def test_cache_ttl_takes_seconds_or_any_go_duration(text: str, seconds: float) -> None:
    parser = argparse.ArgumentParser(prog="noe inspect")
    configure_inspect_parser(parser)
    ns = parser.parse_args(["x/y:z", "--cache-ttl", text, "--negative-cache-ttl", text])
    settings = registry_settings_from_args(ns)
    assert settings.cache_ttl == settings.negative_cache_ttl == pytest.approx(seconds)


def test_module_entry_point(pushed_images: dict[str, PushedImage]) -> None:
    img = pushed_images["docker-single-arm64"]
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-m",
            "noe_core.cli.inspect",
            "--json",
            img.reference,
            "-insecure-registries",
            "127.0.0.1:*",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["platforms"] == [{"os": "linux", "architecture": "arm64", "variant": "v8", "digest": img.digest}]


def test_declared_platforms_policies_and_learned_entries_answer_as_a_pods_decision_reads_them(tmp_path: Path) -> None:
    """Offline: --image-platforms, a matching policy's imagePlatforms, and --learned (the ConfigMap), as the
    webhook would read the image for a pod of that namespace with those labels; nothing asks a registry."""
    digest = "sha256:" + "e" * 64
    declared = tmp_path / "platforms.yaml"
    declared.write_text(json.dumps({"corp/app:1": {"platforms": ["linux/amd64", "linux/arm64"], "digest": digest}}))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "arch.noe.adevinta.com/v1alpha1",
                "kind": "PlacementPolicy",
                "metadata": {"name": "team", "namespace": "team-a"},
                "spec": {
                    "podSelector": {"matchLabels": {"app": "web"}},
                    "imagePlatforms": [{"image": "corp/app:1", "platforms": ["linux/s390x"]}],
                },
            }
        )
    )
    learned = tmp_path / "learned.yaml"
    learned.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "noe-learned-platforms", "namespace": "noe"},
                "data": {
                    "sha256-" + "e" * 64: json.dumps({"architectures": ["arm64"], "evidence": ["a/b"], "time": "t"})
                },
            }
        )
    )
    status, out, err = inspect("--json", "corp/app:1", "--image-platforms", str(declared))
    assert status == 0, err
    doc = json.loads(out)
    assert doc["source"] == "declared" and [p["architecture"] for p in doc["platforms"]] == ["amd64", "arm64"]
    status, out, err = inspect("--json", "corp/app:1", "--image-platforms", str(declared), "--learned", str(learned))
    assert status == 0, err
    doc = json.loads(out)
    assert doc["source"] == "learned" and [p["architecture"] for p in doc["platforms"]] == ["amd64"]
    assert any("arm64 left out" in w for w in doc["warnings"])
    args = ("--json", "corp/app:1", "--image-platforms", str(declared), "--policy", str(policy), "-n", "team-a")
    status, out, err = inspect(*args, "-l", "app=web")
    assert status == 0, err
    assert [p["architecture"] for p in json.loads(out)["platforms"]] == ["s390x"]  # the matching policy's answer
    status, out, err = inspect(*args, "-l", "app=db")
    assert [p["architecture"] for p in json.loads(out)["platforms"]] == ["amd64", "arm64"]  # not matched
