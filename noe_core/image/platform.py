"""Platforms (os / architecture / variant / os.version) and their normalisation.

Registries and build tools spell the same CPU in several ways (``x86_64``,
``aarch64``, ``armhf``…). Kubernetes nodes label themselves with Go's names
(``kubernetes.io/arch=amd64``), so every platform is mapped onto those names
before it is compared. ``arm64`` and ``arm64/v8`` are the same platform: they
compare equal, while ``str()`` keeps the variant the registry wrote.

The textual form follows containerd: ``os[(os.version)]/architecture[/variant]``,
e.g. ``linux/arm64/v8`` or ``windows(10.0.17763.5122)/amd64``.

Two parts of a platform decide where an image can run beyond OS and
architecture, and are read here into typed values: a Windows ``os.version``
(:class:`OsVersion`; a Windows container needs a host of the same build) and
the x86-64 micro-architecture level an ``amd64`` variant names
(:func:`x86_64_level`: ``v1``..``v4``, none meaning ``v1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from noe_core.errors import InvalidPlatform

UNKNOWN = "unknown"

_OS_ALIASES = {"macos": "darwin"}
# Go's GOOS / GOARCH names: they tell "arm64/v8" (architecture/variant) from "linux/arm64" (os/architecture).
KNOWN_OSES = frozenset(
    [
        "aix",
        "android",
        "darwin",
        "dragonfly",
        "freebsd",
        "illumos",
        "ios",
        "js",
        "linux",
        "netbsd",
        "openbsd",
        "plan9",
        "solaris",
        "wasip1",
        "windows",
    ]
)
KNOWN_ARCHITECTURES = frozenset(
    [
        "386",
        "amd64",
        "arm",
        "arm64",
        "loong64",
        "mips",
        "mipsle",
        "mips64",
        "mips64le",
        "ppc64",
        "ppc64le",
        "riscv64",
        "s390x",
        "wasm",
    ]
)
ARCHITECTURE_ALIASES = {
    "x86_64": "amd64",
    "x86-64": "amd64",
    "aarch64": "arm64",
    "i386": "386",
    "i686": "386",
    "armhf": "arm",
    "armel": "arm",
    "armv7": "arm",
    "armv7l": "arm",
    "armv6": "arm",
    "armv6l": "arm",
    "ppc64el": "ppc64le",
}
"""The other names an operator may write for a GOARCH architecture (in placement policies, whose CRD
lists exactly these and :data:`KNOWN_ARCHITECTURES`); :func:`normalize_architecture` reads them alike."""
_COMPONENT = re.compile(r"^[a-z0-9._-]+$")
_OS_WITH_VERSION = re.compile(r"^(?P<os>[^()]*)\((?P<version>[^()]*)\)$")
_WINDOWS_VERSION = re.compile(r"^(\d{1,10})\.(\d{1,10})\.(\d{1,10})(?:\.(\d{1,10}))?$")
_X86_64_LEVELS = {"": 1, "v1": 1, "v2": 2, "v3": 3, "v4": 4}
X86_64_MAX_LEVEL = 4


def x86_64_level(variant: str) -> int | None:
    """The x86-64 level an ``amd64`` variant names (``v3`` → 3; none → 1); ``None`` for one it does not."""
    return _X86_64_LEVELS.get(variant.strip().lower())


@dataclass(frozen=True, order=True)
class OsVersion:
    """A Windows ``os.version``, ``major.minor.build[.revision]`` (``10.0.20348.2340``), as numbers.

    A process-isolated Windows container runs only on a host of the same build, so
    :attr:`build` (the first three numbers, as ``node.kubernetes.io/windows-build``
    writes them) is what a node must match; the revision (the monthly patch) is not.
    """

    major: int
    minor: int
    patch: int
    revision: int | None = None

    @classmethod
    def parse(cls, text: str) -> OsVersion:
        """Read ``10.0.20348`` or ``10.0.20348.2340``; raise :class:`InvalidPlatform` for anything else."""
        match = _WINDOWS_VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise InvalidPlatform(str(text)[:100], "os.version must read major.minor.build[.revision], e.g. 10.0.20348")
        major, minor, patch, revision = match.groups()
        return cls(int(major), int(minor), int(patch), None if revision is None else int(revision))

    @property
    def build(self) -> str:
        """``major.minor.build``: the value of a Windows node's ``node.kubernetes.io/windows-build`` label."""
        return f"{self.major}.{self.minor}.{self.patch}"

    def __str__(self) -> str:
        return self.build if self.revision is None else f"{self.build}.{self.revision}"


