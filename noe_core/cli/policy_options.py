"""The placement-policy flags (declared in :mod:`noe_core.cli.flags`) → :class:`PolicySettings`.

Shared by ``noe mutate`` and ``noe serve``. Names and defaults follow the Go
Noe where it has the setting, so its command lines keep working; the rest are
ours (see the placement contract).
"""

from __future__ import annotations

import argparse

from noe_core.cli.flags import POLICY_FLAGS
from noe_core.cli.parser import add_flags
from noe_core.policies.settings import PolicySettings


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser.add_argument_group("placement policy"), POLICY_FLAGS)


def policy_settings_from_args(ns: argparse.Namespace) -> PolicySettings:
    """The settings the parsed flags describe; cross-flag checks raise ``InvalidSettings`` naming the flags."""
    return PolicySettings(
        preferred_arch=ns.preferred_arch,
        schedulable_archs=frozenset(ns.cluster_schedulable_archs),
        system_os=ns.system_os,
        match_node_labels=ns.match_node_labels,
        strict_namespaces=frozenset(ns.strict_namespaces),
        arch_tolerations=ns.arch_tolerations,
        preference_mode=ns.preference_mode,
        preferred_arch_weight=ns.preferred_arch_weight,
        x86_64_levels=ns.x86_64_levels,
        fallback_arch=ns.fallback_arch,
    ).validate()
