"""Fuzzing every parser of outside input: no exception escapes beyond the module's documented error type.

Hypothesis, with modest example counts so the suite stays within a minute or
two in CI (``pytest -m fuzz`` selects it). Targets: AdmissionReviews and pod
objects through the Flask app (every answer a valid AdmissionReview or a JSON
400), image references, ``WWW-Authenticate`` headers, manifests and config
blobs, docker configs and pull Secrets, credential-provider answers, YAML/JSON
documents and kubeconfigs.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_core.credentials.docker_config import keychain_from_docker_config, keychain_from_pull_secret
from noe_core.credentials.provider import ProviderConfig, parse_provider_response
from noe_core.errors import ChallengeError, CredentialError, InvalidInput, ManifestError, RegistryError
from noe_core.image.declared import StaticPlatforms
from noe_core.image.manifest import parse_config, parse_manifest
from noe_core.name.reference import parse_reference
from noe_core.policies.settings import PolicySettings
from noe_core.registry.challenge import parse_challenges
from noe_core.testing import admission_review, daemonset, pod
from noe_core.util.printable import printable
from noe_core.util.safe_load import TooComplex, load_json, load_yaml_all
from noe_web.kube.config import load_kubeconfig
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService
from noe_web.webhook.app import Services, create_app
from tests.support.json_values import JSON_VALUES, TEXT

pytestmark = pytest.mark.fuzz

FUZZ = settings(  # NOE_FUZZ_EXAMPLES=2000 for a longer hunt; CI keeps it to a minute or two
    max_examples=int(os.environ.get("NOE_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

IMAGE_TEXT = st.one_of(
    TEXT,
    st.from_regex(r"[a-z0-9.:/@_-]{1,60}", fullmatch=True),
    st.sampled_from(["x86:1", "arm:1", "multi:1", "docker.io/library/nginx:1", "a@sha256:" + "0" * 64]),
)


@pytest.fixture(scope="module")
def app() -> Iterator[Flask]:
    service = AdmissionService(
        policy=PolicySettings(),
        metrics=Metrics(),
        deadline_seconds=2.0,
        static=StaticPlatforms.from_mapping(
            {
                "x86:1": ["linux/amd64"],
                "arm:1": ["linux/arm64/v8"],
                "multi:1": ["linux/amd64", "linux/arm64"],
            }
        ),
    )
    application = create_app(Services(service))
    yield application
    service.close()


def _assert_valid_answer(status: int, body: Any, review: Any) -> None:
    """A 200 carries an AdmissionReview answering this uid; anything else is a JSON 400."""
    assert status in (200, 400), (status, body)
    assert isinstance(body, dict)
    if status == 400:
        assert body["code"] == 400 and isinstance(body["reason"], str) and isinstance(body["message"], str)
        return
    response = body["response"]
    assert body["kind"] == "AdmissionReview" and isinstance(response["allowed"], bool)
    assert response["uid"] == review["request"]["uid"]
    for warning in response.get("warnings", []):
        assert printable(warning) == warning, warning  # nothing left to escape: controls and bidi are gone
    if not response["allowed"]:
        message = response["status"]["message"]
        assert printable(message) == message, message
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        assert isinstance(json.loads(base64.b64decode(response["patch"])), list)


def _post(app: Flask, payload: Any) -> tuple[int, Any]:
    data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    resp = app.test_client().post("/mutate", data=data, content_type="application/json")
    return resp.status_code, resp.get_json(silent=True)


@FUZZ
@given(doc=JSON_VALUES)
def test_any_json_body_is_answered(app: Flask, doc: Any) -> None:
    status, body = _post(app, doc)
    assert status == 400 and isinstance(body, dict) and body["code"] == 400


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


@st.composite
def mutated_reviews(draw: st.DrawFn) -> dict[str, Any]:
    """A valid review (pod or DaemonSet) with one to three subtrees replaced by arbitrary JSON."""
    images = draw(st.lists(IMAGE_TEXT, min_size=1, max_size=4))
    obj = daemonset(images) if draw(st.booleans()) else pod(images, namespace=draw(TEXT) or "default")
    review = admission_review(obj)
    if obj["kind"] == "DaemonSet":
        review["request"]["kind"]["kind"] = "DaemonSet"
    review = copy.deepcopy(review)
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in _paths(review) if p and p[:2] != ("request", "uid")]
        path = draw(st.sampled_from(paths))
        parent = review
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(JSON_VALUES)
    return review


@FUZZ
@given(review=mutated_reviews())
def test_mutated_admission_reviews_are_answered(app: Flask, review: dict[str, Any]) -> None:
    status, body = _post(app, review)
    _assert_valid_answer(status, body, review)


@FUZZ
@given(data=st.binary(max_size=200))
def test_any_bytes_are_a_json_400(app: Flask, data: bytes) -> None:
    status, body = _post(app, data)
    assert status == 400 and isinstance(body, dict) and body["code"] == 400


@FUZZ
@given(text=IMAGE_TEXT)
def test_image_references(text: str) -> None:
    try:
        ref = parse_reference(text)
    except InvalidInput:
        return
    assert parse_reference(str(ref)) == ref  # what it prints, it reads back


CHALLENGE_PARTS = st.sampled_from(
    [
        "Bearer",
        "Basic",
        "realm=",
        '"',
        "\\",
        ",",
        " ",
        'service="x"',
        "scope=",
        '="',
        "a",
        "=",
        'error="insufficient_scope"',
        "\t",
    ]
)


@FUZZ
@given(header=st.one_of(TEXT, st.lists(CHALLENGE_PARTS, max_size=30).map("".join)))
def test_www_authenticate_headers(header: str) -> None:
    with contextlib.suppress(ChallengeError):
        parse_challenges(header, registry="fuzz.example")


@FUZZ
@given(
    doc=JSON_VALUES,
    raw=st.binary(max_size=100),
    media=st.sampled_from(
        [
            None,
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "text/html",
        ]
    ),
)
def test_manifests_and_config_blobs(doc: Any, raw: bytes, media: str | None) -> None:
    for body in (json.dumps(doc).encode(), raw):
        with contextlib.suppress(ManifestError):
            parse_manifest(body, media)
        with contextlib.suppress(ManifestError):
            parse_config(body)


@FUZZ
@given(doc=JSON_VALUES, raw=st.binary(max_size=100), legacy=st.booleans())
def test_docker_configs_and_pull_secrets(doc: Any, raw: bytes, legacy: bool) -> None:
    for data in (json.dumps(doc).encode(), raw, json.dumps({"auths": doc}).encode()):
        with contextlib.suppress(CredentialError):
            keychain_from_docker_config(data, "fuzz", legacy=legacy)
        secret = {
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "s", "namespace": "n"},
            "data": {".dockerconfigjson": base64.b64encode(data).decode()},
        }
        with contextlib.suppress(CredentialError):
            keychain_from_pull_secret(secret, "fuzz")
    with contextlib.suppress(CredentialError):
        keychain_from_pull_secret(doc if isinstance(doc, dict) else {"data": doc}, "fuzz")


PROVIDER = ProviderConfig("fuzz", (), 60.0, "credentialprovider.kubelet.k8s.io/v1")


@FUZZ
@given(doc=JSON_VALUES, raw=st.binary(max_size=100))
def test_credential_provider_answers(doc: Any, raw: bytes) -> None:
    answers = [
        raw,
        json.dumps(doc).encode(),
        json.dumps(
            {
                "kind": "CredentialProviderResponse",
                "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                "cacheKeyType": doc,
                "auth": doc if isinstance(doc, dict) else {"x": doc},
            }
        ).encode(),
    ]
    for stdout in answers:
        with contextlib.suppress(RegistryError):
            parse_provider_response(stdout, PROVIDER)


@FUZZ
@given(
    text=st.one_of(
        TEXT,
        st.lists(
            st.sampled_from(
                ["a: ", "&x ", "*x", "[", "]", "{", "}", "- ", "\n", "  ", "!!python/object ", "'", ": b", ","]
            ),
            max_size=40,
        ).map("".join),
    )
)
def test_yaml_and_json_documents(text: str) -> None:
    try:
        load_yaml_all(text)
    except (TooComplex, ValueError):
        pass
    except Exception as exc:
        assert type(exc).__module__.startswith("yaml"), repr(exc)
    with contextlib.suppress(ValueError):
        load_json(text)


@FUZZ
@given(doc=JSON_VALUES, cluster=JSON_VALUES)
def test_kubeconfigs(doc: Any, cluster: Any) -> None:
    shaped = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": cluster}],
        "users": [{"name": "u", "user": doc}],
    }
    with tempfile.TemporaryDirectory() as where:
        for content in (doc, shaped):
            path = Path(where) / "kubeconfig"
            path.write_text(json.dumps(content))
            with contextlib.suppress(InvalidInput):
                load_kubeconfig(path)
