"""Rule 4 per image with rules 14-17: readings, strict problems, warnings and the deny message users see."""

from __future__ import annotations

from noe_core import testing
from noe_core.image.image_platforms import ImagePlatforms, LookupFailure
from noe_core.image.offer import PlatformScope
from noe_core.image.platform import Platform
from noe_core.placement.image_reading import (
    NOT_INSPECTED,
    Artifact,
    deny_message,
    note_images,
    read_image,
    read_images,
    strict_problems,
    warn_levels,
)
from noe_core.placement.messages import Notes
from noe_core.placement.needs import shared

LINUX = PlatformScope()
BOTH = PlatformScope(("linux", "windows"))
CHART = ImagePlatforms.artifact("application/vnd.cncf.helm.config.v1+json", digest="sha256:c")
LOOKUPS = {
    **testing.platforms(
        {
            "multi:1": ["linux/amd64", "linux/arm64/v8", "windows(10.0.20348.2227)/amd64"],
            "v3:1": ["linux/amd64/v3", "linux/arm64"],
            "win:1": ["windows(10.0.17763.5458)/amd64"],
            "broken:1": "registry answered 503",
        }
    ),
    "chart:1": CHART,
    "badwin:1": ImagePlatforms((Platform("windows", "amd64", "", "ltsc2022"), Platform("linux", "amd64"))),
}


def test_readings() -> None:
    assert read_image(None, LINUX) is NOT_INSPECTED
    assert read_image(LOOKUPS["broken:1"], LINUX) == LookupFailure("registry answered 503")
    assert read_image(CHART, LINUX) == Artifact("application/vnd.cncf.helm.config.v1+json", False)
    assert read_image(CHART, LINUX, volume=True) == Artifact("application/vnd.cncf.helm.config.v1+json", True)
    assert read_image(ImagePlatforms(()), LINUX) == LookupFailure("its manifest names no platform")
    multi = read_image(LOOKUPS["multi:1"], BOTH)
    assert not isinstance(multi, LookupFailure | Artifact)
    assert multi.shown(BOTH) == "linux/amd64, linux/arm64, windows/amd64 build 10.0.20348"
    assert read_image(LOOKUPS["multi:1"], LINUX).shown(LINUX) == "amd64, arm64"  # type: ignore[union-attr]


def test_artifacts_as_volumes_are_silent_and_as_containers_warned_or_strict() -> None:
    readings = read_images(("multi:1", "chart:1"), LOOKUPS, LINUX, volumes={"chart:1"})
    out = Notes()
    note_images(readings, LOOKUPS, LINUX, out)
    assert out.warning_list() == ()
    assert "image volume chart:1 is an artifact (application/vnd.cncf.helm.config.v1+json): constrains nothing" in (
        out.reasons
    )
    assert strict_problems(readings, LOOKUPS) == []
    as_container = read_images(("multi:1", "chart:1"), LOOKUPS, LINUX)
    out = Notes()
    note_images(as_container, LOOKUPS, LINUX, out)
    assert out.warning_list() == ("chart:1 is an artifact, not a container image: it cannot run",)
    assert strict_problems(as_container, LOOKUPS) == [
        "image chart:1 is an artifact (application/vnd.cncf.helm.config.v1+json), not a container image"
    ]


def test_a_windows_version_that_is_no_build_is_warned_and_strict() -> None:
    readings = read_images(("badwin:1",), LOOKUPS, BOTH)
    out = Notes()
    note_images(readings, LOOKUPS, BOTH, out)
    assert out.warning_list() == ("badwin:1: platform windows(ltsc2022)/amd64 has no Windows build: ignored",)
    assert strict_problems(readings, LOOKUPS) == [
        "image badwin:1 has Windows entries whose os.version is not a build: windows(ltsc2022)/amd64"
    ]


def test_levels_off_warns_the_level_an_image_needs_while_amd64_is_possible() -> None:
    readings = read_images(("v3:1", "multi:1"), LOOKUPS, LINUX)
    out = Notes()
    _, leveled = note_images(readings, LOOKUPS, LINUX, out)
    assert leveled == ("v3:1",)
    common = shared([r for r in readings.values() if not isinstance(r, LookupFailure | Artifact)])
    warn_levels(leveled, LOOKUPS, common, out)
    assert out.warning_list() == ("v3:1 needs x86-64-v3 on amd64; not required (--x86-64-levels off)",)
    arm_only = shared([read_image(ImagePlatforms.of("linux/arm64"), LINUX)])  # type: ignore[list-item]
    quiet = Notes()
    warn_levels(leveled, LOOKUPS, arm_only, quiet)
    assert quiet.warning_list() == ()


def test_the_deny_message_lists_each_images_platforms() -> None:
    readings = read_images(("multi:1", "win:1", "broken:1", "chart:1"), LOOKUPS, BOTH, volumes={"chart:1"})
    assert deny_message(readings, LOOKUPS, BOTH) == (
        "no platform is supported by every image (OS linux, windows): "
        "multi:1: linux/amd64, linux/arm64, windows/amd64 build 10.0.20348; "
        "win:1: windows/amd64 build 10.0.17763; broken:1: not inspected (registry answered 503)"
    )
    linux = read_images(("v3:1", "win:1"), LOOKUPS, LINUX)
    assert deny_message(linux, LOOKUPS, LINUX) == (
        "no CPU architecture is supported by every image (OS linux): v3:1: amd64, arm64; "
        "win:1: none usable (offers windows(10.0.17763.5458)/amd64)"
    )
