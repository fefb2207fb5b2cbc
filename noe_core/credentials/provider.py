"""Kubelet credential-provider exec plugins as a keychain.

Managed registries (ECR, Artifact Registry, ACR) hand out short-lived
credentials through plugins the kubelet runs (``--image-credential-provider-config``
and ``--image-credential-provider-bin-dir``). Running the same plugins with the
same configuration gives the webhook exactly the node's view of private images,
without a Secret to rotate.

The protocol (``credentialprovider.kubelet.k8s.io/v1``, also ``v1beta1`` and
``v1alpha1``): for an image matching a provider's ``matchImages``, run
``BIN_DIR/NAME ARGS...`` with a ``CredentialProviderRequest`` JSON on stdin;
the plugin prints a ``CredentialProviderResponse`` whose ``auth`` map binds
image patterns to username/password, with a ``cacheKeyType`` (``Image``,
``Registry`` or ``Global``) and an optional ``cacheDuration`` (else the
provider's ``defaultCacheDuration``; ``0`` means do not cache).

Decisions, where the kubelet leaves room:

* the request's ``image`` is the repository without tag or digest
  (``docker.io/library/nginx``), as the kubelet sends it;
* the plugin runs with a small environment — ``PATH``, ``HOME``, locale, proxy
  settings and the workload-identity variables cloud SDKs read (``AWS_*``,
  ``AZURE_*``, ``GOOGLE_*``...) — plus the provider's ``env``; the webhook's own
  settings never reach it;
* a plugin that fails, hangs past its timeout, or prints something that is not
  a response yields no credentials and a log line naming the plugin and the exit
  status; only a short, redacted excerpt of its stderr is kept and its stdout
  (where credentials travel) is never shown;
* concurrent lookups of one image share one plugin run.

Service-account-token providers (``tokenAttributes``, Kubernetes 1.33+) need
the pod's token, which the webhook does not have: they run without one.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import yaml

from noe_core.credentials.keychain import Credential, unique
from noe_core.credentials.program import run_program
from noe_core.errors import (
    CredentialError,
    DeadlineExceeded,
    InvalidSettings,
    ProgramFailed,
    ProgramTimedOut,
    RegistryError,
)
from noe_core.name.hostmatch import ImagePattern, parse_image_pattern
from noe_core.name.reference import Reference
from noe_core.util import fields
from noe_core.util.deadline import Deadline
from noe_core.util.duration import parse_go_duration
from noe_core.util.lru import LRUCache, SingleFlight
from noe_core.util.safe_load import load_json, load_yaml

log = logging.getLogger(__name__)

CONFIG_API_VERSIONS: Final = (
    "kubelet.config.k8s.io/v1",
    "kubelet.config.k8s.io/v1beta1",
    "kubelet.config.k8s.io/v1alpha1",
)
PROVIDER_API_VERSIONS: Final = (
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
)
CacheKeyType = Literal["Image", "Registry", "Global"]
CACHE_KEY_TYPES: Final[tuple[CacheKeyType, ...]] = ("Image", "Registry", "Global")

DEFAULT_TIMEOUT: Final = 10.0
MAX_OUTPUT_BYTES: Final = 1 << 20
STDERR_EXCERPT_CHARS: Final = 200

#: Environment variables handed to plugins from the webhook's own environment
#: (exact names, and prefixes ending in ``_``): what a cloud SDK needs to find
#: the pod's workload identity, and nothing of noe's configuration.
DEFAULT_INHERITED_ENV: Final = (
    "PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR",
    "AWS_", "AZURE_", "GOOGLE_", "GCE_", "CLOUDSDK_",
)  # fmt: skip
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ProviderConfig:
    """One entry of ``CredentialProviderConfig.providers``."""

    name: str
    match_images: tuple[ImagePattern, ...]
    default_cache_duration: float
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def matches(self, reference: Reference) -> bool:
        """Whether the kubelet would run this provider for ``reference``."""
        return any(pattern.matches(reference) for pattern in self.match_images)


def _yaml_error(exc: yaml.YAMLError) -> str:
    # str(exc) quotes the document around the error; keep only what and where.
    problem = getattr(exc, "problem", None) or "syntax error"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _string(value: object, what: str, source: str, *, required: bool = True) -> str:
    return fields.string(
        value,
        f"{source}: {what}",
        required=required,
        non_empty=required,
        missing=f"{source}: {what} must be a non-empty string",
        error=InvalidSettings,
    )


def _provider(index: int, item: object, source: str) -> ProviderConfig:
    item = fields.mapping(item, f"{source}: providers[{index}]", required=True, error=InvalidSettings)
    name = _string(item.get("name"), f"providers[{index}].name", source)
    where = f"provider {name!r}"
    if "/" in name or "\0" in name or " " in name or name in (".", ".."):
        raise InvalidSettings(
            f"{source}: {where}: the name must be a plain file name in the bin dir (no '/', no spaces, not '.' or '..')"
        )
    api_version = _string(item.get("apiVersion"), f"{where}: apiVersion", source)
    if api_version not in PROVIDER_API_VERSIONS:
        raise InvalidSettings(
            f"{source}: {where}: apiVersion {api_version!r} is not one of {', '.join(PROVIDER_API_VERSIONS)}"
        )
    images = item.get("matchImages")
    if not isinstance(images, list) or not images:
        raise InvalidSettings(f"{source}: {where}: matchImages must be a non-empty list")
    try:
        patterns = tuple(parse_image_pattern(_string(image, "matchImages entry", source)) for image in images)
    except InvalidSettings as exc:
        raise InvalidSettings(f"{source}: {where}: {exc}") from None
    duration_text = item.get("defaultCacheDuration")
    if duration_text is None:
        raise InvalidSettings(f"{source}: {where}: defaultCacheDuration is required (e.g. '12h', or '0s')")
    try:
        duration = parse_go_duration(duration_text)
    except ValueError as exc:
        raise InvalidSettings(f"{source}: {where}: defaultCacheDuration: {exc}") from None
    args = item.get("args") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise InvalidSettings(f"{source}: {where}: args must be a list of strings")
    env: list[tuple[str, str]] = []
    for entry in item.get("env") or []:
        if not isinstance(entry, Mapping):
            raise InvalidSettings(f"{source}: {where}: env entries must be objects with name and value")
        env_name = _string(entry.get("name"), f"{where}: env name", source)
        env.append((env_name, _string(entry.get("value"), f"{where}: env {env_name!r} value", source, required=False)))
    if item.get("tokenAttributes"):
        log.warning("%s: %s asks for a service account token, which noe cannot supply; it runs without", source, where)
    return ProviderConfig(name, patterns, duration, api_version, tuple(args), tuple(env))


def parse_credential_provider_config(data: bytes | str, source: str) -> tuple[ProviderConfig, ...]:
    """The providers of a ``CredentialProviderConfig`` document (YAML or JSON)."""
    try:
        document = load_yaml(data)
    except yaml.YAMLError as exc:
        raise InvalidSettings(f"{source}: not valid YAML or JSON: {_yaml_error(exc)}") from None
    if not isinstance(document, Mapping):
        raise InvalidSettings(f"{source}: a CredentialProviderConfig must be an object")
    if document.get("kind") != "CredentialProviderConfig":
        raise InvalidSettings(f"{source}: kind must be 'CredentialProviderConfig', not {document.get('kind')!r}")
    if document.get("apiVersion") not in CONFIG_API_VERSIONS:
        raise InvalidSettings(
            f"{source}: apiVersion {document.get('apiVersion')!r} is not one of {', '.join(CONFIG_API_VERSIONS)}"
        )
    items = document.get("providers")
    if not isinstance(items, list) or not items:
        raise InvalidSettings(f"{source}: providers must be a non-empty list")
    providers = tuple(_provider(index, item, source) for index, item in enumerate(items))
    names = [provider.name for provider in providers]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidSettings(f"{source}: provider names must be unique: {', '.join(duplicates)}")
    return providers


@dataclass(frozen=True)
class ProviderResponse:
    """A plugin's answer: credentials by image pattern, and how long to keep them."""

    cache_key_type: CacheKeyType
    cache_duration: float | None
    auth: tuple[tuple[ImagePattern, Credential], ...]

    def credentials_for(self, reference: Reference) -> tuple[Credential, ...]:
        """The credentials whose pattern covers ``reference``, most specific first."""
        matching = [(pattern, credential) for pattern, credential in self.auth if pattern.matches(reference)]
        matching.sort(key=lambda entry: entry[0].specificity, reverse=True)
        return unique(credential for _, credential in matching)