def normalize_os(os_name: str) -> str:
    """Lower-case an OS name and map aliases (``macos`` → ``darwin``)."""
    lowered = os_name.strip().lower()
    return _OS_ALIASES.get(lowered, lowered)


def normalize_architecture(architecture: str, variant: str = "") -> tuple[str, str]:
    """Map an architecture and variant onto Go/Kubernetes names.

    The variant is kept as written where it carries no ambiguity (``arm64/v8``
    stays ``v8`` so that output matches the registry); use :meth:`Platform.key`
    to compare.
    """
    arch = architecture.strip().lower()
    var = variant.strip().lower()
    if arch in ("x86_64", "x86-64", "amd64"):
        return "amd64", "" if var == "v1" else var
    if arch in ("aarch64", "arm64"):
        if var in ("8", "8.0", "v8", "v8.0"):
            var = "v8"
        elif var in ("9", "9.0", "v9.0"):
            var = "v9"
        return "arm64", var
    if arch in ("i386", "i486", "i586", "i686", "x86", "386"):
        return "386", ""
    if arch == "armhf":
        return "arm", "v7"
    if arch == "armel":
        return "arm", "v6"
    if arch in ("arm", "armv7", "armv7l", "armv6", "armv6l", "armv5", "armv5l", "armv8l"):
        implied = re.match(r"^armv(\d)", arch)
        if implied and not var:
            var = implied.group(1)
        if var in ("", "7"):
            var = "v7"
        elif var in ("5", "6", "8"):
            var = f"v{var}"
        return "arm", var
    if arch in ("ppc64el",):
        return "ppc64le", var
    if arch in ("x390x",):
        return "s390x", var
    return arch, var


def normalize_arch_name(name: str) -> str:
    """Normalise an architecture as a node label spells it (``x86_64`` → ``amd64``).

    Variants are dropped (``arm/v7`` → ``arm``): ``kubernetes.io/arch`` carries none.
    """
    arch, _variant = normalize_architecture(name.split("/", 1)[0])
    return arch


