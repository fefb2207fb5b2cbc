"""The migration plan (noe_core.report.planner): target, savings, rebuild order, against hand-made and naive answers."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noe_core import ImagePlatforms, LookupFailure, PolicySettings
from noe_core.errors import InvalidSettings
from noe_core.k8s.owners import Owners
from noe_core.report.build import Report, build_report
from noe_core.report.plan import Upgrade, canonical_image
from noe_core.report.planner import choose_target, with_plan
from noe_core.report.pods import read_pod
from noe_core.report.pricing import Prices, parse_prices

AMD = ImagePlatforms.of("linux/amd64")
MULTI = ImagePlatforms.of("linux/amd64", "linux/arm64")
PRICES = Prices(parse_prices("amd64=0.04,arm64=0.03"), parse_prices("amd64=0.004,arm64=0.003"))


def pod(name: str, images: list[str], cpu: int, *, namespace: str = "ns", memory: str = "1Gi") -> dict[str, Any]:
    """A pod requesting ``cpu`` millicores and ``memory`` in all (its first container asks for them)."""
    containers: list[dict[str, Any]] = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    containers[0]["resources"] = {"requests": {"cpu": f"{cpu}m", "memory": memory}}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"containers": containers}}


def report(pods: list[dict[str, Any]], lookups: dict[str, Any], **kwargs: Any) -> Report:
    owners = Owners()
    built = build_report([read_pod(p, owners) for p in pods], lookups, PolicySettings())
    return with_plan(built, **kwargs)


def test_canonical_image_is_one_spelling_per_image() -> None:
    assert canonical_image("nginx:1.27") == "docker.io/library/nginx:1.27"
    assert canonical_image("docker.io/library/nginx:1.27") == "docker.io/library/nginx:1.27"
    digest = "sha256:" + "a" * 64
    assert canonical_image(f"ghcr.io/o/x:1@{digest}") == f"ghcr.io/o/x@{digest}"
    assert canonical_image("Not An Image") == "Not An Image"


def test_target_given_else_cheapest_priced_else_arm64() -> None:
    archs = ("amd64", "arm64")
    assert choose_target(archs, None) == "arm64"
    assert choose_target(("amd64", "riscv64"), None) is None
    assert choose_target(archs, Prices(parse_prices("amd64=0.03,arm64=0.04"))) == "amd64"
    assert choose_target(archs, PRICES, "amd64") == "amd64"
    with pytest.raises(InvalidSettings, match="--target riscv64 is not among the architectures of interest"):
        choose_target(archs, None, "riscv64")
    with pytest.raises(InvalidSettings, match="--target amd64 has no price"):
        choose_target(archs, Prices(parse_prices("arm64=0.03")), "amd64")
    with pytest.raises(InvalidSettings, match="--prices prices s390x, not among the architectures of interest"):
        choose_target(archs, Prices(parse_prices("s390x=1")))


def test_the_largest_blocker_is_not_the_best_first_rebuild() -> None:
    """x blocks 6 cores but every one of them also waits on y or z; z alone unlocks 2 cores at once."""
    lookups = {"x": AMD, "y": AMD, "z": AMD, "m": MULTI}
    result = report(
        [
            pod("a", ["x", "y"], 3000),
            pod("b", ["x", "z"], 3000),
            pod("c", ["z"], 2000),
            pod("d", ["m"], 1000),
        ],
        lookups,
    )
    plan = result.plan
    assert plan is not None and plan.target == "arm64" and plan.runnable_cpu_millis == 1000
    assert [s.image for s in plan.steps] == [
        "docker.io/library/z:latest",  # unlocks c (2 cores)
        "docker.io/library/x:latest",  # now unlocks b (3); blocks 6 in all, y only 3
        "docker.io/library/y:latest",
    ]
    assert [s.unlocked_cpu_millis for s in plan.steps] == [2000, 3000, 3000]
    assert [s.runnable_cpu_millis for s in plan.steps] == [3000, 6000, 9000]
    assert [[w.name for w in s.unlocked] for s in plan.steps] == [["c"], ["b"], ["a"]]
    assert plan.monthly_saving is None and all(s.monthly_saving is None for s in plan.steps)
    assert result.savings is None
    assert result.to_json()["savings"] is None


def test_ties_go_to_the_most_cpu_blocked_then_the_name_and_deadlocks_too() -> None:
    lookups = {"p": AMD, "q": AMD, "r": AMD, "s": AMD}
    # nothing unlocks alone: every workload waits on two images. q blocks the most CPU in all.
    result = report([pod("a", ["p", "q"], 1000), pod("b", ["q", "r"], 1000), pod("c", ["r", "s"], 500)], lookups)
    assert result.plan is not None
    steps = result.plan.steps
    assert steps[0].image == "docker.io/library/q:latest" and steps[0].unlocked == ()
    # then p and r each unlock 1 core (a, b); r blocks 1.5 cores in all, p 1
    assert [s.image.split("/")[-1] for s in steps[1:]] == ["r:latest", "p:latest", "s:latest"]
    # equal in everything: the name decides
    equal = report([pod("a", ["q2"], 1000), pod("b", ["q1"], 1000)], {"q1": AMD, "q2": AMD})
    assert equal.plan is not None
    assert [s.image for s in equal.plan.steps] == ["docker.io/library/q1:latest", "docker.io/library/q2:latest"]


def test_only_workloads_whose_images_could_all_be_inspected_count() -> None:
    digest = "sha256:" + "b" * 64
    lookups = {
        "x": AMD,
        "nginx:1": AMD,
        "docker.io/library/nginx:1": AMD,
        f"reg.io/a:1@{digest}": AMD,
        f"reg.io/a:2@{digest}": AMD,
        "broken": LookupFailure("503"),
    }
    result = report(
        [
            pod("a", ["x", "broken"], 5000),  # blocked by x, but broken could block too: not planned
            pod("b", ["nginx:1"], 1000),
            pod("c", ["docker.io/library/nginx:1"], 1000),
            pod("d", [f"reg.io/a:1@{digest}", f"reg.io/a:2@{digest}"], 1000),
        ],
        lookups,
    )
    assert result.plan is not None
    steps = {s.image: s for s in result.plan.steps}
    assert set(steps) == {"docker.io/library/nginx:1", f"reg.io/a@{digest}"}  # one image per canonical reference
    assert len(steps["docker.io/library/nginx:1"].unlocked) == 2


def test_savings_today_and_after_each_step() -> None:
    lookups = {"x": AMD, "m": MULTI, "arm": ImagePlatforms.of("linux/arm64"), "broken": LookupFailure("503")}
    result = report(
        [
            pod("today", ["m"], 2000, namespace="a"),
            pod("later", ["x"], 1000, namespace="b"),
            pod("armonly", ["arm"], 4000, namespace="b"),  # runs only on the target: saves nothing
            pod("unknown", ["m", "broken"], 8000, namespace="c"),  # an image not inspected: saves nothing
        ],
        lookups,
        prices=PRICES,
    )
    per_core = 730 * (Fraction(4, 100) - Fraction(3, 100))
    per_gib = 730 * (Fraction(4, 1000) - Fraction(3, 1000))
    today, later = 2 * per_core + per_gib, per_core + per_gib
    savings = result.savings
    assert savings is not None and savings.target == "arm64"
    assert savings.monthly == today
    assert savings.by_namespace == {"a": today, "b": 0, "c": 0}
    plan = result.plan
    assert plan is not None and plan.monthly_saving == today
    assert [(s.image, s.monthly_saving) for s in plan.steps] == [("docker.io/library/x:latest", today + later)]
    doc = result.to_json()
    assert doc["savings"] == {"target": "arm64", "monthly": 15.33, "by_namespace": {"a": 15.33, "b": 0.0, "c": 0.0}}
    rows = {w["name"]: w for w in doc["workloads"]}
    assert rows["today"]["monthly_cost"] == {"amd64": 61.32, "arm64": 45.99}  # 2 cores and 1 GiB
    assert rows["later"]["monthly_cost"] == {"amd64": 32.12}
    assert rows["unknown"]["monthly_cost"] == {} and rows["unknown"]["monthly_saving"] == 0.0
    assert rows["later"]["monthly_saving"] == 8.03
    assert doc["plan"]["steps"][0] == {
        "image": "docker.io/library/x:latest",
        "unlocked_workloads": 1,
        "unlocked_cpu_cores": 1,
        "runnable_cpu_cores": 7,
        "monthly_saving": 23.36,
        "upgrade": None,
    }


def test_sums_come_from_unrounded_amounts() -> None:
    """Three workloads saving 0.3333… each: 1.00 in total, not 3 x 0.33."""
    prices = Prices(parse_prices("amd64=0.001456621004566210045662100456621,arm64=0"))
    third = Fraction(1, 3) / 730 / Fraction(1456621004566210045662100456621, 10**33)
    cpu = round(third * 1000)
    lookups = {"m": MULTI}
    result = report([pod(f"w{i}", ["m"], cpu, memory="0") for i in range(3)], lookups, prices=prices)
    doc = result.to_json()
    assert [w["monthly_saving"] for w in doc["workloads"]] == [0.33, 0.33, 0.33]
    assert doc["savings"]["monthly"] == 1.0


def test_upgrades_ride_on_the_steps() -> None:
    result = report([pod("a", ["x:1.0.0"], 1000)], {"x:1.0.0": AMD})
    assert result.plan is not None
    hinted = result.plan.with_upgrades({"docker.io/library/x:1.0.0": Upgrade("1.1.0", "docker.io/library/x:1.1.0")})
    assert hinted.steps[0].upgrade == Upgrade("1.1.0", "docker.io/library/x:1.1.0")
    assert hinted.to_json()["steps"][0]["upgrade"] == {"tag": "1.1.0", "image": "docker.io/library/x:1.1.0"}


# ------------------------------------------------------------------ against the naive greedy


def naive_order(workloads: dict[str, tuple[frozenset[str], int]]) -> list[tuple[str, int]]:
    """Recompute every gain from scratch at every step: slow, obviously right."""
    left = {image for images, _ in workloads.values() for image in images}
    done: set[str] = set()
    order = []
    while left:

        def key(image: str) -> tuple[int, int, str]:
            gain = sum(cpu for images, cpu in workloads.values() if images - done == {image})
            total = sum(cpu for images, cpu in workloads.values() if image in images)
            return (-gain, -total, image)

        best = min(left, key=key)
        order.append((best, -key(best)[0]))
        left.discard(best)
        done.add(best)
    return order


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sets(st.sampled_from("abcdefg"), min_size=0, max_size=4), st.sampled_from([0, 100, 250, 1000])),
        min_size=1,
        max_size=25,
    )
)
def test_the_plan_is_the_naive_greedy(spec: list[tuple[set[str], int]]) -> None:
    lookups: dict[str, Any] = {letter: AMD for letter in "abcdefg"}
    lookups["m"] = MULTI
    pods = [pod(f"w{i}", sorted(images) or ["m"], cpu) for i, (images, cpu) in enumerate(spec)]
    result = report(pods, lookups)
    assert result.plan is not None
    expected = naive_order(
        {
            f"w{i}": (frozenset(f"docker.io/library/{x}:latest" for x in images), cpu)
            for i, (images, cpu) in enumerate(spec)
        }
    )
    assert [(s.image, s.unlocked_cpu_millis) for s in result.plan.steps] == expected
    runnable = sum(cpu for images, cpu in spec if not images)
    assert result.plan.runnable_cpu_millis == runnable
    assert result.plan.steps == () or result.plan.steps[-1].runnable_cpu_millis == sum(cpu for _, cpu in spec)
