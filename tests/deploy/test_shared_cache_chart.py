"""The chart's ``cache.redis``: the Secret, what the webhook and the controller get, and the chart's own Valkey.

Rendered with the real helm and validated against the Kubernetes schemas; the Valkey
configuration and the URL the chart generates are tried on Debian's redis-server (Valkey's
configuration language is Redis'), through noe's own Redis level.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from noe_core.registry.cache.redis import RedisCache, RedisLimits
from noe_core.registry.cache.url import parse_cache_url
from noe_web.commands import build_parser
from tests.support.chart import CHART, KUBE_VERSIONS, NAMESPACE, RELEASE, find, flag_values, one, validate
from tests.support.helm import run_helm
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.deploy

DEPLOYED = {"cache": {"redis": {"deploy": True}}, "controller": {"enabled": True}, "networkPolicy": {"enabled": True}}


def render(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    out = run_helm(["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(path)]).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def pod(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def secret_data(docs: list[dict[str, Any]]) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in one(docs, "Secret", "noe-cache")["data"].items()}


def test_off_by_default(tmp_path: Path) -> None:
    docs = render({}, tmp_path)
    assert not find(docs, "Secret", "noe-cache") and not find(docs, "Deployment", "noe-valkey")
    container = pod(docs, "noe")["containers"][0]
    assert not [a for a in container["args"] if a.startswith("--cache-") and not a.startswith("--cache-dir")]
    assert "NOE_CACHE_URL" not in {e["name"] for e in container["env"]}


def test_the_webhook_and_the_controller_read_the_url_and_key_from_one_secret(tmp_path: Path) -> None:
    docs = render(DEPLOYED, tmp_path)
    for doc in docs:
        validate(doc, KUBE_VERSIONS[-1])
    data = secret_data(docs)
    url = parse_cache_url(data["url"].decode())
    assert (url.host, url.port, url.db) == ("noe-valkey.noe-system.svc", 6379, 0)
    assert url.password == data["valkey-password"].decode() and len(url.password) >= 32
    assert len(data["fingerprint-key"]) >= 32
    for name in ("noe", "noe-controller"):
        spec = pod(docs, name)
        container = spec["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        assert env["NOE_CACHE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "noe-cache", "key": "url"}
        assert not [a for a in container["args"] if url.password in a or a.startswith("--cache-url")]
        [key_file] = flag_values(container["args"], "--cache-key-file")
        mount = next(m for m in container["volumeMounts"] if key_file.startswith(m["mountPath"] + "/"))
        volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
        assert volume["secret"] == {
            "secretName": "noe-cache",
            "items": [{"key": "fingerprint-key", "path": key_file.rsplit("/", 1)[1]}],
        }
        ns = build_parser().parse_args(container["args"])
        assert ns.cache_timeout == 0.25
    service = one(docs, "Service", "noe-valkey")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "cache"
    assert [p["port"] for p in service["spec"]["ports"]] == [6379]
    valkey = pod(docs, "noe-valkey")
    assert valkey["containers"][0]["image"].startswith("docker.io/valkey/valkey:")
    assert all("persistentVolumeClaim" not in v for v in valkey["volumes"])  # no persistence by default
    webhook_policy = one(docs, "NetworkPolicy", "noe")
    to_cache = [r for r in webhook_policy["spec"]["egress"] if any("podSelector" in t for t in r.get("to", []))]
    assert to_cache and to_cache[0]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "cache"
    cache_policy = one(docs, "NetworkPolicy", "noe-valkey")
    sources = {
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
        for p in cache_policy["spec"]["ingress"][0]["from"]
    }
    assert sources == {"webhook", "controller"}


def test_an_existing_secret_is_used_and_none_is_rendered(tmp_path: Path) -> None:
    docs = render({"cache": {"redis": {"existingSecret": "corp-redis"}}, "networkPolicy": {"enabled": True}}, tmp_path)
    assert not find(docs, "Secret", "noe-cache")
    env = {e["name"]: e for e in pod(docs, "noe")["containers"][0]["env"]}
    assert env["NOE_CACHE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "corp-redis", "key": "url"}
    egress = one(docs, "NetworkPolicy", "noe")["spec"]["egress"]
    assert any(r.get("ports") == [{"port": 6379, "protocol": "TCP"}] for r in egress)


def test_a_given_url_goes_to_the_secret_never_to_the_arguments(tmp_path: Path) -> None:
    url = "rediss://:corp-pw@redis.corp:6380/2"
    docs = render({"cache": {"redis": {"url": url, "caBundle": "PEM"}}}, tmp_path)
    assert secret_data(docs)["url"].decode() == url
    args = pod(docs, "noe")["containers"][0]["args"]
    assert not [a for a in args if "corp-pw" in a]
    assert flag_values(args, "--cache-ca-file") == ["/etc/noe/config/cache-ca.crt"]
    configmap = one(docs, "ConfigMap", "noe-config")
    assert configmap["data"]["cache-ca.crt"].strip() == "PEM"


@pytest.mark.redis
def test_the_charts_valkey_configuration_and_url_work_on_a_real_server(tmp_path: Path) -> None:
    docs = render(DEPLOYED, tmp_path)
    data = secret_data(docs)
    mounts = {m["name"]: m["mountPath"] for m in pod(docs, "noe-valkey")["containers"][0]["volumeMounts"]}
    text = data["valkey.conf"].decode()
    assert f"dir {mounts['data']}\n" in text  # the pod's emptyDir; here, a directory of the test's
    conf = tmp_path / "valkey.conf"
    conf.write_text(text.replace(f"dir {mounts['data']}", f"dir {tmp_path}"))
    url = parse_cache_url(data["url"].decode())
    server = RedisServer(tmp_path / "valkey", url.password, config=conf)  # the chart's requirepass, save, …
    server.start()
    local = dataclasses.replace(url, host="127.0.0.1", port=server.port)
    level = RedisCache(local, key=data["fingerprint-key"], limits=RedisLimits(10, 10, 60), timeout=0.5)
    try:
        assert level.up
        level.put_content("r.example/app", "sha256:d", "index", "[]")
        assert level.content("r.example/app", "sha256:d") == ("index", "[]")
        with server.client() as client:
            config = {_text(k): _text(v) for k, v in client.config_get("*").items()}
        assert config["save"] == "" and config["appendonly"] == "no"
        assert config["maxmemory-policy"] == "volatile-lru" and int(config["maxmemory"]) == 96 * 1024 * 1024
        with pytest.raises(redis.AuthenticationError), redis.Redis(port=server.port, password="guess") as intruder:
            intruder.ping()
    finally:
        level.close()
        server.stop()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
