"""The flags of ``noe report`` alone, declared once (see :mod:`noe_core.cli.flags`).

``noe report`` also takes the policy and registry flags, and ``--kubeconfig``,
``--noe-namespace``, ``--target`` and the shared cache's flags
(:mod:`noe_web.flags`).
"""

from __future__ import annotations

from noe_core.cli.parser import Flag
from noe_core.cli.values import ARCH_PRICES, Boolean, Choice, DnsName, FilePath, Integer, Seconds, Text

REPORT_FILENAME = Flag(
    "--filename",
    Text("FILE"),
    short="-f",
    env=False,
    help="Pods as `kubectl get pods -A -o json` prints them (JSON or YAML, several documents allowed); "
    "'-' reads standard input; default: the live cluster",
)
REPORT_NAMESPACE = Flag(
    "--namespace",
    DnsName(allow_empty=True, metavar="NS"),
    short="-n",
    env=False,
    default="",
    help="read only this namespace of the live cluster (default: all)",
)
API_TIMEOUT = Flag(
    "--api-timeout", Seconds(0, 300, above=True), default="30", help="seconds allowed for each Kubernetes API request"
)
CONCURRENCY = Flag("--concurrency", Integer(1, 256), default="8", help="registry lookups run at the same time")
REPORT_OUTPUT = Flag(
    "--output",
    Choice(("table", "json", "yaml", "csv", "policyreport")),
    short="-o",
    env=False,
    default="table",
    help="standard output format: table, json, yaml, csv (one row per workload) or policyreport "
    "(a wgpolicyk8s.io/v1alpha2 PolicyReport per namespace, for kubectl apply)",
)
HTML = Flag("--html", FilePath("FILE"), env=False, default="", help="also write a self-contained HTML page to FILE")
TOP = Flag("--top", Integer(0, 10_000), env=False, default="10", help="blocking images listed per architecture")
PRICES = Flag(
    "--prices",
    ARCH_PRICES,
    default="",
    help="price per requested vCPU-hour of each architecture, e.g. amd64=0.0464,arm64=0.0368: "
    "monthly costs and savings, and the cheapest is the default --target",
)
MEMORY_PRICES = Flag(
    "--memory-prices",
    ARCH_PRICES,
    default="",
    help="price per requested GiB-hour of memory, e.g. amd64=0.0058,arm64=0.0046 (an architecture without one: 0)",
)
UPGRADE_HINTS = Flag(
    "--upgrade-hints",
    Boolean(),
    action="negatable",
    default="true",
    help="for each image of the plan with a version tag, look for a newer tag that offers the target "
    "(one tag list and at most 5 lookups per image; only when a registry is asked)",
)
WHY_OUTPUT = Flag(
    "--output",
    Choice(("table", "json", "yaml")),
    short="-o",
    env=False,
    default="table",
    help="standard output format: table, json or yaml (keys in README, `noe why`)",
)
