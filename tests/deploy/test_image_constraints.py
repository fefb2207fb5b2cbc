"""deploy/image/constraints.txt pins every runtime dependency the package declares.

The image build installs ``.[web]`` under these constraints, and the image tests
(slow: a real build) compare the image's SBOM with them. This check needs no build:
a dependency added to setup.cfg without its pin fails here, in seconds.
"""

from __future__ import annotations

import configparser
import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.paths import ROOT


def _runtime_pins() -> dict[str, Version]:
    text = (ROOT / "deploy" / "image" / "constraints.txt").read_text()
    runtime = text.split("# runtime\n", 1)[1].split("\n\n", 1)[0]
    pins = {}
    for line in runtime.splitlines():
        name, version = line.split("==")
        pins[canonicalize_name(name)] = Version(version)
    return pins


def _declared(*extras: str) -> list[Requirement]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    for extra in extras:
        lines += config["options.extras_require"][extra].splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.strip().startswith("#")]


def _image_extras() -> tuple[str, ...]:
    """The extras the Dockerfile installs (``pip install ".[web,tracing]"``)."""
    found = re.search(r'pip install "\.\[([a-z,]+)\]"', (ROOT / "Dockerfile").read_text())
    assert found, "the Dockerfile installs no .[extras]"
    return tuple(found.group(1).split(","))


def test_every_dependency_of_the_image_is_pinned_in_the_runtime_group_at_a_version_it_accepts() -> None:
    pins = _runtime_pins()
    assert _image_extras() == ("web", "tracing")
    declared = _declared(*_image_extras())
    assert declared, "setup.cfg declares no runtime dependency?"
    missing = [str(r) for r in declared if canonicalize_name(r.name) not in pins]
    assert missing == [], "add these to deploy/image/constraints.txt's runtime group"
    pinned = {str(r): pins[canonicalize_name(r.name)] for r in declared}
    refused = {req: str(version) for req, version in pinned.items() if version not in Requirement(req).specifier}
    assert refused == {}, "pinned at a version setup.cfg does not accept"


def test_the_runtime_group_is_sorted_and_has_one_pin_per_distribution() -> None:
    text = (ROOT / "deploy" / "image" / "constraints.txt").read_text()
    runtime = text.split("# runtime\n", 1)[1].split("\n\n", 1)[0].splitlines()
    names = [canonicalize_name(line.split("==")[0]) for line in runtime]
    assert names == sorted(set(names))
