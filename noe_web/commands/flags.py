"""The flags of ``noe serve`` and ``noe certs`` alone, declared once (see :mod:`noe_core.cli.flags`).

``noe serve`` also takes the policy and registry flags declared there, and the
flags it shares with ``noe controller``, ``noe report`` and ``noe cache``
(:mod:`noe_web.flags`: ``--kubeconfig``, ``--metrics-addr``, the cache). Bounds follow what the
service can honour: the API server waits at most 30 s for a webhook, and it
sends objects of at most 3 MiB.
"""

from __future__ import annotations

from noe_core.cli.flags import IMAGE_PLATFORMS
from noe_core.cli.parser import Flag
from noe_core.cli.values import (
    Boolean,
    Choice,
    DnsName,
    ExistingDir,
    ExistingFile,
    FilePath,
    Integer,
    Seconds,
)
from noe_web.flags import (
    CACHE_DIR,
    KUBE_API_FLAGS,
    LOG_FORMAT,
    LOG_LEVEL_FLAG,
    MAX_CACHED_IMAGES,
    MAX_CACHED_TAGS,
    METRICS_ADDR,
    NOE_NAMESPACE,
    PULL_SECRET_CACHE_TTL,
    PULL_SECRETS_HINT,
    SHARED_CACHE_FLAGS,
    STATE_DIR,
    HostPort,
)

DEFAULT_BIND = "0.0.0.0:8443"
MAX_ADMISSION_DEADLINE = 29.0  # the API server's webhook timeout is at most 30 s

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
