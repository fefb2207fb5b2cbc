"""In-process cost of one admission, as a ratio to the JSON round trip of the same AdmissionReview.

Run: ``python bench/bench_admit.py [ROUNDS]``. Prints, for a 3-container pod
whose images are all answered at once (a warm cache):

* ``json``    — ``json.loads`` of the AdmissionReview bytes + ``json.dumps`` of the answer: the floor
  any webhook pays;
* ``admit``   — :func:`noe_core.admission.admitting.admit` (read the pod once, place it, build the answer with
  the policy's own patch) on the decoded document;
* ``review``  — :meth:`noe_web.webhook.admission.AdmissionService.review`: ``admit`` plus what the
  webhook adds (deadline, metrics, one log line), lookups from ``--image-platforms``;

each as the median of ROUNDS timed calls, and the ratios admit/json and review/json (the median
of 7 rounds' ratios). On a checkout that predates ``admit`` it times the older path (images_to_inspect,
decide, review_response), so the same file gives the "before" figure.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from noe_core import admission as admission_module
from noe_core import testing
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.policies.settings import PolicySettings

IMAGES = ["registry.example/app:1", "registry.example/sidecar:2", "registry.example/init:3"]
PLATFORMS = {
    IMAGES[0]: ["linux/amd64", "linux/arm64/v8", "linux/arm/v7"],
    IMAGES[1]: ["linux/amd64", "linux/arm64"],
    IMAGES[2]: ["linux/amd64", "linux/arm64", "unknown/unknown"],
}


def _review_bytes() -> bytes:
    pod = testing.pod(images=IMAGES[:2], init_images=IMAGES[2:], labels={"app": "web"})
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return json.dumps(testing.admission_review(pod, uid="bench")).encode()


def _median_us(fn: Callable[[], Any], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def _admit_callable(settings: PolicySettings) -> Callable[[dict[str, Any]], dict[str, Any]]:
    lookups = {image: ImagePlatforms.of(*platforms) for image, platforms in PLATFORMS.items()}
    if hasattr(admission_module, "admit"):
        from noe_core.image.image_platforms import fixed

        inspect = fixed(lookups)

        def run(doc: dict[str, Any]) -> dict[str, Any]:
            request = admission_module.parse_admission_review(doc)
            return admission_module.admit(request, settings, inspect).response

        return run
    from noe_core.placement.pipeline import decide
    from noe_core.placement.rules import images_to_inspect  # the path before admit

    def run_before(doc: dict[str, Any]) -> dict[str, Any]:
        request = admission_module.parse_admission_review(doc)
        images = images_to_inspect(request.obj, kind=request.kind, operation=request.operation)
        decision = decide(
            request.obj,
            kind=request.kind,
            operation=request.operation,
            namespace=request.namespace,
            lookups={i: lookups[i] for i in images},
            settings=settings,
        )
        return admission_module.review_response(request, decision)

    return run_before


def _service_review() -> Callable[[dict[str, Any]], dict[str, Any]]:
    from noe_core.image.declared import StaticPlatforms
    from noe_web.metrics import Metrics
    from noe_web.webhook.admission import AdmissionService

    logging.getLogger("noe").setLevel(logging.INFO)
    logging.getLogger("noe").addHandler(logging.NullHandler())
    logging.getLogger("noe").propagate = False
    service = AdmissionService(
        policy=PolicySettings(), metrics=Metrics(), static=StaticPlatforms.from_mapping(PLATFORMS)
    )
    return service.review


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    body = _review_bytes()
    settings = PolicySettings()
    admit = _admit_callable(settings)
    review = _service_review()
    doc = json.loads(body)
    answer = admit(doc)
    assert answer["response"]["allowed"] and "patch" in answer["response"], answer
    assert review(json.loads(body))["response"] == answer["response"]

    # Neither admit nor review edits the document, so both are timed on one decoded copy. The three are
    # timed in turn, 7 times, and each ratio is the median of the 7 taken a moment apart: a shared
    # machine's load then weighs on both sides of a ratio alike.
    times: dict[str, list[float]] = {"json": [], "admit": [], "review": []}
    for _ in range(7):
        times["json"].append(_median_us(lambda: json.dumps(json.loads(body)), rounds))
        times["admit"].append(_median_us(lambda: admit(doc), rounds))
        times["review"].append(_median_us(lambda: review(doc), rounds))

    def ratio(name: str) -> float:
        return statistics.median(t / j for t, j in zip(times[name], times["json"], strict=True))

    label = "admit" if hasattr(admission_module, "admit") else "decide (before admit)"
    print(f"3-container pod, warm lookups, medians of {rounds} calls, 7 rounds, {len(body)} bytes of JSON")
    print(f"{'json.loads + json.dumps':34} {statistics.median(times['json']):8.1f} us")
    print(f"{label:34} {statistics.median(times['admit']):8.1f} us   x{ratio('admit'):.2f} of json")
    review_us = statistics.median(times["review"])
    print(f"{'AdmissionService.review':34} {review_us:8.1f} us   x{ratio('review'):.2f} of json")


if __name__ == "__main__":
    main()