def parse_provider_response(stdout: bytes, provider: ProviderConfig) -> ProviderResponse:
    """Read a ``CredentialProviderResponse``; raises :class:`RegistryError` without echoing the output."""
    prefix = f"credential provider {provider.name!r}"
    try:
        document = load_json(stdout)
    except (UnicodeDecodeError, ValueError):
        raise RegistryError(
            f"{prefix} printed {len(stdout)} bytes that are not a JSON CredentialProviderResponse"
        ) from None
    if not isinstance(document, Mapping):
        raise RegistryError(f"{prefix} printed JSON that is not a CredentialProviderResponse object")
    if document.get("kind") != "CredentialProviderResponse":
        kind = str(document.get("kind"))[:64]
        raise RegistryError(f"{prefix} answered kind {kind!r}, not CredentialProviderResponse")
    if document.get("apiVersion") != provider.api_version:
        raise RegistryError(
            f"{prefix} answered apiVersion {str(document.get('apiVersion'))[:64]!r}, "
            f"not the {provider.api_version!r} it was asked in"
        )
    key_type = document.get("cacheKeyType")
    if key_type not in CACHE_KEY_TYPES:
        raise RegistryError(f"{prefix} answered cacheKeyType {str(key_type)[:32]!r}, not Image, Registry or Global")
    duration: float | None = None
    if document.get("cacheDuration") is not None:
        try:
            duration = parse_go_duration(document["cacheDuration"])
        except ValueError:
            raise RegistryError(f"{prefix} answered a cacheDuration that is not a Go duration") from None
    auth = document.get("auth") or {}
    if not isinstance(auth, Mapping):
        raise RegistryError(f"{prefix} answered an auth field that is not a map of image patterns")
    source = f"credential provider {provider.name}"
    entries: list[tuple[ImagePattern, Credential]] = []
    for key, value in auth.items():
        try:
            pattern = parse_image_pattern(key)
        except InvalidSettings as exc:
            log.warning("%s: auth key ignored: %s", prefix, exc)
            continue
        if not isinstance(value, Mapping):
            raise RegistryError(f"{prefix} answered auth[{key!r}] that is not an object")
        username, password = value.get("username") or "", value.get("password") or ""
        if not isinstance(username, str) or not isinstance(password, str):
            raise RegistryError(f"{prefix} answered auth[{key!r}] with a non-string username or password")
        try:
            entries.append((pattern, Credential(username, password, source)))
        except CredentialError:
            raise RegistryError(f"{prefix} answered auth[{key!r}] with a username containing ':'") from None
    return ProviderResponse(key_type, duration, tuple(entries))


