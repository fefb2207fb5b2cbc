"""``webhook.pullSecrets``: which Secrets the chart lets noe read, and what a pod is told when noe may not.

The rendered RBAC (real helm) is evaluated for each ServiceAccount — in which namespaces
may it ``get secrets``? — and that answer is what the stand-in Kubernetes API enforces
for a real ``noe serve`` started with the chart's own ``--pull-secrets-hint``: a pod in a
listed namespace gets its private image placed through its pull Secret; a pod elsewhere
is admitted with a warning that says which Secret could not be read and which value grants it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noe_core.testing import admission_review, pod
from tests.support.certs import make_ca
from tests.support.chart import KUBE_VERSIONS, NAMESPACE, flag_values, one, refused, render_chart, validate
from tests.support.fake_kube_api import FakeKubeAPI, pull_secret, start_fake_kube_api
from tests.support.images import PushedImage
from tests.support.noe_serve import apply, archs_allowed, post_review, start_noe, uid
from tests.support.registry_server import RegistryServer

pytestmark = pytest.mark.deploy

ALL = "*"  # every namespace: a ClusterRole rule
LISTED = {"webhook": {"pullSecrets": {"namespaces": ["team-a", "team-b"]}}, "controller": {"enabled": True}}
OFF = {"webhook": {"pullSecrets": {"enabled": False}}, "controller": {"enabled": True}}


def secret_namespaces(docs: list[dict[str, Any]], service_account: str) -> set[str]:
    """Where *service_account* (of the release namespace) may ``get secrets``, by the rendered RBAC:
    ``{"*"}`` for a cluster-wide grant, else the namespaces of the RoleBindings that grant it."""
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}

    def grants(role: dict[str, Any]) -> bool:
        return any(
            "" in r["apiGroups"] and "secrets" in r["resources"] and {"get", "*"} & set(r["verbs"])
            for r in role.get("rules") or []
        )

    found: set[str] = set()
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding") or subject not in binding["subjects"]:
            continue
        ref = binding["roleRef"]
        where = binding["metadata"].get("namespace")
        role = one(
            [d for d in docs if d["kind"] == ref["kind"] and d["metadata"].get("namespace") == where]
            if ref["kind"] == "Role"
            else docs,
            ref["kind"],
            ref["name"],
        )
        if grants(role):
            found.add(ALL if binding["kind"] == "ClusterRoleBinding" else where)
    return found


def container_args(docs: list[dict[str, Any]], component: str) -> list[str]:
    [deployment] = [
        d
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def test_by_default_noe_reads_pull_secrets_in_every_namespace() -> None:
    docs = render_chart({"controller": {"enabled": True}})
    assert secret_namespaces(docs, "noe") == {ALL}
    assert secret_namespaces(docs, "noe-controller") == {ALL}
    assert flag_values(container_args(docs, "webhook"), "--pull-secrets-hint") == []


def test_listed_namespaces_get_a_role_each_and_nothing_cluster_wide() -> None:
    docs = render_chart(LISTED)
    for version in (KUBE_VERSIONS[0], KUBE_VERSIONS[-1]):
        for doc in docs:
            validate(doc, version)
    assert secret_namespaces(docs, "noe") == {"team-a", "team-b"}
    assert secret_namespaces(docs, "noe-controller") == {"team-a", "team-b"}
    for role in (d for d in docs if d["kind"] == "ClusterRole"):
        assert not [r for r in role["rules"] if "secrets" in r["resources"]], role["metadata"]["name"]
    # Events are still written in any namespace.
    assert {"events"} <= {res for r in one(docs, "ClusterRole", "noe")["rules"] for res in r["resources"]}
    for component in ("webhook", "controller"):
        [hint] = flag_values(container_args(docs, component), "--pull-secrets-hint")
        assert "webhook.pullSecrets.namespaces" in hint


def test_disabled_grants_no_secret_at_all() -> None:
    docs = render_chart(OFF)
    assert secret_namespaces(docs, "noe") == set() and secret_namespaces(docs, "noe-controller") == set()
    assert not [
        r for d in docs if d["kind"] in ("Role", "ClusterRole") for r in d["rules"] if "secrets" in r["resources"]
    ]
    [hint] = flag_values(container_args(docs, "webhook"), "--pull-secrets-hint")
    assert "webhook.pullSecrets.enabled" in hint


@pytest.mark.parametrize("namespaces", [["Team_A"], ["team-a", "team-a"], "team-a"])
def test_bad_namespace_lists_are_refused(namespaces: Any) -> None:
    message = refused({"webhook": {"pullSecrets": {"namespaces": namespaces}}})
    assert "webhook.pullSecrets.namespaces" in message or "pullSecrets" in message, message


# --- the warning, from a real noe serve under the chart's RBAC ---------------------------------------------------


@pytest.fixture(scope="module")
def listed_cluster(
    tmp_path_factory: pytest.TempPathFactory, basic_registry: RegistryServer, basic_credentials: tuple[str, str]
) -> Iterator[tuple[FakeKubeAPI, str]]:
    """The stand-in API enforcing the chart's RBAC for namespaces team-a, team-b; a regcred in every namespace."""
    docs = render_chart(LISTED)
    allowed = secret_namespaces(docs, "noe")
    [hint] = flag_values(container_args(docs, "webhook"), "--pull-secrets-hint")
    work = tmp_path_factory.mktemp("pull-secrets-api")
    with start_fake_kube_api(make_ca("kube CA", work / "ca"), tokens=("t0ken",)) as api:
        api.state.secret_namespaces = frozenset(allowed)
        for namespace in ("team-a", "team-b", "team-c"):
            api.add_secret(
                namespace, "regcred", pull_secret(basic_registry.host, *basic_credentials, namespace=namespace)
            )
        yield api, hint


