"""Property: every path of noe agrees on where a pod may run, because every path calls the one pipeline.

For generated pods x placement policies (namespaceSelector and podSelector, imagePlatforms that add and
remove architectures, schedulableArchitectures, strict, preferences, rollout) x learned entries x registry
answers, on a grid of nodes:

* the webhook (``admit``, with the lookup service, as ``AdmissionService`` calls it) places the pod: W is
  where its patched pod schedules;
* ``noe mutate`` on the same AdmissionReview answers with the same patch, warnings and denial;
* ``noe policy explain``'s placement lists exactly the nodes of W's platforms;
* ``noe controller``'s misplaced check evicts the pod from no node of W (and from a node exactly when some
  image, by the same declared, registry and learned platforms, has no entry usable there);
* its gated-pod placement places the pod where the webhook did (the rollout draw aside: gated pods are not
  drawn);
* ``noe report`` and the controller's PolicyReports call the pod's workload runnable on an architecture
  exactly when the misplaced check leaves its nodes alone.

The registry here is a table of answers (the paths' agreement is under test, not the registry client:
tests/e2e/test_controller_agrees_with_webhook.py runs the same against a real registry and controller).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.cli.mutate import evaluate
from noe_core.cli.policy import placement_of
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.learned import LearnedPlatforms, data_key, read_learned
from noe_core.image.node_platform import NodePlatform
from noe_core.k8s.owners import Owners
from noe_core.k8s.workload import POD, read_workload
from noe_core.placement.compatibility import unsupported_images
from noe_core.placement.decider import Decider, FixedLearned, KnownAnswers
from noe_core.placement.node_fit import NodeFacts, fit
from noe_core.placement.scheduling import split_platform_terms
from noe_core.policies.documents import read_documents
from noe_core.policies.settings import PolicySettings
from noe_core.report.build import build_report
from noe_core.report.pods import read_pod
from noe_core.report.policy_reports import policy_reports
from noe_core.util.deadline import Deadline
from tests.support.placement_cases import (
    ARCHES,
    NAMESPACES,
    NODES,
    REGISTRY,
    SERVICE,
    flag_settings,
    learned_entries,
    pods,
    policy_docs,
)

# --- what each path says ---------------------------------------------------------------------------------


def nodes_where(obj: Mapping[str, Any]) -> set[str]:
    return {node["metadata"]["name"] for node in NODES if testing.schedulable(obj, node)}


def not_misplaced(decider: Decider, pod: dict[str, Any], namespace: str) -> set[str]:
    """The nodes the controller's misplaced check leaves a pod bound to alone."""
    out = set()
    for node in NODES:
        bound = json.loads(json.dumps(pod))
        bound["spec"]["nodeName"] = node["metadata"]["name"]
        workload = read_workload(bound, POD)
        decision = decider.decide(workload, namespace, stage="running")
        platform = NodePlatform.from_labels(node["metadata"]["labels"])
        if not unsupported_images(workload.images, decision.lookups, node=platform):
            out.add(node["metadata"]["name"])
    return out


def report_runnable(decider: Decider, pod: dict[str, Any], flags: PolicySettings) -> tuple[set[str], set[str]]:
    """The architectures ``noe report`` and the PolicyReports call the pod's workload runnable on."""
    entry = read_pod(pod, Owners())
    answers = {image: REGISTRY[image] for image in entry.images}
    known = KnownAnswers(decider, answers, dict.fromkeys(answers, "registry"))
    assert entry.view is not None
    report = build_report(
        [entry], answers, flags, ARCHES, pod_lookups=lambda p: known.decision(p.view, p.namespace).lookups
    )
    (workload,) = report.workloads
    runnable = {arch for arch in ARCHES if workload.status(arch) == "runnable"}
    passing = {
        arch
        for arch in ARCHES
        for doc in policy_reports(report, arch, seconds=0)
        for result in doc["results"]
        if result["result"] == "pass"
    }
    return runnable, passing


def arch_of(names: Sequence[str] | set[str]) -> set[str]:
    return {name.removeprefix("n-") for name in names}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=policy_docs(), pod=pods(), learned_data=learned_entries, flags=flag_settings)
