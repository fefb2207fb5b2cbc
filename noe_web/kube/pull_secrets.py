"""A pod's ``imagePullSecrets``, read through the Kubernetes API into one keychain: the one Secret reader.

:class:`KubePullSecrets` is the :class:`~noe_core.registry.lookup_service.PullSecretReader`
of the webhook (within its admission's share of the deadline), the controller
and ``noe report`` (within the API client's timeout), so all three look images
up with the same credentials and say the same things about Secrets they could
not use. When Secrets are read at all is the lookup service's rule, not this
module's. A Secret that is missing, forbidden, late or unreadable is a warning
and the lookup goes ahead without it (anonymously, or with the node's
credentials): the same fall-back the kubelet would not have, said plainly.
Only a Secret's namespace/name ever appears in a message, never its content.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from noe_core.credentials.docker_config import keychain_from_pull_secret
from noe_core.credentials.keychain import Keychain, MultiKeychain
from noe_core.errors import CredentialError
from noe_core.placement.rules import limit_warning
from noe_core.registry.lookup_service import PullSecrets
from noe_web.kube.client import KubeClient
from noe_web.kube.errors import Forbidden, KubeError, NotFound

MAX_PULL_SECRETS = 16
"""Distinct imagePullSecrets read per pod: one pod must not make noe send thousands of Secret GETs
within one admission (pods name one or two); the rest get one warning."""

READ_WITHOUT_IT = "its images are read without it"
WITHOUT_IT = f"{READ_WITHOUT_IT} (anonymously or as the node)"

# What reading one Secret gave: its keychain, or the warning saying why there is none (and whether noe may not read it).
_Outcome = tuple[Keychain | None, str | None, bool]


@dataclass
class KubePullSecrets:
    """Reads pull Secrets in parallel on ``pool``; thread-safe.

    ``on_unusable(namespace, count)`` is told how many of the Secrets one read
    could not use (a metric). ``forbidden_hint`` (``--pull-secrets-hint``: what
    grants noe the access, e.g. the chart value) follows, once per read, the
    warnings about Secrets noe may not read. With ``remember`` each Secret is read once for the
    reader's life (``noe report``: one run over many pods); otherwise the API
    client's bounded Secret cache decides (the webhook and the controller see
    Secrets rotate).
    """

    kube: KubeClient | None
    pool: concurrent.futures.Executor
    on_unusable: Callable[[str, int], None] | None = None
    remember: bool = False
    forbidden_hint: str = ""
    _known: dict[tuple[str, str], _Outcome] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def read(self, namespace: str, names: Sequence[str], *, budget: float | None = None) -> PullSecrets:
        """The keychain of the named Secrets (``None`` when none could be used) and the problems, as warnings.

        ``budget`` bounds the wait in seconds (``None``: the API client's own timeout).
        """
        names = list(dict.fromkeys(names))
        if not names:
            return PullSecrets()
        warnings: list[str] = []
        if len(names) > MAX_PULL_SECRETS:
            warnings.append(
                limit_warning(
                    f"{len(names) - MAX_PULL_SECRETS} more imagePullSecrets not read (at most {MAX_PULL_SECRETS} "
                    "per pod): images needing them are looked up with the first ones or anonymously"
                )
            )
            names = names[:MAX_PULL_SECRETS]
        if self.kube is None:
            warnings.append(
                limit_warning(
                    "imagePullSecrets not read (no Kubernetes API access): private images looked up anonymously"
                )
            )
            return PullSecrets(None, tuple(warnings))
        outcomes = self._outcomes(self.kube, namespace, names, budget)
        chains = [chain for chain, _, _ in outcomes if chain is not None]
        warnings.extend(warning for _, warning, _ in outcomes if warning is not None)
        if self.forbidden_hint and any(forbidden for _, _, forbidden in outcomes):
            warnings.append(limit_warning(self.forbidden_hint))
        if self.on_unusable is not None and len(chains) < len(outcomes):
            self.on_unusable(namespace, len(outcomes) - len(chains))
        keychain = None if not chains else chains[0] if len(chains) == 1 else MultiKeychain(*chains)
        return PullSecrets(keychain, tuple(warnings))

    def _outcomes(self, kube: KubeClient, namespace: str, names: list[str], budget: float | None) -> list[_Outcome]:
        with self._lock:
            known = {name: self._known[(namespace, name)] for name in names if (namespace, name) in self._known}
        # Each GET runs in a copy of the caller's context, so its log lines carry the admission's uid.
        futures = {
            name: self.pool.submit(contextvars.copy_context().run, kube.get_secret, namespace, name, timeout=budget)
            for name in names
            if name not in known
        }
        concurrent.futures.wait(futures.values(), timeout=budget)
        outcomes: list[_Outcome] = []
        for name in names:
            if name in known:
                outcomes.append(known[name])
                continue
            future = futures[name]
            where = f"imagePullSecret {namespace}/{name}"
            if not future.done():
                future.cancel()
                # Not remembered: the GET may still land in the API client's cache for the next read.
                outcomes.append((None, limit_warning(f"{where}: API did not answer in time; {WITHOUT_IT}"), False))
                continue
            outcome = _outcome(future, where)
            if self.remember:
                with self._lock:
                    self._known[(namespace, name)] = outcome
            outcomes.append(outcome)
        return outcomes


def _outcome(future: concurrent.futures.Future[Any], where: str) -> _Outcome:
    try:
        return keychain_from_pull_secret(future.result(), where), None, False
    except NotFound:
        return None, limit_warning(f"{where} not found; {WITHOUT_IT}"), False
    except Forbidden:
        # Shorter than the others: the hint that follows says what grants noe the access.
        return (
            None,
            limit_warning(f"{where} could not be read (forbidden to noe); its images are read without it"),
            True,
        )
    except KubeError as exc:
        return None, limit_warning(f"{where}: {exc}; {WITHOUT_IT}"), False
    except CredentialError as exc:
        return None, limit_warning(str(exc)), False
