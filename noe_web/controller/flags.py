"""The flags of ``noe controller`` that ``noe serve`` does not have, declared once (see noe_core.cli.flags).

The policy and registry flags, ``--kubeconfig``, ``--image-platforms``,
``--pull-secret-cache-ttl``, ``--pull-secrets-hint``, ``--metrics-addr``, ``--log-level``, ``--log-format`` and
``--lookup-timeout`` are the very declarations ``noe serve`` and ``noe mutate``
use, so both processes read the same names, variables and defaults.
Durations read as Go durations (``15s``, ``1h``), as client-go's flags do.
"""

from __future__ import annotations

from noe_core.cli.flags import IMAGE_PLATFORMS, LOOKUP_TIMEOUT
from noe_core.cli.parser import Flag
from noe_core.cli.values import Boolean, DnsName, Duration
from noe_web.flags import (
    KUBE_API_FLAGS,
    LOG_FORMAT,
    LOG_LEVEL_FLAG,
    METRICS_ADDR,
    NOE_NAMESPACE,
    PULL_SECRET_CACHE_TTL,
    PULL_SECRETS_HINT,
    TARGET,
)

LEADER_ELECT = Flag(
    "--leader-elect",
    Boolean(),
    action="negatable",
    default="true",
    help="act only while holding the leader Lease (--no-leader-elect: always act; run one replica)",
)
LEADER_ELECTION_NAMESPACE = Flag(
    "--leader-election-namespace",
    DnsName(allow_empty=True, metavar="NS"),
    default="",
    help="namespace of the leader Lease (empty: the pod's own namespace from its service account, else default)",
)
LEADER_ELECTION_ID = Flag(
    "--leader-election-id", DnsName(subdomain=True), default="noe-controller", help="name of the leader Lease"
)
LEASE_DURATION = Flag(
    "--lease-duration",
    Duration(),
    default="15s",
    help="how long followers wait after the last renewal before taking the Lease over",
)
RENEW_DEADLINE = Flag(
    "--renew-deadline",
    Duration(),
    default="10s",
    help="how long the leader keeps trying to renew before it stops acting",
)
RETRY_PERIOD = Flag("--retry-period", Duration(), default="2s", help="time between tries to acquire or renew")
EVICTION_BACKOFF = Flag(
    "--eviction-backoff",
    Duration(),
    default="1h",
    help="at most one eviction per owner, image digest and node architecture within this",
)
GATE_TIMEOUT = Flag(
    "--gate-timeout",
    Duration(),
    default="5m",
    help="after this long (from the pod's creation) a gated pod whose lookups still fail is let go without placement",
)
DRY_RUN = Flag(
    "--dry-run", Boolean(), action="switch", help="evict and patch nothing: log and write Events for what would be done"
)

POLICY_REPORTS = Flag(
    "--policy-reports",
    Boolean(),
    action="switch",
    help="keep a wgpolicyk8s.io/v1alpha2 PolicyReport per namespace up to date (noe report -o policyreport's): "
    "one result per workload, pass / fail / error on --target; written only when a result changes",
)
POLICY_REPORT_INTERVAL = Flag(
    "--policy-report-interval",
    Duration(),
    default="1m",
    help="at most one PolicyReport pass (and its writes) per this interval; at least 1s",
)

CONTROLLER_FLAGS = (
    *KUBE_API_FLAGS,
    NOE_NAMESPACE,
    LEADER_ELECT,
    LEADER_ELECTION_NAMESPACE,
    LEADER_ELECTION_ID,
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    EVICTION_BACKOFF,
    GATE_TIMEOUT,
    DRY_RUN,
    METRICS_ADDR,
    IMAGE_PLATFORMS,
    PULL_SECRET_CACHE_TTL,
    PULL_SECRETS_HINT,
    LOOKUP_TIMEOUT,
    LOG_LEVEL_FLAG,
    LOG_FORMAT,
    POLICY_REPORTS,
    POLICY_REPORT_INTERVAL,
    TARGET,
)
