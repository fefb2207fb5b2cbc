"""The flags of ``noe serve``, ``noe certs``, ``noe report`` and ``noe cache``, declared once (see
:mod:`noe_core.cli.flags`).

``noe serve`` also takes the policy and registry flags declared there;
``--kubeconfig`` and ``--context`` (:data:`KUBE_API_FLAGS`) are shared by every
command that reads a cluster, with kubectl's meaning (:mod:`noe_web.kube.config`).
Bounds follow what the service can honour: the API server waits at most 30 s
for a webhook, and it sends objects of at most 3 MiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from noe_core.cli.parser import Flag
from noe_core.cli.values import (
    ARCH_PRICES,
    LOG_LEVEL,
    Architecture,
    BadValue,
    Boolean,
    Choice,
    DnsName,
    ExistingDir,
    ExistingFile,
    FilePath,
    Integer,
    Line,
    Seconds,
    SecretURL,
    Text,
)
from noe_core.policy import MAX_WARNING
from noe_web.logs import LOG_FORMATS

DEFAULT_BIND = "0.0.0.0:8443"
DEFAULT_METRICS_ADDR = ":8080"
MAX_ADMISSION_DEADLINE = 29.0  # the API server's webhook timeout is at most 30 s
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
<noe_web.kube.config.ApiConfig.namespace>`. ``noe report -n`` is :data:`REPORT_NAMESPACE`: it reads every
namespace unless told one, as ``kubectl get -A``."""
NOE_NAMESPACE = Flag(
    "--noe-namespace",
    DnsName(allow_empty=True, metavar="NS"),
    default="",
    help="noe's own namespace, where the ConfigMaps noe-learned-platforms and (controller) noe-evictions live "
    "(empty: the pod's namespace from its service account, else default)",
)

# --- noe serve ---------------------------------------------------------------------------------------------

