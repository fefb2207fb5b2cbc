"""Gate mode's decision (noe_core.placement.gate): which pods are held back by the scheduling gate, and with what patch.

The decision is a pure function of the lookups, so most cases use fixed
answers; the last tests check that real lookups mark their failures
temporary (a registry that hangs) or permanent (an image that does not exist).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure, fixed
from noe_core.placement.gate import SCHEDULING_GATE, remove_gate_operation
from noe_core.policies.settings import PolicySettings
from noe_core.registry.lookup_service import LookupService
from noe_core.registry.resolver import Resolver
from noe_core.registry.settings import RegistrySettings
from noe_core.registry.transport import make_session
from noe_core.testing import admission_review, daemonset, node, pod, schedulable
from noe_core.util.deadline import Deadline
from noe_core.util.json_patch import apply_patch

MULTI = ImagePlatforms.of("linux/amd64", "linux/arm64")
HUNG = LookupFailure("timed out after 5s", temporary=True)
MISSING = LookupFailure("manifest unknown (404)")
SETTINGS = PolicySettings(strict_namespaces=frozenset({"strict"}))
NODES = [node(f"n-{arch}", arch) for arch in ("amd64", "arm64", "s390x")]


def decide(obj: dict[str, Any], lookups: dict[str, Any], mode: str = "gate", namespace: str = "apps") -> Any:
    request = parse_admission_review(admission_review(obj, namespace=namespace))
    return admit(request, SETTINGS, fixed(lookups), on_lookup_failure=mode)  # type: ignore[arg-type]


def test_a_temporary_failure_gates_the_pod_instead_of_placing_it() -> None:
    admission = decide(pod(["a:1", "b:1"]), {"a:1": MULTI, "b:1": HUNG})
    assert admission.label == "gated"
    assert admission.decision.patch == (
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": SCHEDULING_GATE}]},
    )
    gated = admission.decision.obj
    assert "affinity" not in gated["spec"]
    assert any(SCHEDULING_GATE in w for w in admission.decision.warnings)


def test_allow_mode_keeps_todays_answer() -> None:
    admission = decide(pod(["a:1", "b:1"]), {"a:1": MULTI, "b:1": HUNG}, mode="allow")
    assert admission.label == "mutated"
    assert {n["metadata"]["name"] for n in NODES if schedulable(admission.decision.obj, n)} == {"n-amd64", "n-arm64"}
    assert "schedulingGates" not in admission.decision.obj["spec"]


def test_permanent_failures_stay_warnings() -> None:
    admission = decide(pod(["a:1", "b:1"]), {"a:1": MULTI, "b:1": MISSING})
    assert admission.label == "mutated"
    assert "schedulingGates" not in admission.decision.obj["spec"]
    assert any("b:1" in w for w in admission.decision.warnings)


def test_strict_namespaces_deny_and_are_never_gated() -> None:
    admission = decide(pod(["a:1", "b:1"], namespace="strict"), {"a:1": MULTI, "b:1": HUNG}, namespace="strict")
    assert admission.label == "denied" and admission.decision.patch == ()


def test_daemonsets_are_never_gated() -> None:
    admission = decide(daemonset(["a:1", "b:1"]), {"a:1": MULTI, "b:1": HUNG})
    assert admission.label != "gated"
    assert "schedulingGates" not in admission.decision.obj["spec"]["template"]["spec"]


def test_a_deny_stays_a_deny() -> None:
    admission = decide(
        pod(["a:1", "b:1", "c:1"]),
        {"a:1": ImagePlatforms.of("linux/amd64"), "b:1": ImagePlatforms.of("linux/arm64"), "c:1": HUNG},
    )
    assert admission.label == "denied"


def test_a_pod_with_gates_of_its_own_keeps_them_and_gets_noes_appended() -> None:
    obj = pod(["b:1"])
    obj["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    admission = decide(obj, {"b:1": HUNG})
    gates = admission.decision.obj["spec"]["schedulingGates"]
    assert gates == [{"name": "example.com/quota"}, {"name": SCHEDULING_GATE}]
    removed = apply_patch(admission.decision.obj, remove_gate_operation(admission.decision.obj["spec"]))
    assert removed["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    only = decide(pod(["b:1"]), {"b:1": HUNG}).decision.obj
    assert "schedulingGates" not in apply_patch(only, remove_gate_operation(only["spec"]))["spec"]


# ----------------------------------------------------------------------------- real lookups


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """Accepts TCP connections and never answers a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.mark.registry
def test_real_lookups_say_whether_a_failure_is_temporary(
    registry: Any, pushed_images: dict[str, Any], silent_registry: str
) -> None:
    settings = RegistrySettings(insecure_registries=(registry.host, silent_registry))
    hung, missing = f"{silent_registry}/team/app:1", f"{registry.host}/does/not-exist:1"
    with make_session(settings) as session, Resolver(session, settings=settings) as resolver:
        lookups = LookupService(resolver=resolver).lookup([hung, missing], deadline=Deadline.after(1.5)).lookups
    assert isinstance(lookups[hung], LookupFailure) and lookups[hung].temporary
    assert isinstance(lookups[missing], LookupFailure) and not lookups[missing].temporary
