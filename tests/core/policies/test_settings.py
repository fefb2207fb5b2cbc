"""Settings: flag syntax, normalisation and the start-up checks of the contract."""

from __future__ import annotations

import pytest

from noe_core.errors import InvalidSettings
from noe_core.policies.settings import (
    PREFERRED_ARCH_LABEL,
    ArchToleration,
    PolicySettings,
    parse_arch_tolerations,
)


def test_defaults_follow_the_contract() -> None:
    settings = PolicySettings().validate()
    assert settings.preferred_arch == "amd64"
    assert settings.schedulable_archs == frozenset()
    assert settings.system_os == ("linux",)
    assert settings.x86_64_levels == "off"
    assert settings.preference_mode == "soft"
    assert settings.preferred_arch_weight == 100
    assert settings.is_schedulable("riscv64")
    assert PREFERRED_ARCH_LABEL == "arch.noe.adevinta.com/preferred"


def test_arch_names_are_normalised() -> None:
    settings = PolicySettings(preferred_arch="x86_64", schedulable_archs=frozenset({"aarch64", "AMD64"}))
    assert settings.preferred_arch == "amd64"
    assert settings.schedulable_archs == {"arm64", "amd64"}
    settings.validate()


def test_preferred_must_be_schedulable_when_a_list_is_set() -> None:
    with pytest.raises(InvalidSettings, match="--preferred-arch amd64 is not in --cluster-schedulable-archs"):
        PolicySettings(schedulable_archs=frozenset({"arm64"})).validate()
    PolicySettings(preferred_arch="", schedulable_archs=frozenset({"arm64"})).validate()
    PolicySettings(preferred_arch="arm64", schedulable_archs=frozenset({"arm64"})).validate()


@pytest.mark.parametrize("weight", [0, 101, -1, True])
def test_weight_outside_range(weight: int) -> None:
    with pytest.raises(InvalidSettings, match="weight"):
        PolicySettings(preferred_arch_weight=weight).validate()


@pytest.mark.parametrize("weight", [1, 50, 100])
def test_weight_inside_range(weight: int) -> None:
    PolicySettings(preferred_arch_weight=weight).validate()


def test_bad_mode() -> None:
    with pytest.raises(InvalidSettings, match="preference-mode"):
        PolicySettings(preference_mode="sometimes").validate()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"system_os": ""}, "system-os"),
        ({"system_os": "linux,win dows"}, "system-os"),
        ({"x86_64_levels": "yes"}, "x86-64-levels"),
        ({"match_node_labels": ("bad key!",)}, "match-node-labels"),
        ({"strict_namespaces": frozenset({"Not_A_NS"})}, "strict-namespaces"),
        ({"schedulable_archs": frozenset({"arm 64"})}, "cluster-schedulable-archs"),
    ],
)
def test_invalid_values(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSettings, match=match):
        PolicySettings(**kwargs).validate()  # type: ignore[arg-type]


def test_arch_tolerations_syntax() -> None:
    parsed = parse_arch_tolerations(
        "arm64=arch=arm64:NoSchedule, arm=arch:NoExecute,aarch64=dedicated=arm,riscv64=k,arm64=arch=arm64:NoSchedule"
    )
    assert parsed == (
        ArchToleration("arm64", "arch", "arm64", "NoSchedule"),
        ArchToleration("arm", "arch", None, "NoExecute"),
        ArchToleration("arm64", "dedicated", "arm", ""),
        ArchToleration("riscv64", "k", None, ""),
    )
    assert parsed[0].to_toleration() == {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
    assert parsed[1].to_toleration() == {"key": "arch", "operator": "Exists", "effect": "NoExecute"}
    assert parsed[2].to_toleration() == {"key": "dedicated", "operator": "Equal", "value": "arm"}
    assert [str(t) for t in parsed] == [
        "arm64=arch=arm64:NoSchedule",
        "arm=arch:NoExecute",
        "arm64=dedicated=arm",
        "riscv64=k",
    ]
    assert parse_arch_tolerations("") == ()
    assert parse_arch_tolerations("arm64=example.com/arch=arm64:NoSchedule")[0].key == "example.com/arch"


@pytest.mark.parametrize(
    "text",
    [
        "arm64",
        "=arch=arm64:NoSchedule",
        "arm64=",
        "arm64=arch=arm64:",
        "arm64=arch=arm64:Sometimes",
        "arm64=bad key:NoSchedule",
        "arm 64=arch:NoSchedule",
        "arm64=arch=bad value!:NoSchedule",
    ],
)
def test_arch_tolerations_errors(text: str) -> None:
    with pytest.raises(InvalidSettings, match="--arch-tolerations"):
        parse_arch_tolerations(text)


def test_settings_are_frozen_and_hashable() -> None:
    settings = PolicySettings(match_node_labels=["a", "a"])  # type: ignore[arg-type]
    assert settings.match_node_labels == ("a",)
    hash(settings)
    with pytest.raises(AttributeError):
        settings.preferred_arch = "arm64"  # type: ignore[misc]


def test_system_os_is_a_list_read_from_text_or_values() -> None:
    assert PolicySettings(system_os="Linux, windows,linux").system_os == ("linux", "windows")
    assert PolicySettings(system_os=("windows",)).system_os == ("windows",)
    both = PolicySettings(system_os="linux,windows", x86_64_levels="nfd").validate()
    assert both.scope.oses == ("linux", "windows") and both.scope.multi_os and both.scope.levels
    assert not PolicySettings().scope.multi_os and not PolicySettings().scope.levels
