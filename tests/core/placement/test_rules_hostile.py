"""Values from outside never reach a patch unchecked, and text from outside is shown, never acted on."""

from __future__ import annotations

import pytest

from noe_core import testing
from noe_core.image.image_platforms import ImagePlatforms
from noe_core.image.platform import Platform
from noe_core.placement.messages import MAX_MESSAGE, MAX_WARNING, MAX_WARNINGS
from noe_core.placement.pipeline import decide
from noe_core.policies.settings import PolicySettings


def _decide(pod: dict[str, object], lookups: dict[str, object], **settings: object) -> object:
    return decide(
        pod,
        kind="Pod",
        operation="CREATE",
        namespace="apps",
        lookups=lookups,  # type: ignore[arg-type]
        settings=PolicySettings(**settings),
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("architecture", ["ARM64 --evil!", "arm64;reboot", "a" * 300, "arm 64", "-arm64"])
def test_an_architecture_that_is_no_label_value_never_reaches_the_patch(architecture: str) -> None:
    hostile = ImagePlatforms((Platform.of("linux", "amd64"), Platform.of("linux", architecture)))
    decision = _decide(testing.pod(["app:1"]), {"app:1": hostile})
    assert decision.allowed and decision.common == ("amd64",)  # type: ignore[attr-defined]
    for op in decision.patch:  # type: ignore[attr-defined]
        assert architecture.lower() not in str(op["value"])
    assert any("is not a valid label value: ignored" in w for w in decision.warnings)  # type: ignore[attr-defined]


def test_an_image_with_only_unusable_entries_cannot_be_inspected_and_strict_denies_it() -> None:
    hostile = {"app:1": ImagePlatforms((Platform.of("linux", "arm64;reboot"),))}
    decision = _decide(testing.pod(["app:1"]), hostile)
    assert decision.allowed and not decision.changed  # type: ignore[attr-defined]
    assert any(
        w.startswith(
            "cannot inspect app:1: its manifest names no usable platform (not label values: linux/arm64;reboot"
        )
        for w in decision.warnings
    )  # type: ignore[attr-defined]
    strict = _decide(testing.pod(["app:1"]), hostile, strict_namespaces=frozenset({"apps"}))
    assert not strict.allowed  # type: ignore[attr-defined]
    assert "arm64;reboot" in strict.message  # type: ignore[attr-defined]


def test_variant_and_os_are_checked_too() -> None:
    hostile = ImagePlatforms(
        (Platform.of("linux", "amd64"), Platform.of("linux", "arm", "v7 x"), Platform.of("linux\x1b[2J", "arm64"))
    )
    decision = _decide(testing.pod(["app:1"]), {"app:1": hostile})
    assert decision.common == ("amd64",)  # type: ignore[attr-defined]


def test_control_and_bidi_characters_are_escaped_in_warnings_and_deny_messages() -> None:
    image = "evil\x1b[2J\u202eimage:1"
    decision = _decide(testing.pod([image]), {})
    (warning,) = decision.warnings  # type: ignore[attr-defined]
    assert "\x1b" not in warning and "\u202e" not in warning
    assert "evil\\x1b[2J\\u202eimage:1" in warning and len(warning) <= MAX_WARNING
    denied = _decide(
        testing.pod([image, "x86:1"]),
        {image: ImagePlatforms.of("linux/arm64"), "x86:1": ImagePlatforms.of("linux/amd64")},
    )
    assert not denied.allowed  # type: ignore[attr-defined]
    assert "\x1b" not in denied.message and "evil\\x1b[2J\\u202eimage:1: arm64" in denied.message  # type: ignore


def test_a_deny_message_stays_bounded_and_counts_what_it_leaves_out() -> None:
    images = [f"registry.example/team/app-{i}:1" for i in range(5_000)]
    lookups = {image: ImagePlatforms.of("linux/arm64" if i % 2 else "linux/amd64") for i, image in enumerate(images)}
    decision = _decide(testing.pod(images), lookups)
    message = decision.message  # type: ignore[attr-defined]
    assert not decision.allowed and len(message) <= MAX_MESSAGE  # type: ignore[attr-defined]
    assert message.startswith("no CPU architecture is supported by every image")
    assert message.endswith("more images") and "registry.example/team/app-0:1: amd64" in message


def test_warnings_are_capped_with_a_count_of_the_rest() -> None:
    images = [f"img{i}:1" for i in range(100)]
    decision = _decide(testing.pod(images), {})
    warnings = decision.warnings  # type: ignore[attr-defined]
    assert len(warnings) == MAX_WARNINGS
    assert warnings[-1] == f"... and {100 - MAX_WARNINGS + 1} more warnings (noe's log has every image)"
