"""Property: for any policy set, namespaces, flags and pod, the three ways in give the same answer.

* the webhook: its admission service, whose policies come from the cluster through the watch
  (the policies and Namespaces are written into the HTTPS stand-in API server and read back);
* ``noe mutate --policy FILE`` on the AdmissionReview, with the same flags;
* ``noe_core.admit`` with ``noe_core.testing.policies`` (what users' tests call).

The answers are compared byte for byte (the AdmissionReview response: patch, warnings, denial).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noe_core import testing
from noe_core.admission.admitting import admit
from noe_core.admission.review import parse_admission_review
from noe_core.image.declared import StaticPlatforms
from noe_core.image.image_platforms import LookupRequest, LookupResult
from noe_core.policies.documents import read_documents
from noe_core.policies.merge import MergedSettings
from noe_core.policies.settings import PolicySettings, parse_arch_tolerations
from noe_core.registry.lookup_service import LookupService
from noe_core.util.deadline import Deadline
from noe_web.kube.client import KubeClient
from noe_web.kube.config import load_kubeconfig
from noe_web.kube.policy_watch import PolicyWatch
from noe_web.metrics import Metrics
from noe_web.webhook.admission import AdmissionService
from tests.support.certs import CA, make_ca
from tests.support.cli import run_cli
from tests.support.fake_cluster import FakeCluster, start_fake_cluster

pytestmark = pytest.mark.e2e

TOKEN = "policy-paths-token"
PLATFORMS = {
    "multi:1": ["linux/amd64", "linux/arm64", "linux/ppc64le"],
    "amd-arm:1": ["linux/amd64", "linux/arm64"],
    "arm:1": ["linux/arm64"],
    "broken:1": {"error": "registry.corp answered 503"},
}
ARCHES = ["amd64", "arm64", "ppc64le", "s390x"]
NAMESPACES = {"team-a": {"env": "prod"}, "team-b": {"env": "dev"}, "team-c": {}}
KINDS = ("clusterplacementpolicies", "placementpolicies")


# --- strategies --------------------------------------------------------------------------------------------

labels_in = st.sampled_from(["prod", "dev"])
selectors = st.one_of(
    st.just(None),
    st.builds(lambda env: {"matchLabels": {"env": env}}, labels_in),
    st.builds(
        lambda envs: {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": envs}]},
        st.lists(labels_in, min_size=1, max_size=2, unique=True),
    ),
)
pod_selectors = st.one_of(
    st.just(None),
    st.builds(lambda app: {"matchLabels": {"app": app}}, st.sampled_from(["web", "db"])),
    st.just({"matchExpressions": [{"key": "team", "operator": "Exists"}]}),
)
preferences = st.lists(
    st.fixed_dictionaries({"architecture": st.sampled_from(ARCHES), "weight": st.integers(1, 100)}),
    max_size=3,
    unique_by=lambda p: p["architecture"],
)
SPEC_FIELDS = {
    "priority": st.integers(0, 3),
    "podSelector": pod_selectors,
    "preferredArchitectures": preferences,
    "preferenceMode": st.sampled_from(["soft", "required"]),
    "schedulableArchitectures": st.lists(st.sampled_from(ARCHES), min_size=1, max_size=3, unique=True),
    "strict": st.booleans(),
    "matchNodeLabels": st.just(["team"]),
    "architectureTolerations": st.just(
        [{"architecture": "arm64", "key": "arch", "value": "arm64", "effect": "NoSchedule"}]
    ),
    "imagePlatforms": st.just([{"image": "declared:*", "platforms": ["linux/arm64", "linux/s390x"]}]),
}


@st.composite
def a_policy(draw: st.DrawFn, index: int) -> dict[str, Any]:
    spec = {k: v for k, v in draw(st.fixed_dictionaries({}, optional=SPEC_FIELDS)).items() if v is not None}
    if draw(st.integers(0, 9)) == 0:
        spec["priority"] = 5000  # invalid: ignored whole by every path
    if draw(st.booleans()):
        selector = draw(selectors)
        if selector is not None:
            spec["namespaceSelector"] = selector
        return testing.cluster_policy(f"c{index}", spec)
    return testing.placement_policy(f"p{index}", draw(st.sampled_from(sorted(NAMESPACES))), spec)


@st.composite
def policy_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [draw(a_policy(index)) for index in range(draw(st.integers(0, 5)))]


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if draw(st.booleans()):
        labels["app"] = draw(st.sampled_from(["web", "db"]))
    if draw(st.booleans()):
        labels["team"] = "a"
    if draw(st.integers(0, 3)) == 0:
        labels["arch.noe.adevinta.com/preferred"] = draw(st.sampled_from(ARCHES))
    images = draw(st.lists(st.sampled_from([*PLATFORMS, "declared:1"]), min_size=1, max_size=2, unique=True))
    node_selector = {"kubernetes.io/arch": "amd64"} if draw(st.integers(0, 5)) == 0 else None
    return testing.pod(
        images, namespace=draw(st.sampled_from(sorted(NAMESPACES))), labels=labels, node_selector=node_selector
    )


FLAGS = st.builds(
    lambda preferred, schedulable, strict, mode: (preferred, schedulable, strict, mode),
    st.sampled_from(["amd64", "arm64", ""]),
    st.sampled_from(["", "amd64,arm64", "amd64,arm64,ppc64le,s390x"]),
    st.sampled_from(["", "team-b"]),
    st.sampled_from(["soft", "required"]),
)


def flag_args(flags: tuple[str, str, str, str]) -> list[str]:
    preferred, schedulable, strict, mode = flags
    if schedulable and preferred and preferred not in schedulable.split(","):
        preferred = ""
    return [
        f"--preferred-arch={preferred}",
        f"--cluster-schedulable-archs={schedulable}",
        f"--strict-namespaces={strict}",
        f"--preference-mode={mode}",
        "--arch-tolerations=arm64=arch=arm64:NoSchedule",
    ]


def settings_of(args: list[str]) -> PolicySettings:
    values = dict(arg[2:].split("=", 1) for arg in args)
    return PolicySettings(
        preferred_arch=values["preferred-arch"],
        schedulable_archs=frozenset(a for a in values["cluster-schedulable-archs"].split(",") if a),
        strict_namespaces=frozenset(n for n in values["strict-namespaces"].split(",") if n),
        preference_mode=values["preference-mode"],  # type: ignore[arg-type]
        arch_tolerations=parse_arch_tolerations(values["arch-tolerations"]),
    ).validate()


# --- the cluster and its watch -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeCluster]:
    ca: CA = make_ca("policy paths kube CA", tmp_path_factory.mktemp("policy-paths-ca"))
    with start_fake_cluster(ca, tokens=(TOKEN,)) as c:
        c.state.bookmark_interval = 0.2
        for name, labels in NAMESPACES.items():
            c.add("namespaces", testing.namespace(name, labels))
        yield c


class InCluster:
    """The stand-in cluster and the webhook's watch of it (with a short repr: Hypothesis prints the arguments)."""

    def __init__(self, cluster: FakeCluster, watch: PolicyWatch) -> None:
        self.cluster, self.watch = cluster, watch

    def __repr__(self) -> str:
        return "InCluster()"

    def settings_for(self, base: PolicySettings, *, namespace: str, pod_labels: Mapping[str, str]) -> MergedSettings:
        """The watch as each example's admission service sees it (it is not theirs to stop: no ``stop``)."""
        return self.watch.settings_for(base, namespace=namespace, pod_labels=pod_labels)


