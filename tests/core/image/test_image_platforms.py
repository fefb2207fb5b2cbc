"""ImagePlatforms, the one shape of a lookup from the resolver to the policy, and rule 4's reading of it."""

from __future__ import annotations

import pytest

from noe_core.image.image_platforms import ImagePlatforms, LookupFailure, LookupRequest, ResolvedPlatform, fixed
from noe_core.image.offer import PlatformScope
from noe_core.image.platform import Platform


def test_rule_4s_settings_independent_reading_is_computed_once_per_value() -> None:
    listed = ImagePlatforms.of("linux/amd64", "linux/arm64/v8", "unknown/unknown", "x86_64").platforms
    found = ImagePlatforms((*listed, Platform("linux", ""), Platform("linux", "arm64;reboot")))
    assert found.offered == ("amd64", "linux/amd64", "linux/arm64/v8")
    assert found.arch_os == (("amd64", "linux"), ("arm64", "linux"), ("amd64", ""))
    assert found.incomplete == ("amd64", "linux/")  # no OS, no architecture
    assert found.unusable == ("linux/arm64;reboot",)
    assert found.arch_os is found.arch_os and found.offered is found.offered  # cached on the value


def test_rule_4_for_given_settings_is_remembered_per_value() -> None:
    found = ImagePlatforms.of("linux/amd64", "linux/arm64", "windows/s390x", "riscv64")
    linux, windows = PlatformScope(("linux",)), PlatformScope(("windows",))
    assert found.offer(linux).architectures == ("amd64", "arm64", "riscv64")
    assert found.offer(PlatformScope(("linux",), frozenset({"arm64", "s390x"}))).architectures == ("arm64",)
    assert found.offer(windows).architectures == ("riscv64", "s390x")
    assert found.offer(linux) is found.offer(PlatformScope(("linux",)))
    both = found.offer(PlatformScope(("linux", "windows")))
    assert both.pairs == {
        ("linux", "amd64"),
        ("linux", "arm64"),
        ("linux", "riscv64"),
        ("windows", "riscv64"),
        ("windows", "s390x"),
    }


def test_a_registry_answer_pairs_each_platform_with_its_manifest() -> None:
    amd, arm = Platform("linux", "amd64"), Platform("linux", "arm64", "v8")
    found = ImagePlatforms((amd, arm), "sha256:i", "application/vnd.oci.image.index.v1+json", ("sha256:a", "sha256:b"))
    assert found.resolved == (ResolvedPlatform(amd, "sha256:a"), ResolvedPlatform(arm, "sha256:b"))
    assert ImagePlatforms((amd,)).resolved == (ResolvedPlatform(amd, ""),)
    with pytest.raises(ValueError, match="1 manifest digests for 2 platforms"):
        ImagePlatforms((amd, arm), manifests=("sha256:a",))


def test_fixed_answers_only_what_it_was_given() -> None:
    answers = {"a:1": ImagePlatforms.of("linux/amd64"), "b:1": LookupFailure("404")}
    result = fixed(answers)(LookupRequest(("a:1", "b:1", "c:1")))
    assert dict(result.lookups) == answers and result.warnings == ()


def test_the_resolvers_former_answer_name_still_imports_as_the_one_shape() -> None:
    import noe_core

    assert noe_core.ImageInfo is noe_core.ImagePlatforms and noe_core.ResolvedPlatform is ResolvedPlatform
