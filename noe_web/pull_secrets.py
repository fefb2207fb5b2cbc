"""A pod's ``imagePullSecrets``, read through the Kubernetes API into one keychain.

Shared by the webhook (within the admission deadline) and the controller (no
deadline beyond the API client's timeout), so both look images up with the
same credentials. A Secret that is missing, forbidden, late or unreadable is a
warning and the lookup goes ahead without it (anonymous access, or the node's
credentials): the same fall-back the kubelet would not have, said plainly.
Only a Secret's namespace/name ever appears in a message, never its content.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from noe_core.errors import CredentialError
from noe_core.policy import limit_warning
from noe_web.kube import Forbidden, KubeClient, KubeError, NotFound

MAX_PULL_SECRETS = 16
"""Distinct imagePullSecrets read per pod: one pod must not make noe send thousands of Secret GETs
within one admission (pods name one or two); the rest get one warning."""


def pull_secret_keychain(
    kube: KubeClient | None,
    namespace: str,
    names: Sequence[str],
    *,
    pool: concurrent.futures.Executor,
    warnings: list[str],
    budget: float | None = None,
    on_unusable: Callable[[int], None] | None = None,
) -> Any:
    """The keychain of the named Secrets (``None`` when none could be used); problems go to ``warnings``.

    ``budget`` bounds the wait in seconds (``None``: the API client's own timeout);
    ``on_unusable`` is told how many of the Secrets could not be used (a metric).
    """
    names = list(dict.fromkeys(names))
    if not names:
        return None
    if len(names) > MAX_PULL_SECRETS:
        warnings.append(
            limit_warning(
                f"{len(names) - MAX_PULL_SECRETS} more imagePullSecrets not read (at most {MAX_PULL_SECRETS} "
                "per pod): images needing them are looked up with the first ones or anonymously"
            )
        )
        names = names[:MAX_PULL_SECRETS]
    if kube is None:
        warnings.append(
            limit_warning("imagePullSecrets not read (no Kubernetes API access): private images looked up anonymously")
        )
        return None
    from noe_core.credentials.docker_config import keychain_from_pull_secret  # noqa: PLC0415
    from noe_core.credentials.keychain import MultiKeychain  # noqa: PLC0415

    # Each GET runs in a copy of the caller's context, so its log lines carry the admission's uid.
    futures = {
        name: pool.submit(contextvars.copy_context().run, kube.get_secret, namespace, name, timeout=budget)
        for name in names
    }
    concurrent.futures.wait(futures.values(), timeout=budget)
    chains = []
    for name, future in futures.items():
        where = f"imagePullSecret {namespace}/{name}"
        if not future.done():
            future.cancel()
            warnings.append(limit_warning(f"{where}: API did not answer in time; trying anonymous access"))
            continue
        try:
            secret = future.result()
            chains.append(keychain_from_pull_secret(secret, where))
        except NotFound:
            warnings.append(limit_warning(f"{where} not found; trying anonymous access"))
        except Forbidden:
            warnings.append(limit_warning(f"{where}: reading it is forbidden; trying anonymous access"))
        except KubeError as exc:
            warnings.append(limit_warning(f"{where}: {exc}; trying anonymous access"))
        except CredentialError as exc:
            warnings.append(limit_warning(str(exc)))
    if on_unusable is not None and len(chains) < len(futures):
        on_unusable(len(futures) - len(chains))
    if not chains:
        return None
    return chains[0] if len(chains) == 1 else MultiKeychain(*chains)
