"""Platforms: alias normalisation, equality that ignores meaningless variants, the text form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noe_core.errors import InvalidInput, InvalidPlatform
from noe_core.image.platform import (
    KNOWN_ARCHITECTURES,
    OsVersion,
    Platform,
    normalize_architecture,
    normalize_os,
    parse_platform,
    x86_64_level,
)

SAME = [
    # two spellings of one platform
    ("linux/arm64/v8", "linux/arm64"),
    ("linux/aarch64", "linux/arm64"),
    ("linux/aarch64/v8", "linux/arm64"),
    ("linux/arm64/8", "linux/arm64/v8"),
    ("linux/x86_64", "linux/amd64"),
    ("linux/x86-64", "linux/amd64"),
    ("linux/amd64/v1", "linux/amd64"),
    ("linux/armhf", "linux/arm/v7"),
    ("linux/arm", "linux/arm/v7"),
    ("linux/armv7l", "linux/arm/v7"),
    ("linux/arm/7", "linux/arm/v7"),
    ("linux/armel", "linux/arm/v6"),
    ("linux/armv6l", "linux/arm/v6"),
    ("linux/i386", "linux/386"),
    ("linux/i686", "linux/386"),
    ("linux/x86", "linux/386"),
    ("linux/ppc64el", "linux/ppc64le"),
    ("Linux/AMD64", "linux/amd64"),
    ("macos/arm64", "darwin/arm64"),
    ("windows(10.0.17763.5122)/x86_64", "windows(10.0.17763.5122)/amd64"),
    ("arm64/v8", "arm64"),
    ("aarch64", "arm64"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_aliases_compare_equal(a: str, b: str) -> None:
    pa, pb = parse_platform(a), parse_platform(b)
    assert pa == pb
    assert hash(pa) == hash(pb)
    assert pa.key() == pb.key()


DIFFERENT = [
    ("linux/arm/v7", "linux/arm/v6"),
    ("linux/arm64", "linux/arm/v8"),
    ("linux/amd64", "linux/386"),
    ("linux/amd64", "windows/amd64"),
    ("windows(10.0.17763.5122)/amd64", "windows(10.0.20348.2340)/amd64"),
    ("windows(10.0.17763.5122)/amd64", "windows/amd64"),
    ("linux/amd64", "amd64"),  # no OS is not the same as linux
    ("linux/amd64/v3", "linux/amd64"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_platforms(a: str, b: str) -> None:
    assert parse_platform(a) != parse_platform(b)


PARSED = [
    # text, os, architecture, variant, os.version, str()
    ("linux/arm64/v8", "linux", "arm64", "v8", "", "linux/arm64/v8"),  # keeps the variant the registry wrote
    ("linux/amd64", "linux", "amd64", "", "", "linux/amd64"),
    ("linux/x86_64", "linux", "amd64", "", "", "linux/amd64"),
    ("linux/x86-64", "linux", "amd64", "", "", "linux/amd64"),
    ("linux/aarch64", "linux", "arm64", "", "", "linux/arm64"),
    ("linux/armhf", "linux", "arm", "v7", "", "linux/arm/v7"),
    ("linux/armel", "linux", "arm", "v6", "", "linux/arm/v6"),
    ("linux/i386", "linux", "386", "", "", "linux/386"),
    ("linux/s390x", "linux", "s390x", "", "", "linux/s390x"),
    ("linux/riscv64", "linux", "riscv64", "", "", "linux/riscv64"),
    ("windows(10.0.17763.5122)/amd64", "windows", "amd64", "", "10.0.17763.5122", "windows(10.0.17763.5122)/amd64"),
    ("arm64", "", "arm64", "", "", "arm64"),
    ("x86_64", "", "amd64", "", "", "amd64"),
    ("arm/v6", "", "arm", "v6", "", "arm/v6"),
    ("arm64/v8", "", "arm64", "v8", "", "arm64/v8"),
    ("freebsd/amd64", "freebsd", "amd64", "", "", "freebsd/amd64"),
    ("linux/arm64/v9.0", "linux", "arm64", "v9", "", "linux/arm64/v9"),
]


@pytest.mark.parametrize(("text", "os", "arch", "variant", "os_version", "shown"), PARSED)
def test_parse_platform(text: str, *, os: str, arch: str, variant: str, os_version: str, shown: str) -> None:
    platform = parse_platform(text)
    assert (platform.os, platform.architecture, platform.variant, platform.os_version) == (
        os,
        arch,
        variant,
        os_version,
    )
    assert str(platform) == shown
    assert parse_platform(str(platform)) == platform


BAD = [
    # text, a fragment of the reason
    ("", "empty"),
    (" linux/amd64", "whitespace"),
    ("linux/amd64\n", "whitespace"),
    ("linux/", "empty architecture"),
    ("/amd64", "empty os"),
    ("linux//v7", "empty architecture"),
    ("linux/arm/", "empty variant"),
    ("linux/arm/v7/extra", "expected os/architecture[/variant]"),
    ("linux/am d64", "characters outside"),
    ("linux/amd64!", "characters outside"),
    ("lin ux/amd64", "characters outside"),
    ("windows()/amd64", "empty os.version"),
    ("windows(10/amd64", "characters outside"),
    ("arm64/v 8", "characters outside"),
    ("linux@/amd64", "characters outside"),
]


@pytest.mark.parametrize(("text", "reason"), BAD)
def test_bad_platforms(text: str, reason: str) -> None:
    with pytest.raises(InvalidPlatform) as info:
        parse_platform(text)
    assert reason in info.value.reason
    assert info.value.platform == text


def test_not_a_string() -> None:
    with pytest.raises(InvalidPlatform, match="must be a string"):
        parse_platform(["linux", "amd64"])  # type: ignore[arg-type]


def test_invalid_platform_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse_platform("a/b/c/d")


@pytest.mark.parametrize(
    ("arch", "variant", "expected"),
    [
        ("x86_64", "", ("amd64", "")),
        ("AMD64", "V1", ("amd64", "")),
        ("amd64", "v2", ("amd64", "v2")),
        ("aarch64", "", ("arm64", "")),
        ("arm64", "8", ("arm64", "v8")),
        ("arm64", "8.0", ("arm64", "v8")),
        ("arm64", "9", ("arm64", "v9")),
        ("armhf", "", ("arm", "v7")),
        ("armel", "", ("arm", "v6")),
        ("armv5l", "", ("arm", "v5")),
        ("armv8l", "", ("arm", "v8")),
        ("arm", "6", ("arm", "v6")),
        ("i386", "", ("386", "")),
        ("i686", "x", ("386", "")),
        ("ppc64el", "", ("ppc64le", "")),
        (" mips64le ", "", ("mips64le", "")),
    ],
)
def test_normalize_architecture(arch: str, variant: str, expected: tuple[str, str]) -> None:
    assert normalize_architecture(arch, variant) == expected


def test_normalize_os() -> None:
    assert normalize_os(" Linux ") == "linux"
    assert normalize_os("macOS") == "darwin"
    assert normalize_os("windows") == "windows"


def test_of_normalises_and_keeps_os_version() -> None:
    platform = Platform.of("Windows", "x86_64", os_version=" 10.0.20348.2340 ", os_features=("win32k",))
    assert platform == Platform("windows", "amd64", "", "10.0.20348.2340")
    assert platform.os_features == ("win32k",)
    assert Platform.of() == Platform("", "")


@pytest.mark.parametrize(
    ("platform", "unknown", "complete"),
    [
        (Platform.of("linux", "amd64"), False, True),
        (Platform.of("unknown", "unknown"), True, False),
        (Platform.of("linux", "unknown"), True, False),
        (Platform.of("", "arm64"), False, False),
        (Platform.of("linux", ""), False, False),
    ],
)
def test_unknown_and_complete(platform: Platform, unknown: bool, complete: bool) -> None:
    assert platform.is_unknown is unknown
    assert platform.is_complete is complete


def test_to_json() -> None:
    assert parse_platform("linux/arm64/v8").to_json() == {"os": "linux", "architecture": "arm64", "variant": "v8"}
    assert parse_platform("windows(10.0.1)/amd64").to_json() == {
        "os": "windows",
        "architecture": "amd64",
        "os.version": "10.0.1",
    }


def test_sets_and_sorting_use_the_key() -> None:
    found = {parse_platform(t) for t in ("linux/arm64", "linux/arm64/v8", "linux/aarch64", "linux/amd64")}
    assert len(found) == 2
    assert str(min(found)) == "linux/amd64"


def test_frozen() -> None:
    platform = parse_platform("linux/amd64")
    with pytest.raises(AttributeError):
        platform.os = "windows"  # type: ignore[misc]


# --- property tests ---------------------------------------------------------------------------

_word = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,8}", fullmatch=True)
_os = st.one_of(st.sampled_from(["linux", "windows", "darwin", "freebsd"]), _word)
_arch = st.one_of(
    st.sampled_from([*sorted(KNOWN_ARCHITECTURES), "x86_64", "aarch64", "armhf", "armel", "i386", "ppc64el"]),
    _word,
)
_version = st.from_regex(r"[0-9][0-9.]{0,12}", fullmatch=True)


@given(os=_os, arch=_arch, variant=st.none() | _word, version=st.none() | _version)
def test_text_form_round_trips(os: str, arch: str, variant: str | None, version: str | None) -> None:
    text = os + (f"({version})" if version else "") + f"/{arch}" + (f"/{variant}" if variant else "")
    platform = parse_platform(text)
    assert parse_platform(str(platform)) == platform
    assert str(parse_platform(str(platform))) == str(platform)


@given(st.text(max_size=40))
def test_arbitrary_text_raises_only_invalid_platform(text: str) -> None:
    try:
        platform = parse_platform(text)
    except InvalidPlatform:
        return
    assert isinstance(platform, Platform)


# --- the typed parts: Windows os.version and the x86-64 level --------------------------------------


@pytest.mark.parametrize(
    ("text", "build", "shown"),
    [
        ("10.0.20348.2340", "10.0.20348", "10.0.20348.2340"),
        ("10.0.17763", "10.0.17763", "10.0.17763"),
        ("10.0.020348.7", "10.0.20348", "10.0.20348.7"),
    ],
)
def test_windows_versions_read_as_numbers(text: str, build: str, shown: str) -> None:
    version = OsVersion.parse(text)
    assert version.build == build and str(version) == shown
    assert OsVersion.parse(str(version)) == version


@pytest.mark.parametrize("text", ["", "10.0", "10.0.x.1", "ltsc2022", "1.2.3.4.5", "10.0.1-beta", "1" * 11 + ".0.1"])
def test_other_os_versions_are_refused(text: str) -> None:
    with pytest.raises(InvalidPlatform, match=r"major\.minor\.build"):
        OsVersion.parse(text)


def test_windows_builds_sort_by_number() -> None:
    assert OsVersion.parse("10.0.9999") < OsVersion.parse("10.0.17763.1") < OsVersion.parse("10.0.17763.2")


def test_containerd_spelling_parses_and_prints_with_its_typed_parts() -> None:
    platform = parse_platform("windows(10.0.20348.2340)/amd64")
    assert str(platform) == "windows(10.0.20348.2340)/amd64"
    assert platform.version == OsVersion(10, 0, 20348, 2340) and platform.level == 1
    assert parse_platform("linux/amd64").version is None
    with pytest.raises(InvalidPlatform):
        _ = parse_platform("windows(ltsc2022)/amd64").version


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("linux/amd64", 1),
        ("linux/amd64/v1", 1),
        ("linux/amd64/v2", 2),
        ("linux/x86_64/v3", 3),
        ("linux/amd64/v4", 4),
        ("linux/amd64/v5", None),
        ("linux/arm64/v8", None),  # levels are an x86-64 notion
    ],
)
def test_x86_64_levels(text: str, level: int | None) -> None:
    assert parse_platform(text).level == level


def test_level_of_a_variant() -> None:
    assert [x86_64_level(v) for v in ("", "v1", "V3", "v4", "v5", "x")] == [1, 1, 3, 4, None, None]


def test_architecture_aliases_read_as_the_platform_reader_reads_them() -> None:
    """The policy CRD's enum lists these aliases; noe normalises each to the GOARCH name it stands for."""
    from noe_core.image.platform import ARCHITECTURE_ALIASES, KNOWN_ARCHITECTURES, normalize_arch_name

    for alias, name in ARCHITECTURE_ALIASES.items():
        assert name in KNOWN_ARCHITECTURES and alias not in KNOWN_ARCHITECTURES
        assert normalize_arch_name(alias) == name, alias
