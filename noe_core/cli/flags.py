"""Every flag of ``noe mutate`` and ``noe inspect``, declared once: name, value parser, default, help, variable.

A :class:`Flag` becomes an argparse option through :func:`add_flags`, the only
way commands add options. Its value parser (:mod:`noe_core.cli.values`) reads
the command line and the flag's ``NOE_*`` variable alike (``--preferred-arch`` →
``NOE_PREFERRED_ARCH``; the command line wins), and a bad value in either is a
usage error of one line that names the flag — and the variable when it came
from there — then exit status 2::

    noe mutate: argument --lookup-timeout: 'abc' is not a number of seconds
    noe mutate: argument --lookup-timeout: NOE_LOOKUP_TIMEOUT='abc' is not a number of seconds

Defaults are written as a user would type them and go through the same parser.
``noe serve`` and ``noe certs`` declare their own flags the same way in
:mod:`noe_web.flags` and share the policy and registry ones from here.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from noe_core.cli.options import env_name
from noe_core.cli.values import (
    ARCH_TOLERATIONS,
    HOST_GLOBS,
    IMAGE_PATTERNS,
    REGISTRY_PROXIES,
    Architecture,
    BadValue,
    Boolean,
    Choice,
    CommaList,
    DnsName,
    Duration,
    ExistingDir,
    ExistingFile,
    Integer,
    LabelKey,
    OsName,
    Seconds,
    Text,
    ValueParser,
)
from noe_core.errors import InvalidSettings

Action = Literal["store", "switch", "negatable", "append"]
"""``switch``: ``--flag`` alone; ``negatable``: also ``--no-flag``; ``append``: repeatable."""

_GIVEN = "_noe_given_on_command_line"


@dataclass(frozen=True)
class Flag:
    """One option: its name, how its value reads, its default as typed, its help and its variable."""

    name: str
    kind: ValueParser
    help: str
    default: str | None = None
    short: str = ""
    env: bool = True
    action: Action = "store"
    required: bool = False
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    @property
    def env_name(self) -> str | None:
        return env_name(self.name) if self.env else None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.short, self.name) if self.short else (self.name,)


class EnvText(str):
    """A value read from a ``NOE_*`` variable; remembers the variable so errors can name it."""

    variable: str

    def __new__(cls, text: str, variable: str) -> EnvText:
        obj = super().__new__(cls, text)
        obj.variable = variable
        return obj


def _shown(text: str) -> str:
    raw = str.__str__(text)
    return f"{text.variable}={raw!r}" if isinstance(text, EnvText) else repr(raw)


def _problem(flag: Flag, text: str, exc: ValueError) -> str:
    """``'abc' is not a number of seconds``; a reused parser's message loses its own flag prefix."""
    if isinstance(exc, BadValue):
        return f"{_shown(text)} {exc}"
    reason = str(exc).removeprefix(flag.name).lstrip(": ")
    return f"{_shown(text)}: {reason}"


class _Convert:
    """The argparse ``type=`` of one flag: its value parser, with errors phrased for that flag."""

    def __init__(self, flag: Flag) -> None:
        self.flag = flag
        self.__name__ = flag.name  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:
        try:
            return self.flag.kind(str.__str__(text))
        except ValueError as exc:  # BadValue, InvalidSettings from a reused parser
            raise argparse.ArgumentTypeError(_problem(self.flag, text, exc)) from None


def _mark_given(namespace: argparse.Namespace, dest: str) -> None:
    given: set[str] = namespace.__dict__.setdefault(_GIVEN, set())
    given.add(dest)


class _MarksGiven(argparse.Action):
    """Records that the option was given on the command line, then does what its action class does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark_given(namespace, self.dest)


class _Store(_MarksGiven, argparse._StoreAction):
    pass


class _Append(_MarksGiven, argparse._AppendAction):
    pass


class _Switch(argparse.Action):
    """``--flag`` sets true (``--no-flag`` false when negatable); the default goes through ``type``."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, negatable: bool = False, **kwargs: Any) -> None:
        names = list(option_strings)
        if negatable:
            names += ["--no-" + name[2:] for name in option_strings if name.startswith("--")]
        super().__init__(names, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, not (option_string or "").startswith("--no-"))
        _mark_given(namespace, self.dest)

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


def _help(flag: Flag) -> str:
    notes = []
    if flag.default not in (None, "") and flag.action == "store":
        notes.append(f"default: {flag.default}")
    elif flag.default == "" and flag.action == "store":
        notes.append("default: none")
    if flag.action == "negatable":
        notes.append(f"default: {'on' if Boolean()(flag.default or 'false') else 'off'}")
    if flag.env_name:
        notes.append(f"env {flag.env_name}")
    text = flag.help + (f" [{'; '.join(notes)}]" if notes else "")
    return text.replace("%", "%%")


