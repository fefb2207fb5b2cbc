"""Every flag of ``noe mutate`` and ``noe inspect``, and the policy and registry flags, declared once.

Each is a :class:`~noe_core.cli.parser.Flag`: name, value parser
(:mod:`noe_core.cli.values`), default as a user would type it, help and
``NOE_*`` variable; :mod:`noe_core.cli.parser` turns it into an argparse
option. The web commands declare the flags they share in :mod:`noe_web.flags`
and their own beside them (:mod:`noe_web.commands.flags` for ``noe serve`` and
``noe certs``, :mod:`noe_web.controller.flags`, :mod:`noe_web.report.flags`),
and share the policy and registry ones from here.
"""

from __future__ import annotations

from noe_core.cli.parser import Flag

# Re-exported: noe mutate and noe report import these two from here.
from noe_core.cli.parser import add_flags as add_flags  # noqa: PLC0414
from noe_core.cli.parser import require as require  # noqa: PLC0414
from noe_core.cli.values import (
    ARCH_TOLERATIONS,
    HOST_GLOBS,
    IMAGE_PATTERNS,
    REGISTRY_PROXIES,
    Architecture,
    Boolean,
    Choice,
    CommaList,
    DnsName,
    Duration,
    ExistingDir,
    ExistingFile,
    Integer,
    LabelKey,
    LabelPairs,
    OsName,
    Seconds,
    Text,
)

# --- the placement policy (shared by noe mutate and noe serve); names and defaults follow the Go Noe --------

PREFERRED_ARCH = Flag(
    "--preferred-arch",
    Architecture(allow_empty=True),
    default="amd64",
    help="architecture preferred when several are possible; empty for none (Noe's flag)",
)
CLUSTER_SCHEDULABLE_ARCHS = Flag(
    "--cluster-schedulable-archs",
    CommaList(Architecture(), "ARCH,..."),
    default="",
    help="comma-separated architectures the cluster can schedule; empty means any (Noe's flag)",
)
SYSTEM_OS = Flag(
    "--system-os",
    CommaList(OsName(), "OS,..."),
    default="linux",
    help="comma-separated OSes of the cluster's nodes; image platforms of other OSes are ignored; with several "
    "(linux,windows) pods also require kubernetes.io/os (Noe's flag, which takes one)",
)
X86_64_LEVELS_FLAG = Flag(
    "--x86-64-levels",
    Choice(("off", "nfd")),
    default="off",
    help="nfd: amd64 nodes carry node-feature-discovery's feature.node.kubernetes.io/cpu-cpuid.X86_64_V2..V4 "
    "labels, and an image built for amd64/v2..v4 only requires them; off: no such labels (a warning instead)",
)
MATCH_NODE_LABELS = Flag(
    "--match-node-labels",
    CommaList(LabelKey(), "KEY,..."),
    default="",
    help="comma-separated pod label keys the node must carry with the same value (Noe's flag)",
)
STRICT_NAMESPACES = Flag(
    "--strict-namespaces",
    CommaList(DnsName(subdomain=True), "NAMESPACE,..."),
    default="",
    help="comma-separated namespaces where an image that cannot be inspected, or whose platforms lack "
    "os/architecture, denies the pod instead of a warning",
)
ARCH_TOLERATIONS_FLAG = Flag(
    "--arch-tolerations",
    ARCH_TOLERATIONS,
    default="",
    help="tolerations added for architecture taints, as arch=key=value:effect, comma-separated "
    "(e.g. 'arm64=arch=arm64:NoSchedule')",
)
PREFERENCE_MODE = Flag(
    "--preference-mode",
    Choice(("soft", "required")),
    default="soft",
    help="soft: a preferred node-affinity term; required: pin nodeSelector to the preferred architecture "
    "(the Go Noe's behaviour)",
)
PREFERRED_ARCH_WEIGHT = Flag(
    "--preferred-arch-weight",
    Integer(1, 100, "WEIGHT"),
    default="100",
    help="weight 1..100 of the preferred-architecture term in soft mode",
)

