"""The walk of one admission through noe's code: how many times it moves from file to file.

Run: ``python bench/bench_walk.py [CHECKOUT]``. One warm ``AdmissionService.review`` of the 3-container pod of
``bench_admit.py`` (lookups from ``--image-platforms``) is traced with ``sys.setprofile``; each call or return
that lands in another of noe's files than the one the walk is in is a *stop*. Printed: the stops, the files
entered, the stops that return to a file already left, and the files entered most often. ``CHECKOUT`` (a
directory) runs the same walk on another checkout, for a "before" figure: the script imports from it.

Figures on this machine (the same pod):

BEFORE (ae0243f, this script run on that checkout)::

    stops 163, files 22, returns to a file already left 141
    most entered: noe_core/fields.py 29, noe_core/workload.py 27, noe_core/policy.py 16, noe_core/admission.py 13

AFTER (the one pipeline, read once)::

    stops 131, files 26, returns to a file already left 105
    most entered: noe_web/webhook/admission.py 16, noe_core/placement/rules.py 15, admission/admitting.py 12,
    placement/pipeline.py 10, placement/scheduling.py 9, k8s/workload.py 8 (util/fields.py: only for a malformed
    field)
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

CHECKOUT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT))

IMAGES = ["registry.example/app:1", "registry.example/sidecar:2", "registry.example/init:3"]
PLATFORMS = {
    IMAGES[0]: ["linux/amd64", "linux/arm64/v8", "linux/arm/v7"],
    IMAGES[1]: ["linux/amd64", "linux/arm64"],
    IMAGES[2]: ["linux/amd64", "linux/arm64", "unknown/unknown"],
}


def _service() -> Any:
    """``AdmissionService`` of whichever checkout is on the path (module paths moved between releases)."""
    import logging

    from noe_core import testing
    from noe_web.metrics import Metrics
    from noe_web.webhook.admission import AdmissionService

    try:
        from noe_core.image.declared import StaticPlatforms
        from noe_core.policies.settings import PolicySettings
    except ImportError:  # before the folders
        from noe_core.platforms_file import StaticPlatforms  # type: ignore[no-redef]
        from noe_core.settings import PolicySettings  # type: ignore[no-redef]
    logging.getLogger("noe").setLevel(logging.INFO)
    logging.getLogger("noe").addHandler(logging.NullHandler())
    logging.getLogger("noe").propagate = False
    service = AdmissionService(
        policy=PolicySettings(), metrics=Metrics(), static=StaticPlatforms.from_mapping(PLATFORMS)
    )
    pod = testing.pod(images=IMAGES[:2], init_images=IMAGES[2:], labels={"app": "web"})
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return service, json.dumps(testing.admission_review(pod, uid="bench"))


def walk() -> list[str]:
    service, body = _service()
    for _ in range(3):
        service.review(json.loads(body))  # warm: caches filled, modules imported
    roots = (str(CHECKOUT / "noe_core"), str(CHECKOUT / "noe_web"))
    files: list[str] = []

    def trace(frame: FrameType, event: str, _arg: object) -> None:
        if event not in ("call", "return"):
            return
        target = frame if event == "call" else frame.f_back
        name = target.f_code.co_filename if target is not None else ""
        if name.startswith(roots) and (not files or files[-1] != name):
            files.append(name)

    doc = json.loads(body)
    sys.setprofile(trace)
    try:
        service.review(doc)
    finally:
        sys.setprofile(None)
    return files


def main() -> None:
    files = walk()
    seen: set[str] = set()
    returns = 0
    for name in files:
        if name in seen:
            returns += 1
        seen.add(name)
    entered = Counter(files)
    shown = ", ".join(f"{Path(name).relative_to(CHECKOUT)} {count}" for name, count in entered.most_common(6))
    print(f"stops {len(files)}, files {len(seen)}, returns to a file already left {returns}")
    print(f"most entered: {shown}")


if __name__ == "__main__":
    main()
