"""Every error noe_core raises, as types a caller can catch by meaning.

    NoeError
    ├── InvalidInput              bad input from a user or the API server: never retried
    │   ├── InvalidReference      an image reference that does not follow the distribution grammar
    │   ├── InvalidPlatform       a platform string such as ``linux/arm64/v8`` that cannot be read
    │   ├── InvalidObject         a malformed AdmissionReview, Pod or DaemonSet
    │   ├── InvalidSettings       a configuration value that cannot work (start-up stops on it)
    │   ├── InvalidSelector       a label selector the API server would refuse
    │   ├── InvalidPolicy         a placement policy that is ignored whole (its ``reason`` goes to its status)
    │   └── CredentialError       credentials that cannot be read (a pull Secret, a docker or containerd
    │                             config, a username): at request time the lookup goes on without them
    ├── ProgramFailed             a credential program that could not be started or flooded its output
    │   └── ProgramTimedOut       … or was still running at its timeout (its process group was killed)
    ├── ManifestError             a manifest or config blob that cannot be read
    │   └── UnsupportedManifest   a known but unsupported format (Docker schema 1)
    └── RegistryError             the registry could not answer usefully
        ├── AuthError             401/403 with no credentials that work
        │   └── ChallengeError    a ``WWW-Authenticate`` header that cannot be read
        ├── TLSFailure            the TLS handshake failed (unknown CA, or no TLS at all)
        ├── DigestMismatch        the body does not hash to the digest it was fetched by
        └── DeadlineExceeded      the lookup ran out of time

Messages name the offending input and say what to check; they never carry a
credential, a token or the content of a Secret.
"""

from __future__ import annotations


class NoeError(Exception):
    """Base of every error raised by noe_core."""


class InvalidInput(NoeError, ValueError):
    """Input that will never become valid by retrying."""


class InvalidReference(InvalidInput):
    """An image reference that does not follow the distribution reference grammar."""

    def __init__(self, reference: str, reason: str) -> None:
        self.reference = reference
        self.reason = reason
        super().__init__(f"invalid image reference {reference!r}: {reason}")


class InvalidPlatform(InvalidInput):
    """A platform string that cannot be read."""

    def __init__(self, platform: str, reason: str) -> None:
        self.platform = platform
        self.reason = reason
        super().__init__(f"invalid platform {platform!r}: {reason}")


class InvalidObject(InvalidInput):
    """A malformed AdmissionReview, Pod or DaemonSet."""


class InvalidSettings(InvalidInput):
    """A setting that cannot work; start-up stops with this message."""


class InvalidSelector(InvalidInput):
    """A label selector that the API server would refuse; the message names the field."""


class InvalidPolicy(InvalidInput):
    """A placement policy that cannot be applied: it is ignored whole and its status says why.

    ``reason`` is the CamelCase reason of its ``Accepted=False`` condition; the
    message names the offending field and value.
    """

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class CredentialError(InvalidInput):
    """Credentials that cannot be read: a malformed pull Secret, docker or containerd config entry.

    Raised at request time (pull Secrets are read per admission, credential
    files when they change), where the caller warns and goes on without them;
    at start-up the first read of a credential file turns it into
    :class:`InvalidSettings`. Messages name the source, never the secret.
    """


class ProgramFailed(NoeError):
    """A credential program (:mod:`noe_core.credentials.program`) that gave no usable run.

    It could not be started, or printed more than a response can be; the
    message names the program, never what it printed on standard output.
    """


class ProgramTimedOut(ProgramFailed):
    """A credential program still running at its timeout; its whole process group was killed."""


class ManifestError(NoeError):
    """A manifest or image config that cannot be parsed."""


class UnsupportedManifest(ManifestError):
    """A recognised manifest format that noe does not read (Docker schema 1)."""


class RegistryError(NoeError):
    """A registry answer that does not give the image's platforms.

    ``temporary`` says whether the same request may succeed later (5xx, 429,
    timeouts); permanent errors (404, 401 without credentials) are not retried.
    """

    def __init__(
        self,
        message: str,
        *,
        registry: str = "",
        status: int | None = None,
        temporary: bool = False,
    ) -> None:
        self.registry = registry
        self.status = status
        self.temporary = temporary
        super().__init__(message)


class AuthError(RegistryError):
    """The registry refused access and no configured credential worked."""


class ChallengeError(AuthError):
    """A ``WWW-Authenticate`` header that cannot be read (:mod:`noe_core.registry.challenge`)."""

    def __init__(self, reason: str, *, registry: str = "") -> None:
        where = f" from registry {registry}" if registry else ""
        super().__init__(
            f"unreadable WWW-Authenticate header{where}: {reason}; the registry or a proxy in front "
            "of it sent a malformed authentication challenge",
            registry=registry,
            status=401,
        )


class TLSFailure(RegistryError):
    """The TLS handshake failed (unknown CA, or the host does not speak TLS).

    An ``--insecure-registries`` host that fails so is retried over plain HTTP.
    """


class DigestMismatch(RegistryError):
    """A body fetched by digest does not hash to that digest."""


class DeadlineExceeded(RegistryError):
    """The lookup did not finish before its deadline."""

    def __init__(self, message: str, *, registry: str = "") -> None:
        super().__init__(message, registry=registry, temporary=True)