def test_a_pod_outside_the_listed_namespaces_is_told_which_value_grants_the_secret(
    listed_cluster: tuple[FakeKubeAPI, str],
    basic_pushed_images: dict[str, PushedImage],
    tmp_path: Path,
) -> None:
    api, hint = listed_cluster
    ca = make_ca("serving CA", tmp_path / "ca")
    pair = ca.issue(["127.0.0.1"])
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", token="t0ken")
    image = basic_pushed_images["docker-single-arm64"]
    noe = start_noe(
        tmp_path,
        [
            f"--tls-cert-file={pair.cert_file}",
            f"--tls-key-file={pair.key_file}",
            f"--kubeconfig={kubeconfig}",
            "--insecure-registries=127.0.0.1:*",
            f"--state-dir={tmp_path / 'state'}",
            "--workers=1",
            f"--pull-secrets-hint={hint}",
        ],
        ca.ca_file,
    )
    try:
        with noe.session() as http:

            def admit(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
                p = pod([image.reference], namespace=namespace, name=f"private-{namespace}")
                p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
                review = admission_review(p, uid=uid())
                return review, post_review(http, noe, review)

            review, inside = admit("team-a")
            assert "warnings" not in inside, inside.get("warnings")
            assert archs_allowed(apply(review, inside)) == {"arm64"}

            review, outside = admit("team-c")
            assert outside["allowed"] is True and "patch" not in outside
            warnings = outside["warnings"]
            assert (
                "imagePullSecret team-c/regcred could not be read (forbidden to noe); its images are read without it"
                in (warnings)
            )
            assert hint in warnings and "webhook.pullSecrets.namespaces" in hint
            assert warnings.count(hint) == 1
        gets = {r.path for r in api.requests_snapshot() if r.method == "GET"}
        assert {"/api/v1/namespaces/team-a/secrets/regcred", "/api/v1/namespaces/team-c/secrets/regcred"} <= gets
    finally:
        noe.stop()


def test_without_a_hint_the_warning_still_names_the_secret(
    listed_cluster: tuple[FakeKubeAPI, str], basic_pushed_images: dict[str, PushedImage], tmp_path: Path
) -> None:
    """`noe serve` run without the chart (no --pull-secrets-hint) says what failed, and nothing more."""
    api, hint = listed_cluster
    ca = make_ca("serving CA", tmp_path / "ca")
    pair = ca.issue(["127.0.0.1"])
    noe = start_noe(
        tmp_path,
        [
            f"--tls-cert-file={pair.cert_file}",
            f"--tls-key-file={pair.key_file}",
            f"--kubeconfig={api.write_kubeconfig(tmp_path / 'kubeconfig', token='t0ken')}",
            "--insecure-registries=127.0.0.1:*",
            f"--state-dir={tmp_path / 'state'}",
            "--workers=1",
        ],
        ca.ca_file,
    )
    try:
        with noe.session() as http:
            p = pod([basic_pushed_images["oci-single-amd64"].reference], namespace="team-c", name="no-hint")
            p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
            warnings = post_review(http, noe, admission_review(p, uid=uid()))["warnings"]
        assert any(w.startswith("imagePullSecret team-c/regcred could not be read") for w in warnings), warnings
        assert hint not in warnings
    finally:
        noe.stop()


def test_the_hint_must_fit_in_one_warning() -> None:
    from noe_web.commands import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--pull-secrets-hint=" + "x" * 121])
    ns = build_parser().parse_args(["serve", "--pull-secrets-hint=ask #platform for access"])
    assert ns.pull_secrets_hint == "ask #platform for access"


def test_the_charts_hints_fit_in_one_warning() -> None:
    for values in (LISTED, OFF):
        [hint] = flag_values(container_args(render_chart(values), "webhook"), "--pull-secrets-hint")
        assert len(hint) <= 120, hint
