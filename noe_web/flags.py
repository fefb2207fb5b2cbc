"""The flags ``noe serve``, ``noe controller``, ``noe report`` and ``noe cache`` share, declared once.

As in :mod:`noe_core.cli.flags`, each flag is one declaration, so every
process reads the same names, ``NOE_*`` variables and defaults: the Kubernetes
API and noe's namespace, the declared platforms, pull Secrets, the metrics
address, the log flags, and the registry cache (the node's file and the Redis
shared by every replica). Each command's own flags are beside it
(:mod:`noe_web.commands.flags`, :mod:`noe_web.controller.flags`,
:mod:`noe_web.report.flags`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from noe_core.cli.parser import Flag
from noe_core.cli.values import (
    LOG_LEVEL,
    Architecture,
    BadValue,
    Choice,
    DnsName,
    ExistingFile,
    FilePath,
    Integer,
    Line,
    Seconds,
    SecretURL,
)
from noe_core.placement.rules import MAX_WARNING
from noe_web.logs import LOG_FORMATS

DEFAULT_METRICS_ADDR = ":8080"

_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]*):(?P<port>[0-9]{1,5})$")


@dataclass(frozen=True)
class HostPort:
    """``0.0.0.0:8443``, ``:8443``, ``[::1]:8443`` → (host, port); empty host means all interfaces.

    With ``allow_off``, an empty value or ``0`` means "disabled" (``None``), as the Go Noe's ``-metrics-addr``.
    """

    allow_off: bool = False
    metavar: str = "HOST:PORT"

    def __call__(self, text: str) -> tuple[str, int] | None:
        if self.allow_off and text.strip() in ("", "0"):
            return None
        match = _HOST_PORT.match(text.strip())
        if not match:
            raise BadValue("must be HOST:PORT, e.g. 0.0.0.0:8443 or :8443")
        port = int(match["port"])
        if port > 65535:
            raise BadValue(f"has port {port}, above 65535")
        return match["host"].strip("[]"), port


# --- the Kubernetes API and noe's namespace ---------------------------------------------------------------------------

KUBECONFIG = Flag(
    "--kubeconfig",
    ExistingFile(),
    help="kubeconfig file for the Kubernetes API, read alone as kubectl reads it; default: the files $KUBECONFIG "
    "lists, merged as kubectl merges them (report: else ~/.kube/config), else the in-cluster service account "
    "(serve: else no API access)",
)
CONTEXT = Flag(
    "--context",
    Line(1024, "NAME"),
    default="",
    help="the kubeconfig context to use, as kubectl's --context (empty: the kubeconfig's current-context)",
)
KUBE_API_FLAGS = (KUBECONFIG, CONTEXT)
"""Where the Kubernetes API is: every command that reads a cluster takes both."""
NAMESPACE = Flag(
    "--namespace",
    DnsName(allow_empty=True, metavar="NS"),
    short="-n",
    env=False,
    default="",
    help="the namespace to act in, as kubectl's -n (empty: the kubeconfig context's namespace, else default; "
    "in a pod, its own)",
)
"""kubectl's ``-n`` for a command that acts in one namespace; the default is :attr:`ApiConfig.namespace
<noe_web.kube.config.ApiConfig.namespace>`. ``noe report -n`` is its own flag: it reads every namespace unless
told one, as ``kubectl get -A``."""
NOE_NAMESPACE = Flag(
    "--noe-namespace",
    DnsName(allow_empty=True, metavar="NS"),
    default="",
    help="noe's own namespace, where the ConfigMaps noe-learned-platforms and (controller) noe-evictions live "
    "(empty: the pod's namespace from its service account, else default)",
)

# --- the process: state, metrics, declared platforms, pull Secrets, logs ----------------------------------------------

STATE_DIR = Flag(
    "--state-dir",
    FilePath("DIR"),
    default="",
    help="where the self-signed CA and certificate are kept when no certificate is given "
    "(empty: $XDG_STATE_HOME/noe or ~/.local/state/noe)",
)
METRICS_ADDR = Flag(
    "--metrics-addr",
    HostPort(allow_off=True),
    default=DEFAULT_METRICS_ADDR,
    help="HOST:PORT of the plain-HTTP Prometheus /metrics server; empty disables it (Noe's flag)",
)
PULL_SECRET_CACHE_TTL = Flag(
    "--pull-secret-cache-ttl", Seconds(0, 3600), default="30", help="seconds a pull Secret read from the API is reused"
)
PULL_SECRETS_HINT = Flag(
    "--pull-secrets-hint",
    Line(MAX_WARNING),
    default="",
    help="a warning added when reading a pod's imagePullSecret is forbidden: what grants noe that access "
    "(the Helm chart names its value webhook.pullSecrets)",
)
LOG_LEVEL_FLAG = Flag("--log-level", LOG_LEVEL, default="INFO", help="DEBUG, INFO, WARNING or ERROR")
LOG_FORMAT = Flag(
    "--log-format",
    Choice(LOG_FORMATS),
    default="auto",
    help="auto: text at a terminal, json otherwise; json: one JSON object per line (time, level, logger, msg, "
    "fields); text: 'time level logger msg key=value…' for people at a terminal",
)

# --- the registry cache: the node's file, and the Redis every replica shares ------------------------------------------

CACHE_DIR = Flag(
    "--cache-dir",
    FilePath("DIR"),
    default="",
    help="directory of the registry cache shared by the workers and kept across restarts (empty: --state-dir)",
)
MAX_CACHED_IMAGES = Flag(
    "--max-cached-images",
    Integer(1, 10_000_000),
    default="4096",
    help="image digests kept in the registry cache (least recently used evicted)",
)
MAX_CACHED_TAGS = Flag(
    "--max-cached-tags",
    Integer(1, 10_000_000),
    default="8192",
    help="tags (and failures, and credential checks) kept in the registry cache",
)
CACHE_URL = Flag(
    "--cache-url",
    SecretURL(),
    default="",
    help="redis://[:PASSWORD@]HOST:PORT/DB or rediss:// (TLS): a Redis or Valkey shared by every replica "
    "and rollout, behind the local cache; give it through NOE_CACHE_URL to keep the password off the command "
    "line (needs --cache-key-file)",
)
CACHE_CA_FILE = Flag(
    "--cache-ca-file", ExistingFile(), default="", help="CA bundle (PEM) that signs a rediss:// server's certificate"
)
CACHE_KEY_FILE = Flag(
    "--cache-key-file",
    ExistingFile(),
    default="",
    help="file of at least 32 bytes, the same in every replica (a mounted Secret): the key of the credential "
    "fingerprints kept in --cache-url",
)
CACHE_TIMEOUT = Flag(
    "--cache-timeout",
    Seconds(0.01, 5),
    default="0.25",
    help="seconds any one --cache-url call may take; past it (or on any error) noe uses its local cache "
    "and the registry, and reconnects in the background",
)

SHARED_CACHE_FLAGS = (CACHE_URL, CACHE_CA_FILE, CACHE_KEY_FILE, CACHE_TIMEOUT)
"""The cache shared by every replica: ``noe serve``, ``noe controller``, ``noe report`` and ``noe cache``."""
CACHE_FLAGS = (STATE_DIR, CACHE_DIR, MAX_CACHED_IMAGES, MAX_CACHED_TAGS, *SHARED_CACHE_FLAGS)
"""``noe cache``'s: the node's file or the shared Redis."""
SHARED_CACHE_BOUNDED_FLAGS = (*SHARED_CACHE_FLAGS, MAX_CACHED_IMAGES, MAX_CACHED_TAGS)
"""``--cache-url`` and its bounds, as ``noe serve`` reads them: ``noe controller`` and ``noe report`` share the
webhook's answers."""

# --- the migration target (noe report, noe controller --policy-reports) -----------------------------------------------

TARGET = Flag(
    "--target",
    Architecture(allow_empty=True),
    default="",
    help="the architecture to migrate to: savings, rebuild plan and PolicyReports "
    "(default: the cheapest priced one, else arm64)",
)
