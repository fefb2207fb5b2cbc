"""AdmissionReview parsing (v1 and v1beta1) and the response the API server expects."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import AdmissionRequest, parse_admission_review, review_response
from noe_core.errors import InvalidObject
from noe_core.image.image_platforms import fixed
from noe_core.placement.pipeline import decide
from noe_core.policies.settings import PolicySettings
from noe_core.util.json_patch import apply_patch
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _decide(request: AdmissionRequest, answers: dict[str, Any]) -> Any:
    return decide(
        request.obj,
        kind=request.kind,
        operation=request.operation,
        namespace=request.namespace,
        lookups=testing.platforms(answers),
        settings=PolicySettings(),
        dry_run=request.dry_run,
        sub_resource=request.sub_resource,
    )


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_parse_and_answer_with_a_patch(api_version: str) -> None:
    pod = testing.pod(images=["app:1"], name="web-1")
    review = testing.admission_review(pod, api_version=api_version, uid="abc-123", dry_run=True)
    request = parse_admission_review(review)
    assert request == AdmissionRequest(
        api_version=api_version,
        uid="abc-123",
        kind="Pod",
        operation="CREATE",
        namespace="default",
        name="web-1",
        obj=pod,
        dry_run=True,
        user="system:serviceaccount:kube-system:replicaset-controller",
    )
    decision = _decide(request, {"app:1": ["linux/arm64"]})
    answer = review_response(request, decision)
    assert answer["apiVersion"] == api_version and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "abc-123" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert apply_patch(pod, patch) == decision.obj
    assert "warnings" not in response and "status" not in response


def test_unchanged_answer_has_no_patch() -> None:
    pod = testing.pod(images=["app:1"], node_name="n1")
    request = parse_admission_review(testing.admission_review(pod, uid="u"))
    response = review_response(request, _decide(request, {}))["response"]
    assert response == {"uid": "u", "allowed": True}


def test_warnings_are_returned() -> None:
    pod = testing.pod(images=["app:1", "gone:1"])
    request = parse_admission_review(testing.admission_review(pod, uid="u"))
    response = review_response(request, _decide(request, {"app:1": ["linux/amd64"], "gone:1": "404"}))["response"]
    assert response["warnings"] == ["cannot inspect gone:1: 404"]
    assert response["patchType"] == "JSONPatch"


def test_deny_carries_a_403_status() -> None:
    pod = testing.pod(images=["a:1", "b:1"])
    request = parse_admission_review(testing.admission_review(pod, uid="u"))
    decision = _decide(request, {"a:1": ["linux/amd64"], "b:1": ["linux/arm64"]})
    response = review_response(request, decision)["response"]
    assert response["allowed"] is False and "patch" not in response
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
    assert "a:1: amd64" in response["status"]["message"]


def test_namespace_and_name_fall_back_to_the_object() -> None:
    pod = testing.pod(images=["app:1"])
    pod["metadata"] = {"generateName": "web-", "namespace": "shop"}
    review = testing.admission_review(pod)
    review["request"]["name"] = ""
    del review["request"]["namespace"]
    request = parse_admission_review(review)
    assert (request.namespace, request.name) == ("shop", "web-")
    # the API server's namespace wins: a Pod in a create request often has none
    pod["metadata"] = {"generateName": "web-"}
    review = testing.admission_review(pod, namespace="team-a")
    assert parse_admission_review(review).namespace == "team-a"


def test_subresource_is_kept_and_ignored_by_the_policy() -> None:
    review = testing.admission_review(testing.daemonset(images=["a:1"]), operation="UPDATE")
    review["request"]["subResource"] = "status"
    request = parse_admission_review(review)
    assert request.sub_resource == "status" and request.kind == "DaemonSet"
    assert not _decide(request, {"a:1": ["linux/arm64"]}).changed


def test_delete_without_object_parses() -> None:
    review = testing.admission_review(testing.pod(), operation="DELETE")
    review["request"]["object"] = None
    assert parse_admission_review(review).obj == {}


def _review(**changes: Any) -> dict[str, Any]:
    review = testing.admission_review(testing.pod(), uid="u")
    for path, value in changes.items():
        target = review
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return review


_DELETE = object()


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be a JSON object, not an array"),
        ("text", "must be a JSON object, not a string"),
        (_review(apiVersion="admission.k8s.io/v2"), "apiVersion 'admission.k8s.io/v2' is not one of"),
        (_review(apiVersion=_DELETE), "apiVersion None is not one of"),
        (_review(kind="Pod"), "kind 'Pod' is not AdmissionReview"),
        (_review(request=_DELETE), r"AdmissionReview\.request is missing"),
        (_review(request=[]), r"AdmissionReview\.request must be an object, not an array"),
        (_review(request__uid=_DELETE), r"request\.uid is missing"),
        (_review(request__uid=""), r"request\.uid is empty"),
        (_review(request__uid=5), r"request\.uid must be a string, not a number"),
        (_review(request__kind=_DELETE), r"request\.kind is missing"),
        (_review(request__kind="Pod"), r"request\.kind must be an object, not a string"),
        (_review(request__operation="PATCH"), r"request\.operation 'PATCH' is not one of"),
        (_review(request__object=_DELETE), r"request\.object is missing"),
        (_review(request__object=[1]), r"request\.object is an array, not an object"),
        (_review(request__dryRun="yes"), r"request\.dryRun must be a boolean, not a string"),
        (_review(request__namespace=3), r"request\.namespace must be a string"),
        (_review(request__object__metadata="x"), r"request\.object\.metadata must be an object"),
    ],
)
def test_malformed_reviews(doc: object, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        parse_admission_review(doc)


@pytest.mark.parametrize("name", ["admission-review.json", "admission-review-v1beta1.json"])
def test_shipped_examples_parse(name: str) -> None:
    path = EXAMPLES / name
    if not path.exists():
        pytest.fail(f"{path} is missing")
    request = parse_admission_review(json.loads(path.read_text()))
    assert request.kind in ("Pod", "DaemonSet") and request.uid


def test_the_objects_metadata_is_read_once_at_the_border() -> None:
    pod = testing.pod(images=["app:1"], name="")
    pod["metadata"]["generateName"] = "web-"
    request = parse_admission_review(testing.admission_review(pod))
    assert request.name == "web-" and request.meta.generate_name == "web-" and request.meta.name == ""
    admission = admit(request, PolicySettings(), fixed(testing.platforms({"app:1": ["linux/arm64"]})))
    assert admission.workload is not None and admission.workload.meta is request.meta
    built = AdmissionRequest("admission.k8s.io/v1", "u", "Pod", "CREATE", "default", "web-", pod)
    assert built.meta == request.meta  # a request built directly reads its metadata when made
    with pytest.raises(InvalidObject, match=r"metadata\.labels\['a'\] must be a string"):
        AdmissionRequest(
            "admission.k8s.io/v1", "u", "Pod", "CREATE", "default", "x", {"metadata": {"labels": {"a": 1}}}
        )
