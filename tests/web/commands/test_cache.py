"""``--cache-url`` on every command that takes it, and ``noe cache`` reading the replicas' Redis.

A malformed URL, a missing key or a TLS CA without TLS stops the command with one line and
exit status 2, and no message, usage errors included, ever shows the Redis password.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noe_core.registry.cache.redis import RedisCache, RedisLimits
from noe_core.registry.cache.url import parse_cache_url
from tests.support.paths import ROOT
from tests.support.redis_server import RedisServer

SECRET = "pw-" + "9f8e7d6c5b4a"
COMMANDS = {
    "serve": ["serve", "--state-dir", "{tmp}/state"],
    "controller": ["controller", "--kubeconfig", "{tmp}/kubeconfig"],
    "report": ["report", "-f", "{tmp}/pods.json"],
    "cache": ["cache", "stats", "--state-dir", "{tmp}/state"],
}


def noe(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    child = {k: v for k, v in os.environ.items() if not k.startswith("NOE_")}
    child["HOME"] = str(tmp)
    child.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "noe_web", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=child,
        check=False,
    )


def command(name: str, tmp: Path) -> list[str]:
    (tmp / "state").mkdir(exist_ok=True)
    (tmp / "pods.json").write_text('{"kind": "List", "items": []}')
    (tmp / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    return [part.format(tmp=tmp) for part in COMMANDS[name]]


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("name", "url"),
    list(
        zip(
            sorted(COMMANDS),
            [
                f"redis://:{SECRET}@cache:99999/0",
                f"redis://:{SECRET}@cache/17",
                f"http://:{SECRET}@cache:6379",
                f"redis://:{SECRET}@ca che:6379",
            ],
            strict=True,
        )
    ),
)
def test_a_malformed_url_is_one_line_that_never_shows_the_password(tmp_path: Path, name: str, url: str) -> None:
    line = one_line(noe(tmp_path, *command(name, tmp_path), env={"NOE_CACHE_URL": url}))
    assert "NOE_CACHE_URL=" in line and "--cache-url" in line
    line = one_line(noe(tmp_path, *command(name, tmp_path), "--cache-url", url))
    assert "--cache-url" in line and ":***@" in line


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_url_without_a_shared_key_or_a_ca_without_tls_is_one_line(tmp_path: Path, name: str) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:1/0"
    line = one_line(noe(tmp_path, *command(name, tmp_path), env={"NOE_CACHE_URL": url}))
    assert "--cache-key-file" in line
    short = tmp_path / "short-key"
    short.write_text("too short")
    line = one_line(noe(tmp_path, *command(name, tmp_path), "--cache-key-file", str(short), env={"NOE_CACHE_URL": url}))
    assert "at least 32" in line
    key = tmp_path / "key"
    key.write_text("k" * 40)
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    args = [*command(name, tmp_path), "--cache-key-file", str(key), "--cache-ca-file", str(ca)]
    line = one_line(noe(tmp_path, *args, env={"NOE_CACHE_URL": url}))
    assert "rediss://" in line
    line = one_line(noe(tmp_path, *command(name, tmp_path), "--cache-key-file", str(key)))
    assert "needs --cache-url" in line


def test_serve_refuses_a_cache_timeout_that_leaves_no_time_for_the_registry(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("k" * 40)
    args = [*command("serve", tmp_path), "--cache-key-file", str(key), "--admission-deadline", "0.4"]
    line = one_line(noe(tmp_path, *args, "--cache-timeout", "0.25", env={"NOE_CACHE_URL": f"redis://:{SECRET}@h:1"}))
    assert "--cache-timeout" in line and "--admission-deadline" in line


@pytest.mark.redis
def test_noe_cache_lists_stats_and_purges_the_shared_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    key = tmp_path / "key"
    key.write_text("k" * 40)
    level = RedisCache(parse_cache_url(redis_server.url), key=b"k" * 40, limits=RedisLimits(10, 10, 60), timeout=1.0)
    level.put_content("r.example/team/app", "sha256:d", "index", '{"v":2,"platforms":[["linux","arm64","","",[],""]]}')
    level.put_tag("r.example/team/app", "v1", "sha256:d")
    level.close()
    env = {"NOE_CACHE_URL": redis_server.url}
    flags = ["--cache-key-file", str(key)]
    listed = noe(tmp_path, "cache", "list", "-o", "json", *flags, env=env)
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)
    assert (entry["image"], entry["tags"], entry["platforms"]) == ("r.example/team/app", ["v1"], ["linux/arm64"])
    stats = noe(tmp_path, "cache", "stats", *flags, env=env)
    assert stats.returncode == 0 and "images 1\ntags 1\n" in stats.stdout
    assert redis_server.password not in stats.stdout + stats.stderr and "url redis://:***@127.0.0.1:" in stats.stdout
    purged = noe(tmp_path, "cache", "purge", "r.example/team/app:v1", *flags, env=env)
    assert purged.returncode == 0 and purged.stdout.strip() == "purged 2 entries"
    assert json.loads(noe(tmp_path, "cache", "list", "-o", "json", *flags, env=env).stdout) == []

    redis_server.kill()
    gone = noe(tmp_path, "cache", "stats", *flags, env=env)
    assert gone.returncode == 1 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr
    assert redis_server.password not in gone.stderr and "does not answer" in gone.stderr