def _plugin_env(inherit: Iterable[str], provider: ProviderConfig) -> dict[str, str]:
    names = tuple(item for item in inherit if not item.endswith("_"))
    prefixes = tuple(item for item in inherit if item.endswith("_"))
    env = {key: value for key, value in os.environ.items() if key in names or key.startswith(prefixes)}
    env.setdefault("PATH", _DEFAULT_PATH)
    env.update(provider.env)
    return env


def run_provider(
    provider: ProviderConfig,
    executable: str,
    image: str,
    *,
    timeout: float,
    env: Mapping[str, str],
) -> ProviderResponse:
    """Run one plugin for ``image``; raises :class:`RegistryError` (or ``DeadlineExceeded``) on failure.

    :func:`~noe_core.credentials.program.run_program` runs it: its own process
    group killed at the timeout (a helper holding the pipe open would otherwise
    hang us), its output capped, only a redacted excerpt of its stderr kept.
    """
    prefix = f"credential provider {provider.name!r}"
    request = json.dumps({"apiVersion": provider.api_version, "kind": "CredentialProviderRequest", "image": image})
    try:
        finished = run_program(
            [executable, *provider.args],
            name=prefix,
            timeout=timeout,
            env=env,
            stdin=request.encode(),
            max_stdout=MAX_OUTPUT_BYTES,
        )
    except ProgramTimedOut as exc:
        raise DeadlineExceeded(str(exc)) from None
    except ProgramFailed as exc:
        raise RegistryError(str(exc)) from None
    if finished.returncode != 0:
        excerpt = finished.excerpt(STDERR_EXCERPT_CHARS)
        raise RegistryError(f"{prefix} {finished.status}" + (f": {excerpt}" if excerpt else ""), temporary=True)
    return parse_provider_response(finished.stdout, provider)


ErrorHook = Callable[[ProviderConfig, Reference, RegistryError], None]


def _log_error(provider: ProviderConfig, reference: Reference, error: RegistryError) -> None:
    log.warning("no credentials from %s for %s: %s", provider.name, reference, error)


