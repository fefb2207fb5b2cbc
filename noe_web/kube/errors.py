"""What a Kubernetes API call can fail with: one exception type per answer a caller acts on differently."""

from __future__ import annotations

__all__ = [
    "Conflict",
    "CredentialPluginFailed",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "NotFound",
    "TooLargeResourceVersion",
    "TooManyRequests",
    "Unavailable",
    "error_for_status",
]


class KubeError(Exception):
    """A Kubernetes API call that did not give what was asked."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        self.status = status
        super().__init__(message)


class NotFound(KubeError):
    """404: the object does not exist."""


class Forbidden(KubeError):
    """401/403: the webhook's identity may not do this."""


class Unavailable(KubeError):
    """No answer, a timeout or a 5xx."""


class CredentialPluginFailed(Forbidden):
    """The kubeconfig's exec credential plugin gave no token: no request could be authenticated."""


class TooManyRequests(Unavailable):
    """429: throttled, or an eviction refused by a PodDisruptionBudget; try again later."""


class TooLargeResourceVersion(Unavailable):
    """504 ``ResourceVersionTooLarge``: this API server has not seen the ``resourceVersion`` asked for yet
    (another server of the cluster has); a consistent read gets an answer."""


class Conflict(KubeError):
    """409: the object changed since it was read (stale ``resourceVersion``), or already exists."""


class Invalid(KubeError):
    """422: the request was refused as invalid (a failed JSON Patch ``test`` means the object changed)."""


class Gone(KubeError):
    """410: the ``resourceVersion`` a list or watch asked for is too old; list again."""


_STATUS_ERRORS: dict[int, type[KubeError]] = {409: Conflict, 410: Gone, 422: Invalid, 429: TooManyRequests}


def error_for_status(status: int) -> type[KubeError]:
    """The error type of a non-2xx status (404, 401/403, 409, 410, 422, 429; anything else: unavailable)."""
    if status == 404:
        return NotFound
    if status in (401, 403):
        return Forbidden
    return _STATUS_ERRORS.get(status, Unavailable)