BIND = Flag("--bind", HostPort(), default=DEFAULT_BIND, help="HOST:PORT the TLS webhook listens on")
TLS_CERT_FILE = Flag(
    "--tls-cert-file", ExistingFile(), default="", help="serving certificate (PEM); with --tls-key-file"
)
TLS_KEY_FILE = Flag("--tls-key-file", ExistingFile(), default="", help="private key of --tls-cert-file (PEM)")
CERT_DIR = Flag(
    "--cert-dir",
    ExistingDir(),
    default="",
    help="directory holding tls.crt and tls.key, e.g. a mounted cert-manager Secret (Noe's flag)",
)
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
WORKERS = Flag("--workers", Integer(1, 64), default="2", help="gunicorn worker processes")
THREADS = Flag("--threads", Integer(1, 256), default="8", help="threads per worker (gthread)")
GRACEFUL_TIMEOUT = Flag(
    "--graceful-timeout", Seconds(0, 600), default="10", help="seconds in-flight admissions get to finish on shutdown"
)
ADMISSION_DEADLINE = Flag(
    "--admission-deadline",
    Seconds(0.1, MAX_ADMISSION_DEADLINE),
    default="5",
    help="seconds within which every admission is answered; lookups still running are abandoned "
    "(keep it below the webhook's timeoutSeconds)",
)
ON_LOOKUP_FAILURE = Flag(
    "--on-lookup-failure",
    Choice(("allow", "gate")),
    default="allow",
    help="what a Pod whose image lookups timed out or failed temporarily gets: allow (admitted without "
    "placement, with a warning) or gate (the scheduling gate arch.noe.adevinta.com/inspection, which "
    "noe controller removes once it has placed the pod)",
)
IMAGE_PLATFORMS = Flag(
    "--image-platforms",
    ExistingFile(),
    default="",
    help="JSON/YAML file of image (or glob) → platforms, consulted before the registry",
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
EVENT_QUEUE_SIZE = Flag(
    "--event-queue-size",
    Integer(1, 1_000_000),
    default="1000",
    help="Events waiting to be written before new ones are dropped (and counted)",
)
MAX_BODY_BYTES = Flag(
    "--max-body-bytes",
    Integer(1024, 64 * 1024 * 1024, "BYTES"),
    default=str(3 * 1024 * 1024),
    help="largest AdmissionReview accepted (the API server sends at most 3 MiB objects)",
)
CONTROL_SOCKET = Flag(
    "--control-socket",
    FilePath("PATH"),
    default="",
    help="path of gunicorn's control socket; empty creates none, as a read-only root filesystem needs",
)
LOG_LEVEL_FLAG = Flag("--log-level", LOG_LEVEL, default="INFO", help="DEBUG, INFO, WARNING or ERROR")
LOG_FORMAT = Flag(
    "--log-format",
    Choice(LOG_FORMATS),
    default="auto",
    help="auto: text at a terminal, json otherwise; json: one JSON object per line (time, level, logger, msg, "
    "fields); text: 'time level logger msg key=value…' for people at a terminal",
)


# --- the shared registry cache (noe serve, noe cache) ---------------------------------------------------------

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

SERVE_FLAGS = (
    BIND,
    TLS_CERT_FILE,
    TLS_KEY_FILE,
    CERT_DIR,
    STATE_DIR,
    METRICS_ADDR,
    WORKERS,
    THREADS,
    GRACEFUL_TIMEOUT,
    *KUBE_API_FLAGS,
    NOE_NAMESPACE,
    ADMISSION_DEADLINE,
    ON_LOOKUP_FAILURE,
    IMAGE_PLATFORMS,
    PULL_SECRET_CACHE_TTL,
    PULL_SECRETS_HINT,
    EVENT_QUEUE_SIZE,
    MAX_BODY_BYTES,
    CONTROL_SOCKET,
    LOG_LEVEL_FLAG,
    CACHE_DIR,
    MAX_CACHED_IMAGES,
    MAX_CACHED_TAGS,
    *SHARED_CACHE_FLAGS,
    LOG_FORMAT,
)

# --- the Go Noe's controller-runtime flags, accepted so its command lines work unchanged ----------------------
# (:mod:`noe_web.commands.noe_compat` maps those that mean something here and warns, in one line, about the others)

LEADER_ELECT = Flag(
    "--leader-elect",
    Boolean(),
    env=False,
    action="negatable",
    help="accepted for Noe's command line; noe elects no leader: every replica answers admissions",
)
LEADER_ELECTION_ID = Flag(
    "--leader-election-id",
    DnsName(subdomain=True),
    env=False,
    help="accepted for controller-runtime's command line; ignored",
)
LEADER_ELECTION_NAMESPACE = Flag(
    "--leader-election-namespace", DnsName(), env=False, help="accepted for controller-runtime's command line; ignored"
)
HEALTH_PROBE_ADDR = Flag(
    "--health-probe-addr",
    HostPort(allow_off=True),
    env=False,
    help="accepted for Noe's command line; ignored: /healthz and /readyz are served on --bind (HTTPS)",
)
HEALTH_PROBE_BIND_ADDRESS = Flag(
    "--health-probe-bind-address",
    HostPort(allow_off=True),
    env=False,
    help="controller-runtime's name of --health-probe-addr; ignored likewise",
)
METRICS_BIND_ADDRESS = Flag(
    "--metrics-bind-address",
    HostPort(allow_off=True),
    env=False,
    help="controller-runtime's name of --metrics-addr; read as --metrics-addr",
)
ZAP_LOG_LEVEL = Flag(
    "--zap-log-level",
    Choice(("debug", "info", "warn", "error", "dpanic", "panic", "fatal")),
    env=False,
    help="controller-runtime's log level; read as --log-level",
)
ZAP_ENCODER = Flag(
    "--zap-encoder",
    Choice(("json", "console")),
    env=False,
    help="controller-runtime's log encoding; read as --log-format (console: text)",
)
ZAP_DEVEL = Flag(
    "--zap-devel",
    Boolean(),
    env=False,
    action="negatable",
    help="accepted for controller-runtime's command line; ignored",
)
ZAP_STACKTRACE_LEVEL = Flag(
    "--zap-stacktrace-level",
    Choice(("info", "error", "panic")),
    env=False,
    help="accepted for controller-runtime's command line; ignored",
)
ZAP_TIME_ENCODING = Flag(
    "--zap-time-encoding",
    Choice(("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")),
    env=False,
    help="accepted for controller-runtime's command line; ignored (times are ISO 8601, UTC)",
)

NOE_COMPAT_FLAGS = (
    LEADER_ELECT,
    LEADER_ELECTION_ID,
    LEADER_ELECTION_NAMESPACE,
    HEALTH_PROBE_ADDR,
    HEALTH_PROBE_BIND_ADDRESS,
    METRICS_BIND_ADDRESS,
    ZAP_LOG_LEVEL,
    ZAP_ENCODER,
    ZAP_DEVEL,
    ZAP_STACKTRACE_LEVEL,
    ZAP_TIME_ENCODING,
)

# --- noe certs ---------------------------------------------------------------------------------------------

CERTS_NAMESPACE = Flag(
    "--namespace",
    DnsName(metavar="NS"),
    help="namespace of the Service and the Secret (default: the pod's own namespace)",
)
SERVICE = Flag("--service", DnsName(), default="noe", help="the webhook Service's name")
SECRET = Flag("--secret", DnsName(subdomain=True), default="noe-tls", help="the TLS Secret to write")
WEBHOOK_CONFIG = Flag(
    "--webhook-config",
    DnsName(subdomain=True, allow_empty=True),
    default="",
    help="MutatingWebhookConfiguration whose caBundle to set (empty: none)",
)
CLUSTER_DOMAIN = Flag(
    "--cluster-domain",
    DnsName(subdomain=True, allow_empty=True, metavar="DOMAIN"),
    default="cluster.local",
    help="DNS suffix of Services in the cluster",
)
VALIDITY_DAYS = Flag(
    "--validity-days", Integer(1, 36500, "DAYS"), default="365", help="lifetime of the serving certificate"
)
CA_VALIDITY_DAYS = Flag("--ca-validity-days", Integer(1, 36500, "DAYS"), default="3650", help="lifetime of the CA")
RENEW_BEFORE_DAYS = Flag(
    "--renew-before-days",
    Integer(0, 36500, "DAYS"),
    default="30",
    help="renew when the certificate or its CA has this many days left or fewer",
)
FORCE = Flag("--force", Boolean(), action="switch", help="issue a new certificate even if valid")

CERTS_FLAGS = (
    CERTS_NAMESPACE,
    SERVICE,
    SECRET,
    WEBHOOK_CONFIG,
    CLUSTER_DOMAIN,
    VALIDITY_DAYS,
    CA_VALIDITY_DAYS,
    RENEW_BEFORE_DAYS,
    FORCE,
    *KUBE_API_FLAGS,
)


# --- noe report ---------------------------------------------------------------------------------------------

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
TARGET = Flag(
    "--target",
    Architecture(allow_empty=True),
    default="",
    help="the architecture to migrate to: savings, rebuild plan and PolicyReports "
    "(default: the cheapest priced one, else arm64)",
)
UPGRADE_HINTS = Flag(
    "--upgrade-hints",
    Boolean(),
    action="negatable",
    default="true",
    help="for each image of the plan with a version tag, look for a newer tag that offers the target "
    "(one tag list and at most 5 lookups per image; only when a registry is asked)",
)
