"""The placement-policy flags → PolicySettings, read as ``noe serve`` and ``noe mutate`` read them."""

from __future__ import annotations

import argparse

import pytest

from noe_core.cli.flags import POLICY_FLAGS
from noe_core.cli.parser import parse_text
from noe_core.cli.policy_options import policy_settings_from_args
from noe_core.errors import InvalidSettings
from noe_core.policies.settings import ArchToleration, PolicySettings


def from_flag_text(**texts: str) -> PolicySettings:
    """The settings from flag values given as text (keyed by ``dest``), each read by its flag's own parser."""
    parsed = {flag.dest: parse_text(flag, texts.get(flag.dest, flag.default or "")) for flag in POLICY_FLAGS}
    return policy_settings_from_args(argparse.Namespace(**parsed))


def test_bad_mode() -> None:
    with pytest.raises(InvalidSettings, match="preference-mode"):
        from_flag_text(preference_mode="sometimes")


def test_flag_text_to_settings() -> None:
    settings = from_flag_text(
        preferred_arch="arm64",
        cluster_schedulable_archs="amd64, arm64",
        match_node_labels="team,,tier",
        strict_namespaces="payments",
        arch_tolerations="arm64=arch=arm64:NoSchedule",
        preference_mode="required",
        preferred_arch_weight="40",
    )
    assert settings.schedulable_archs == {"amd64", "arm64"}
    assert settings.match_node_labels == ("team", "tier")
    assert settings.strict_namespaces == {"payments"}
    assert settings.arch_tolerations == (ArchToleration("arm64", "arch", "arm64", "NoSchedule"),)
    assert settings.preference_mode == "required"
    assert settings.preferred_arch_weight == 40
    with pytest.raises(InvalidSettings, match="weight"):
        from_flag_text(preferred_arch_weight="heavy")
    with pytest.raises(InvalidSettings, match="not in --cluster-schedulable-archs"):
        from_flag_text(cluster_schedulable_archs="arm64")
    assert from_flag_text(preferred_arch="").preferred_arch == ""