class CredentialProviderKeychain:
    """Credentials from kubelet credential-provider plugins, cached as each plugin asks.

    ``timeout`` bounds one plugin run (never beyond the caller's remaining
    time); ``inherit_env`` lists what the plugins may see of noe's environment
    (names, or prefixes ending in ``_``); ``on_error`` is told about each failed
    run (default: a warning log line), e.g. to count failures in metrics.
    """

    def __init__(
        self,
        config_path: str | os.PathLike[str],
        bin_dir: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        inherit_env: Sequence[str] = DEFAULT_INHERITED_ENV,
        max_cache_entries: int = 4096,
        on_error: ErrorHook = _log_error,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        config_text = os.fspath(config_path)
        source = f"credential provider config {config_text}"
        try:
            with open(config_text, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise InvalidSettings(f"cannot read {source}: {exc.strerror or exc}") from None
        if timeout <= 0:
            raise InvalidSettings(f"credential provider timeout must be positive, not {timeout}")
        self._providers = parse_credential_provider_config(data, source)
        self._bin_dir = os.path.abspath(os.fspath(bin_dir))
        if not os.path.isdir(self._bin_dir):
            raise InvalidSettings(f"credential provider bin dir {self._bin_dir} is not a directory")
        self._executables: dict[str, str] = {}
        for provider in self._providers:
            executable = os.path.join(self._bin_dir, provider.name)
            if not os.path.isfile(executable) or not os.access(executable, os.X_OK):
                raise InvalidSettings(f"credential provider {provider.name!r}: {executable} is not an executable file")
            self._executables[provider.name] = executable
        self._timeout = timeout
        self._inherit = tuple(inherit_env)
        self._max_entries = max_cache_entries
        self._on_error = on_error
        self._clock = clock
        # What each plugin answered, for as long as it said (cacheKeyType, cacheDuration).
        self._cache: LRUCache[tuple[str, str, str], ProviderResponse] = LRUCache(max_cache_entries, clock=clock)
        # Concurrent lookups of one image share one run of each plugin.
        self._flight: SingleFlight[tuple[str, str], tuple[Credential, ...]] = SingleFlight()

    @property
    def providers(self) -> tuple[ProviderConfig, ...]:
        return self._providers

    def resolve(self, reference: Reference, *, timeout: float | None = None) -> Sequence[Credential]:
        """Credentials from every provider that matches ``reference``, in configuration order."""
        start = self._clock()
        found: list[Credential] = []
        for provider in self._providers:
            if not provider.matches(reference):
                continue
            budget = self._timeout
            if timeout is not None:
                budget = min(budget, timeout - (self._clock() - start))
            found.extend(self._provide(provider, reference, budget))
        return unique(found)

    def _cache_keys(self, provider: ProviderConfig, reference: Reference) -> dict[CacheKeyType, tuple[str, str, str]]:
        return {
            "Image": (provider.name, "Image", reference.context),
            "Registry": (provider.name, "Registry", reference.registry),
            "Global": (provider.name, "Global", ""),
        }

    def _cached(self, provider: ProviderConfig, reference: Reference) -> ProviderResponse | None:
        for key in self._cache_keys(provider, reference).values():
            response = self._cache.get(key)
            if response is not None:
                return response
        return None

    def _store(self, provider: ProviderConfig, reference: Reference, response: ProviderResponse) -> None:
        duration = provider.default_cache_duration if response.cache_duration is None else response.cache_duration
        if duration <= 0:
            return
        self._cache.set(self._cache_keys(provider, reference)[response.cache_key_type], response, duration)

    def _provide(self, provider: ProviderConfig, reference: Reference, budget: float) -> tuple[Credential, ...]:
        cached = self._cached(provider, reference)
        if cached is not None:
            return cached.credentials_for(reference)
        if budget <= 0:
            self._on_error(provider, reference, DeadlineExceeded(f"no time left to run {provider.name!r}"))
            return ()
        deadline = Deadline.after(budget, clock=self._clock)
        try:
            credentials, _ = self._flight.do(
                (provider.name, reference.context), lambda: self._run(provider, reference, budget), deadline
            )
        except RegistryError as exc:
            # Only a waiter gets here (the run itself reports its failures and returns nothing):
            # it ran out of time, or the run it waited for broke.
            if isinstance(exc, DeadlineExceeded):
                exc = DeadlineExceeded(f"{provider.name!r} did not answer in time")
            self._on_error(provider, reference, exc)
            return ()
        return credentials

    def _run(self, provider: ProviderConfig, reference: Reference, budget: float) -> tuple[Credential, ...]:
        # Re-check: a flight that just finished may have filled the cache.
        cached = self._cached(provider, reference)
        if cached is not None:
            return cached.credentials_for(reference)
        try:
            response = run_provider(
                provider,
                self._executables[provider.name],
                reference.context,
                timeout=budget,
                env=_plugin_env(self._inherit, provider),
            )
        except RegistryError as exc:
            self._on_error(provider, reference, exc)
            return ()
        self._store(provider, reference, response)
        return response.credentials_for(reference)

    def clear_cache(self) -> None:
        """Forget every cached answer (e.g. after the registry refused a cached credential)."""
        self._cache.clear()

    def __repr__(self) -> str:
        return f"CredentialProviderKeychain({', '.join(p.name for p in self._providers)})"