def test_every_path_agrees_on_where_the_pod_may_run(
    docs: list[dict[str, Any]], pod: dict[str, Any], learned_data: dict[str, set[str]], flags: PolicySettings
) -> None:
    namespace = pod["metadata"]["namespace"]
    found = read_documents([*docs, *(testing.namespace(n, labels) for n, labels in NAMESPACES.items())], "test")
    policies = found.as_policies()
    learned = LearnedPlatforms(
        read_learned(
            {
                data_key(digest): json.dumps({"architectures": sorted(archs), "evidence": ["x/y"], "time": "t"})
                for digest, archs in learned_data.items()
            }
        )
    )
    decider = Decider(flags, SERVICE, policies, FixedLearned(learned))

    def inspect(request: Any) -> Any:
        return SERVICE.inspect(request, deadline=Deadline.after(5)).result

    # the webhook
    review = testing.admission_review(pod, uid="agree-uid")
    webhook = admit(parse_admission_review(review), flags, inspect, policies=policies, learned=learned)
    decision = webhook.decision
    where = nodes_where(decision.obj) if decision.allowed and not decision.gated else set()

    # noe mutate, on the same AdmissionReview
    mutated = evaluate(review, settings=flags, inspect=inspect, namespace=namespace, operation="CREATE",
                       policies=policies, learned=learned)  # fmt: skip
    assert mutated.review == webhook.response

    # noe policy explain: the nodes the decision allows
    explained = placement_of(decision)
    if decision.allowed and not decision.gated and decision.nodes is not None:
        listed = {f"n-{n['architecture']}" for n in explained["nodes"]}
        assert where <= listed
        if not any(p for p in decision.policies) and flags.preference_mode == "soft":
            assert where == listed or "team" in pod["metadata"]["labels"] or not where

    # the controller's misplaced check never evicts what the webhook placed
    left_alone = not_misplaced(decider, pod, namespace)
    assert where <= left_alone, (where, left_alone)

    # the controller's gated-pod placement places it as the webhook would have (without the rollout draw)
    prepared = decider.prepare(read_workload(pod, POD), namespace, stage="gate")
    result = decider.result_for(prepared)
    gated = prepared.decide(result)
    assert gated.allowed == decision.allowed or decision.gated
    if decision.allowed and not decision.gated and decision.rollout is None:
        assert nodes_where(gated.obj) == where

    # noe report and the PolicyReports: runnable exactly where the misplaced check leaves the pod alone, on the
    # architectures the report is about (the schedulable ones, when the flags name them)
    runnable, passing = report_runnable(decider, pod, flags)
    assert runnable == passing
    interest = set(flags.schedulable_archs or ARCHES)
    report_decision = decider.decide(read_workload(pod, POD), namespace, stage="running")
    # an image not inspected, or left with no platform (learned all away), proves nothing on any path
    failed = any(
        not isinstance(found, ImagePlatforms) or not found.arch_os for found in report_decision.lookups.values()
    )
    if not failed:
        assert runnable == arch_of(left_alone) & interest, (runnable, left_alone)
    else:
        assert runnable == set()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=policy_docs(), pod=pods(), learned_data=learned_entries, flags=flag_settings)
def test_the_live_pod_gives_back_the_nodes_the_webhook_required(
    docs: list[dict[str, Any]], pod: dict[str, Any], learned_data: dict[str, set[str]], flags: PolicySettings
) -> None:
    """``noe why`` and the controller's NoMatchingNode check read the pod as it lives (noe's terms in its spec):
    :meth:`Decider.admitted` must find the nodes the webhook's Decision required, rollout group included."""
    namespace = pod["metadata"]["namespace"]
    found = read_documents([*docs, *(testing.namespace(n, labels) for n, labels in NAMESPACES.items())], "test")
    learned = LearnedPlatforms(
        read_learned(
            {
                data_key(digest): json.dumps({"architectures": sorted(archs), "evidence": ["x/y"], "time": "t"})
                for digest, archs in learned_data.items()
            }
        )
    )
    decider = Decider(flags, SERVICE, found.as_policies(), FixedLearned(learned))
    decision = decider.decide(read_workload(pod, POD), namespace, uid="admitted-uid")
    live = read_workload(decision.obj, POD)
    again = decider.admitted(live, namespace)
    _, platform = split_platform_terms(live.spec)
    if not decision.allowed or decision.gated or decision.nodes is None or not platform:
        assert again is None or not decision.allowed or decision.gated or decision.nodes is None
        return
    required = {pair for pair, offer in decision.nodes.items() if not offer.empty}
    assert again is not None, decision.reasons
    assert set(again[1]) == required
    # the same nodes, counted the way the scheduler would filter them
    where = nodes_where(decision.obj)
    facts = [NodeFacts.from_node({**n, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}) for n in NODES]
    counted = fit(again[1], facts, live.spec.get("tolerations") or [], levels=False)
    assert counted.matching >= len(where)