def add_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup,
    flag: Flag,
    environ: Mapping[str, str] | None = None,
) -> argparse.Action:
    """Add ``flag`` to ``parser``; its ``NOE_*`` variable, when set, replaces the default."""
    env = os.environ if environ is None else environ
    raw = env.get(flag.env_name) if flag.env_name else None
    default: Any = flag.default
    if flag.action in ("switch", "negatable") and default is None:
        default = "false"
    if flag.action == "append":
        default = [] if raw is None else [EnvText(item, flag.env_name or "") for item in raw.split(os.pathsep) if item]
    elif raw is not None:
        default = EnvText(raw, flag.env_name or "")
    kwargs: dict[str, Any] = {"dest": flag.dest, "type": _Convert(flag), "default": default, "help": _help(flag)}
    if flag.action in ("switch", "negatable"):
        return parser.add_argument(*flag.names, action=_Switch, negatable=flag.action == "negatable", **kwargs)
    metavar = flag.metavar or getattr(flag.kind, "metavar", None)
    action = _Append if flag.action == "append" else _Store
    return parser.add_argument(*flag.names, action=action, metavar=metavar, required=flag.required, **kwargs)


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup,
    flags: Iterable[Flag],
) -> None:
    for flag in flags:
        add_flag(parser, flag)


def flag_of(action: argparse.Action) -> Flag | None:
    """The declaration behind an argparse action (``None`` for argparse's own, e.g. ``--help``)."""
    convert = action.type
    return convert.flag if isinstance(convert, _Convert) else None


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommand parsers that refuse arguments they do not know themselves.

    argparse hands a subcommand's unknown arguments back to the top-level
    parser, whose error then names ``noe`` and its usage; here the subcommand's
    own parser says it (``noe serve: unrecognized arguments: --x``).
    """

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        parser = super().add_parser(name, **kwargs)
        parser.subcommand = True
        return parser


class NoeArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors on one line (``noe mutate: argument --x: …``), exit status 2.

    Values of repeatable flags read from a variable are parsed here, after the
    command line, since argparse converts only string defaults.
    """

    subcommand = False
    """True for a subcommand's parser: it reports its unknown arguments itself."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {' '.join(message.split())}\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("action", _Subcommands)
        return super().add_subparsers(**kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        if rest and self.subcommand:
            self.error(f"unrecognized arguments: {' '.join(rest)}")
        for action in self._actions:
            values = getattr(ns, action.dest, None)
            if isinstance(action, _Append) and isinstance(values, list) and isinstance(action.type, _Convert):
                try:
                    setattr(ns, action.dest, [action.type(v) if isinstance(v, EnvText) else v for v in values])
                except argparse.ArgumentTypeError as exc:
                    self.error(f"argument {'/'.join(action.option_strings)}: {exc}")
        return ns, rest


def _source(ns: argparse.Namespace, flag: Flag, value: object) -> str:
    """How the user gave ``value``: ``'x'`` on the command line or ``NOE_X='x'`` through the variable."""
    given: set[str] = getattr(ns, _GIVEN, set())
    text = str(value)
    variable = flag.env_name
    if variable and flag.dest not in given and variable in os.environ:
        return _shown(EnvText(text, variable))
    return repr(text)


def given(ns: argparse.Namespace, flag: Flag) -> bool:
    """Whether ``flag`` was given on the command line (not its default, not its variable)."""
    return flag.dest in getattr(ns, _GIVEN, set())


def parse_text(flag: Flag, text: str) -> Any:
    """``flag``'s value parsed from ``text`` outside argparse (a library caller); raises :class:`InvalidSettings`."""
    try:
        return flag.kind(text)
    except ValueError as exc:
        raise InvalidSettings(f"{flag.name}: {_problem(flag, text, exc)}") from None


def usage_error(ns: argparse.Namespace, flag: Flag, problem: str) -> InvalidSettings:
    """A problem found after parsing, phrased like argparse's: ``argument --x: '<value>' <problem>``."""
    return InvalidSettings(f"argument {flag.name}: {_source(ns, flag, getattr(ns, flag.dest, None))} {problem}")


def require(ns: argparse.Namespace, flag: Flag) -> Path | None:
    """The path of an :class:`ExistingFile` / :class:`ExistingDir` flag, checked now; ``None`` when not given.

    Raises :class:`InvalidSettings` phrased as a usage error, so the command
    prints one line and exits 2.
    """
    directory = isinstance(flag.kind, ExistingDir)
    if not directory and not isinstance(flag.kind, ExistingFile):
        raise TypeError(f"{flag.name} does not name an existing file or directory")
    value = getattr(ns, flag.dest, None)
    if value is None:
        return None
    path = Path(value)
    if path.is_dir() if directory else path.is_file():
        return path
    raise usage_error(ns, flag, "is not an existing directory" if directory else "is not an existing file")


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
    OsName(),
    default="linux",
    help="the OS of the cluster's nodes; image platforms of other OSes are ignored (Noe's flag)",
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

POLICY_FLAGS = (
    PREFERRED_ARCH,
    CLUSTER_SCHEDULABLE_ARCHS,
    SYSTEM_OS,
    MATCH_NODE_LABELS,
    STRICT_NAMESPACES,
    ARCH_TOLERATIONS_FLAG,
    PREFERENCE_MODE,
    PREFERRED_ARCH_WEIGHT,
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

# --- noe inspect -------------------------------------------------------------------------------------------

INSPECT_OUTPUT = Flag(
    "--output", Choice(("text", "json", "yaml")), short="-o", env=False, default="text", help="output format"
)
JSON = Flag("--json", Boolean(), env=False, action="switch", help="print one JSON object (same as -o json)")
INSPECT_TIMEOUT = Flag("--timeout", Seconds(0, 3600, above=True), default="30", help="give up after this long")
VERBOSE = Flag(
    "--verbose", Boolean(), short="-v", env=False, action="switch", help="print request and cache counters on stderr"
)