POLICY_FILE = Flag(
    "--policy",
    Text("FILE"),
    action="append",
    help="YAML/JSON file of ClusterPlacementPolicy and PlacementPolicy objects (and Namespaces for their labels), "
    "applied as in a cluster; repeatable (the variable: a path list)",
)

IMAGE_PLATFORMS = Flag(
    "--image-platforms",
    ExistingFile(),
    default="",
    help="JSON/YAML file of image (or glob) → platforms, consulted before the registry",
)
LEARNED = Flag(
    "--learned",
    ExistingFile(),
    env=False,
    help="the noe-learned-platforms ConfigMap (kubectl get configmap noe-learned-platforms -o yaml): "
    "architectures exec format errors disproved, left out as in the cluster",
)

FALLBACK_ARCH = Flag(
    "--fallback-arch",
    Architecture(allow_empty=True),
    default="",
    help="when an image cannot be inspected, require this architecture if every inspected image offers it "
    "(rule 13a; at admission, and when noe controller lets a gated pod go); empty: none",
)

POLICY_FLAGS = (
    PREFERRED_ARCH,
    CLUSTER_SCHEDULABLE_ARCHS,
    SYSTEM_OS,
    MATCH_NODE_LABELS,
    STRICT_NAMESPACES,
    ARCH_TOLERATIONS_FLAG,
    PREFERENCE_MODE,
    PREFERRED_ARCH_WEIGHT,
    X86_64_LEVELS_FLAG,
    FALLBACK_ARCH,
)

# --- registry access (shared by noe serve, noe mutate and noe inspect) ------------------------------------

REGISTRY_PROXIES_FLAG = Flag(
    "--registry-proxies",
    REGISTRY_PROXIES,
    default="",
    help="read images of registries matching GLOB from MIRROR (host[:port][/path]), "
    "e.g. docker.io=mirror.corp,*.gcr.io=gcr-mirror.corp",
)
PRIVATE_REGISTRIES = Flag(
    "--private-registries",
    IMAGE_PATTERNS,
    default="",
    help="registries (kubelet image patterns, e.g. '*.corp,123.dkr.ecr.*.amazonaws.com') that never get an "
    "anonymous request when credentials are known",
)
INSECURE_REGISTRIES = Flag(
    "--insecure-registries",
    HOST_GLOBS,
    default="",
    help="registry host globs (e.g. '127.0.0.1:*') allowed over plain HTTP or unverified TLS",
)
REGISTRY_CA_FILE = Flag(
    "--registry-ca-file",
    ExistingFile(),
    help="PEM file of a private CA trusted for registries, in addition to the public ones",
)
DOCKER_CONFIG = Flag(
    "--docker-config",
    Text("FILE"),
    action="append",
    help="docker config.json (or .dockercfg) with registry credentials; repeatable (the variable: a "
    "path list); missing files are skipped",
)
CONTAINERD_CONFIG = Flag(
    "--containerd-config",
    Text("FILE"),
    action="append",
    help="containerd config.toml whose registry auth sections hold credentials; repeatable (the variable: "
    "a path list); missing files are skipped",
)
CREDENTIAL_PROVIDER_CONFIG = Flag(
    "--image-credential-provider-config",
    ExistingFile(),
    help="kubelet CredentialProviderConfig (YAML or JSON) naming credential provider plugins",
)
CREDENTIAL_PROVIDER_BIN_DIR = Flag(
    "--image-credential-provider-bin-dir",
    ExistingDir(),
    help="directory holding the credential provider plugin binaries",
)
CACHE_TTL = Flag(
    "--cache-ttl",
    Duration(),
    default="1h",
    help="how long a tag → digest answer is trusted before one HEAD re-validates it (seconds or Go syntax: 1h, 30s)",
)
NEGATIVE_CACHE_TTL = Flag(
    "--negative-cache-ttl",
    Duration(),
    default="30s",
    help="how long a failed lookup is remembered, so a failing registry is not hammered",
)
VERIFY_PLATFORM_MANIFESTS = Flag(
    "--verify-platform-manifests",
    Boolean(),
    default="true",
    action="negatable",
    help="check each platform manifest of an index with a HEAD request and drop those the registry no longer has",
)

