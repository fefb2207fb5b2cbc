"""The placement-policy flags, shared by ``noe mutate`` and ``noe serve``.

Names and defaults follow the Go Noe where it has the setting, so its command
lines keep working; the rest are ours (see the placement contract).
"""

from __future__ import annotations

import argparse

from noe_core.cli.options import add_option
from noe_core.settings import PolicySettings


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("placement policy")
    add_option(group, "--preferred-arch", default="amd64",
               help="architecture preferred when several are possible; empty for none (Noe's flag)")
    add_option(group, "--cluster-schedulable-archs", default="",
               help="comma-separated architectures the cluster can schedule; empty means any (Noe's flag)")
    add_option(group, "--system-os", default="linux",
               help="the OS of the cluster's nodes; image platforms of other OSes are ignored (Noe's flag)")
    add_option(group, "--match-node-labels", default="",
               help="comma-separated pod label keys the node must carry with the same value (Noe's flag)")
    add_option(group, "--strict-namespaces", default="",
               help="comma-separated namespaces where an image that cannot be inspected, or whose platforms "
                    "lack os/architecture, denies the pod instead of a warning")
    add_option(group, "--arch-tolerations", default="",
               help="tolerations added for architecture taints, as arch=key=value:effect, comma-separated "
                    "(e.g. 'arm64=arch=arm64:NoSchedule')")
    add_option(group, "--preference-mode", default="soft",
               help="soft: a preferred node-affinity term; required: pin nodeSelector to the preferred "
                    "architecture (the Go Noe's behaviour)")
    add_option(group, "--preferred-arch-weight", default="100",
               help="weight 1..100 of the preferred-architecture term in soft mode")


def policy_settings_from_args(ns: argparse.Namespace) -> PolicySettings:
    """Build and validate the settings; any bad value raises ``InvalidSettings`` naming the flag."""
    return PolicySettings.from_flags(
        preferred_arch=ns.preferred_arch or "",
        cluster_schedulable_archs=ns.cluster_schedulable_archs or "",
        system_os=ns.system_os or "",
        match_node_labels=ns.match_node_labels or "",
        strict_namespaces=ns.strict_namespaces or "",
        arch_tolerations=ns.arch_tolerations or "",
        preference_mode=ns.preference_mode or "soft",
        preferred_arch_weight=ns.preferred_arch_weight,
    )