@pytest.fixture(scope="module")
def in_cluster(cluster: FakeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InCluster]:
    kubeconfig = cluster.api.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig", token=TOKEN)
    running = PolicyWatch(KubeClient(load_kubeconfig(kubeconfig)))
    running.start()
    assert running.wait_ready(15)
    yield InCluster(cluster, running)
    running.stop()


def load_into_cluster(cluster: FakeCluster, watch: PolicyWatch, docs: list[dict[str, Any]]) -> None:
    """Replace the cluster's policies by ``docs`` and wait until the watch has seen exactly them."""
    for kind in KINDS:
        for namespace, name in list(cluster.state.objects[kind]):
            cluster.delete(kind, namespace, name)
    for doc in docs:
        cluster.add("clusterplacementpolicies" if doc["kind"] == "ClusterPlacementPolicy" else "placementpolicies", doc)
    target = cluster.state.rv  # every change above: the watch has seen them when its version reaches it
    end = time.monotonic() + 10
    while any(int(informer.resource_version or 0) < target for informer in (watch.cluster, watch.namespaced)):
        assert time.monotonic() < end, "the watch never caught up"
        time.sleep(0.01)
    wanted = sorted((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs)
    assert sorted((j.ref.kind, j.ref.namespace, j.ref.name) for j in watch.judged()) == wanted


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(docs=policy_sets(), pod=pods(), flags=FLAGS)
def test_webhook_mutate_and_noe_core_agree(
    in_cluster: InCluster,
    tmp_path: Path,
    docs: list[dict[str, Any]],
    pod: dict[str, Any],
    flags: tuple[str, str, str, str],
) -> None:
    args = flag_args(flags)
    base = settings_of(args)
    policy_file, review_file, platforms_file = tmp_path / "p.yaml", tmp_path / "r.json", tmp_path / "platforms.json"
    platforms_file.write_text(json.dumps(PLATFORMS))
    static = StaticPlatforms.load(platforms_file)  # one source name in every path's warnings
    review = testing.admission_review(pod, uid="one-uid")
    namespaces = [testing.namespace(name, labels) for name, labels in NAMESPACES.items()]

    # noe_core, as users' tests call it
    service = LookupService(static=static)

    def inspect(request: LookupRequest) -> LookupResult:
        return service.inspect(request, deadline=Deadline.after(5)).result

    found = read_documents([*docs, *namespaces], "generated")
    core = admit(parse_admission_review(review), base, inspect, policies=found.as_policies()).response

    # noe mutate --policy FILE
    policy_file.write_text(yaml.safe_dump_all([*docs, *namespaces]))
    review_file.write_text(json.dumps(review))
    status, out, err = run_cli(
        "mutate",
        "-f",
        str(review_file),
        "--platforms",
        str(platforms_file),
        "--policy",
        str(policy_file),
        "-o",
        "json",
        *args,
    )
    assert status in (0, 3), err  # 3: denied
    mutate = json.loads(out)

    # the webhook, its policies watched in the stand-in cluster
    load_into_cluster(in_cluster.cluster, in_cluster.watch, docs)
    webhook = AdmissionService(policy=base, metrics=Metrics(), static=static, policies=in_cluster)
    try:
        served = webhook.review(review)
    finally:
        webhook.close()

    assert served == core == mutate
