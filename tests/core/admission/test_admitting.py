"""One admission (noe_core.admission.admitting): inspect at most once, only what the policy needs; label and answer."""

from __future__ import annotations

from typing import Any

import pytest

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import AdmissionRequest, parse_admission_review, review_response
from noe_core.image.image_platforms import LookupRequest, LookupResult, fixed
from noe_core.policies.settings import PolicySettings


class Recorder:
    """An ``inspect`` that answers from fixed lookups and remembers every request."""

    def __init__(self, answers: dict[str, Any], warnings: tuple[str, ...] = ()) -> None:
        self.inspect = fixed(testing.platforms(answers))
        self.warnings = warnings
        self.requests: list[LookupRequest] = []

    def __call__(self, request: LookupRequest) -> LookupResult:
        self.requests.append(request)
        return LookupResult(self.inspect(request).lookups, self.warnings)


def _request(obj: dict[str, Any], operation: str = "CREATE") -> AdmissionRequest:
    return parse_admission_review(testing.admission_review(obj, operation, uid="u-1"))


def test_a_request_noe_does_not_act_on_is_skipped_without_a_lookup() -> None:
    inspect = Recorder({})
    request = _request({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}})
    admission = admit(request, PolicySettings(), inspect)
    assert admission.label == "skipped" and admission.workload is None and admission.images == ()
    assert inspect.requests == [] and admission.response["response"] == {"uid": "u-1", "allowed": True}


def test_a_bound_pod_needs_no_lookup() -> None:
    inspect = Recorder({"app:1": ["linux/arm64"]})
    admission = admit(_request(testing.pod(["app:1"], node_name="n1")), PolicySettings(), inspect)
    assert admission.label == "allowed" and admission.images == () and inspect.requests == []


def test_the_images_are_inspected_once_with_the_pods_namespace() -> None:
    inspect = Recorder({"app:1": ["linux/arm64"], "side:2": ["linux/arm64", "linux/amd64"]})
    pod = testing.pod(["app:1", "side:2"], namespace="team-a")
    request = _request(pod)
    admission = admit(request, PolicySettings(), inspect)
    assert [(r.images, r.namespace) for r in inspect.requests] == [(("app:1", "side:2"), "team-a")]
    assert admission.label == "mutated" and admission.images == ("app:1", "side:2")
    assert admission.response == review_response(request, admission.decision)
    assert set(admission.lookups) == {"app:1", "side:2"}


def test_images_sharing_no_architecture_are_denied() -> None:
    inspect = Recorder({"a:1": ["linux/amd64"], "b:1": ["linux/arm64"]})
    admission = admit(_request(testing.pod(["a:1", "b:1"])), PolicySettings(), inspect)
    assert admission.label == "denied" and not admission.decision.allowed
    assert admission.response["response"]["status"]["code"] == 403


@pytest.mark.parametrize("warnings", [("pull Secret team-a/r cannot be read",), ()])
def test_the_lookups_warnings_join_the_decisions(warnings: tuple[str, ...]) -> None:
    inspect = Recorder({"app:1": ["linux/arm64"]}, warnings)
    admission = admit(_request(testing.pod(["app:1"])), PolicySettings(), inspect)
    assert set(warnings) <= set(admission.decision.warnings)
    assert admission.policies == ()