REGISTRY_FLAGS = (
    REGISTRY_PROXIES_FLAG,
    PRIVATE_REGISTRIES,
    INSECURE_REGISTRIES,
    REGISTRY_CA_FILE,
    DOCKER_CONFIG,
    CONTAINERD_CONFIG,
    CREDENTIAL_PROVIDER_CONFIG,
    CREDENTIAL_PROVIDER_BIN_DIR,
    CACHE_TTL,
    NEGATIVE_CACHE_TTL,
    VERIFY_PLATFORM_MANIFESTS,
)

# --- noe mutate --------------------------------------------------------------------------------------------

FILENAME = Flag(
    "--filename",
    Text("FILE"),
    short="-f",
    env=False,
    required=True,
    help="YAML or JSON file holding the object(s); '-' reads standard input",
)
OUTPUT = Flag("--output", Choice(("yaml", "json")), short="-o", env=False, default="yaml", help="output format")
PATCH = Flag(
    "--patch", Boolean(), env=False, action="switch", help="print the RFC 6902 JSONPatch instead of the object"
)
EXPLAIN = Flag("--explain", Boolean(), env=False, action="switch", help="print the decision and the reasons for it")
PLATFORMS = Flag(
    "--platforms",
    ExistingFile("PLATFORMS.json"),
    env=False,
    help="file mapping each image (as written in the pod, or a glob) to its platforms or to "
    '{"error": reason}; with it nothing touches the network',
)
MUTATE_NAMESPACE = Flag(
    "--namespace", DnsName(subdomain=True), env=False, help="namespace of objects that carry none (default: 'default')"
)
OPERATION = Flag(
    "--operation",
    Choice(("CREATE", "UPDATE")),
    env=False,
    default="CREATE",
    help="admission operation to simulate for bare objects",
)
LOOKUP_TIMEOUT = Flag(
    "--lookup-timeout",
    Seconds(0, 300, above=True),
    default="10",
    help="seconds allowed for the registry lookups of one object (without --platforms)",
)

# --- noe policy ---------------------------------------------------------------------------------------------

EXPLAIN_FILENAME = Flag(
    "--filename",
    Text("FILE"),
    short="-f",
    env=False,
    required=True,
    help="YAML or JSON file holding the Pod(s) or workloads to explain; '-' reads standard input",
)
EXPLAIN_OUTPUT = Flag("--output", Choice(("yaml", "json")), short="-o", env=False, default="yaml", help="output format")

# --- noe inspect -------------------------------------------------------------------------------------------

INSPECT_OUTPUT = Flag(
    "--output", Choice(("text", "json", "yaml")), short="-o", env=False, default="text", help="output format"
)
JSON = Flag("--json", Boolean(), env=False, action="switch", help="print one JSON object (same as -o json)")
INSPECT_TIMEOUT = Flag("--timeout", Seconds(0, 3600, above=True), default="30", help="give up after this long")
INSPECT_NAMESPACE = Flag(
    "--namespace",
    DnsName(),
    short="-n",
    env=False,
    help="the namespace of the pod whose decision reads the image: its --policy files' PlacementPolicies apply "
    "(default: 'default')",
)
INSPECT_LABELS = Flag(
    "--labels",
    LabelPairs(),
    short="-l",
    env=False,
    help="that pod's labels, as the --policy files' podSelectors read them",
)
VERBOSE = Flag(
    "--verbose", Boolean(), short="-v", env=False, action="switch", help="print request and cache counters on stderr"
)