@dataclass(frozen=True, eq=False)
class Platform:
    """A platform as a registry describes it, with architecture aliases resolved.

    Build one with :meth:`Platform.of` (normalises) or :func:`parse_platform`.
    Equality and hashing use :meth:`key`, so ``linux/arm64`` == ``linux/arm64/v8``.
    """

    os: str
    architecture: str
    variant: str = ""
    os_version: str = ""
    os_features: tuple[str, ...] = field(default=())

    @classmethod
    def of(
        cls,
        os: str = "",
        architecture: str = "",
        variant: str = "",
        os_version: str = "",
        os_features: tuple[str, ...] = (),
    ) -> Platform:
        arch, var = normalize_architecture(architecture, variant)
        return cls(normalize_os(os), arch, var, os_version.strip(), tuple(os_features))

    def key(self) -> tuple[str, str, str, str]:
        """The comparison key: defaults that mean nothing are dropped (arm64 ``v8``, arm ``v7``)."""
        variant = self.variant
        if self.architecture == "arm64" and variant == "v8":
            variant = ""
        return (self.os, self.architecture, variant, self.os_version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Platform):
            return NotImplemented
        return self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __lt__(self, other: Platform) -> bool:
        return self.key() < other.key()

    @property
    def is_unknown(self) -> bool:
        """True for buildkit's ``unknown/unknown`` placeholder (attestations) and similar."""
        return UNKNOWN in (self.os, self.architecture)

    @property
    def level(self) -> int | None:
        """The x86-64 level of an ``amd64`` entry (its variant; none = 1), ``None`` for an unknown variant
        or another architecture (levels are an x86-64 notion: ``arm64/v8`` says nothing of the kind)."""
        return x86_64_level(self.variant) if self.architecture == "amd64" else None

    @property
    def version(self) -> OsVersion | None:
        """``os.version`` as a Windows version; ``None`` when absent. Raises :class:`InvalidPlatform` when
        it is not ``major.minor.build[.revision]``."""
        return OsVersion.parse(self.os_version) if self.os_version else None

    @property
    def is_complete(self) -> bool:
        """True when both OS and architecture are known (strict namespaces require it)."""
        return bool(self.os) and bool(self.architecture) and not self.is_unknown

    def __str__(self) -> str:
        os_part = f"{self.os}({self.os_version})" if self.os_version else self.os
        if not os_part:
            # a lone architecture, as parse_platform("arm64") reads it back
            return "/".join(p for p in (self.architecture, self.variant) if p)
        parts = [os_part, self.architecture]
        if self.variant:
            parts.append(self.variant)
        return "/".join(parts)

    def to_json(self) -> dict[str, str]:
        """The OCI image-spec shape: variant and ``os.version`` only when present."""
        out = {"os": self.os, "architecture": self.architecture}
        if self.variant:
            out["variant"] = self.variant
        if self.os_version:
            out["os.version"] = self.os_version
        return out


def _check_component(text: str, value: str, what: str) -> None:
    if not value:
        raise InvalidPlatform(text, f"empty {what}")
    if not _COMPONENT.match(value):
        raise InvalidPlatform(text, f"{what} {value!r} has characters outside [a-z0-9._-]")


def parse_platform(text: str) -> Platform:
    """Parse ``os[(os.version)]/arch[/variant]``; a lone word is an architecture.

    ``linux/arm64/v8``, ``linux/amd64``, ``windows(10.0.17763)/amd64``, ``arm64``.
    Two words whose first is a known architecture and not a known OS are
    ``architecture/variant`` (``arm64/v8``, ``arm/v7``), as containerd reads them.
    """
    if not isinstance(text, str):
        raise InvalidPlatform(repr(text), "a platform must be a string such as 'linux/arm64'")
    stripped = text.strip()
    if not stripped or stripped != text:
        raise InvalidPlatform(text, "empty or surrounded by whitespace")
    parts = stripped.split("/")
    if len(parts) > 3:
        raise InvalidPlatform(text, "expected os/architecture[/variant]")
    if len(parts) == 1:
        arch = parts[0].lower()
        _check_component(text, arch, "architecture")
        return Platform.of("", arch)
    if len(parts) == 2 and parts[0].lower() not in KNOWN_OSES:
        arch, variant = parts[0].lower(), parts[1].lower()
        if normalize_architecture(arch)[0] in KNOWN_ARCHITECTURES:
            _check_component(text, arch, "architecture")
            _check_component(text, variant, "variant")
            return Platform.of("", arch, variant)
    os_part = parts[0]
    os_version = ""
    match = _OS_WITH_VERSION.match(os_part)
    if match:
        os_part, os_version = match.group("os"), match.group("version")
        if not os_version:
            raise InvalidPlatform(text, "empty os.version in parentheses")
    os_name = os_part.lower()
    arch = parts[1].lower()
    variant = parts[2].lower() if len(parts) == 3 else ""
    _check_component(text, os_name, "os")
    _check_component(text, arch, "architecture")
    if len(parts) == 3:
        _check_component(text, variant, "variant")
    return Platform.of(os_name, arch, variant, os_version)
