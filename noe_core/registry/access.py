"""Who may be given a cached answer: the webhook's version of KEP-2535 ("ensure secret pulled images").

A cached image is shared freely only when it was read anonymously. Otherwise a request gets it
only when one of its own credentials (pull secrets, node credentials) was seen reading that
repository within ``--cache-ttl``: the resolver verifies an unseen credential with one ``HEAD``
of the manifest, which does not count against pull limits, before it serves the cached facts.
A request whose credentials cannot read the image gets the registry's refusal, which the
policy turns into the contract's "cannot inspect" outcome (a warning, or a deny in a strict
namespace), exactly as if nothing were cached.

Grants are kept per (registry/repository, credential fingerprint): in memory, and in each shared
level there is (:class:`~noe_core.registry.cache.layers.SharedLevel`: the node's SQLite store,
the replicas' Redis), so a credential verified by one worker or replica counts for all.
Fingerprints are keyed hashes (:meth:`Credential.keyed_fingerprint`), never the credential
itself, nor an unkeyed hash of it. The key is the farthest level's: with Redis, the shared
``--cache-key-file`` every replica mounts (so fingerprints agree across replicas); else the
node store's; else one made for this process.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence

from noe_core.credentials.keychain import Credential
from noe_core.registry.cache.layers import SharedLevel
from noe_core.util.deadline import Clock
from noe_core.util.lru import LRUCache

ANONYMOUS = "anonymous"
"""The fingerprint of anonymous access: a grant to it covers every request."""


class AccessGrants:
    """Remembers which credentials could read which repository, for ``ttl`` seconds; thread-safe."""

    def __init__(
        self, *, ttl: float, maxsize: int, levels: Sequence[SharedLevel] = (), clock: Clock = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._levels = tuple(levels)
        self._key = self._levels[-1].key if self._levels else secrets.token_bytes(32)
        self._memory: LRUCache[tuple[str, str], bool] = LRUCache(maxsize, clock=clock)

    def fingerprint(self, credential: Credential | None) -> str:
        """``anonymous``, or the keyed hash of ``credential``."""
        return ANONYMOUS if credential is None else credential.keyed_fingerprint(self._key)

    def record(self, context: str, credential: Credential | None) -> None:
        """``credential`` (``None``: anonymous access) has just read ``context`` (registry/repository)."""
        if self._ttl <= 0:
            return
        fingerprint = self.fingerprint(credential)
        self._memory.set((context, fingerprint), True, self._ttl)
        for level in self._levels:
            level.grant(context, fingerprint, self._ttl)

    def is_public(self, context: str) -> bool:
        """Whether ``context`` was read anonymously within the TTL (memory only: for the no-I/O path)."""
        return self._memory.get((context, ANONYMOUS)) is not None

    def allows(self, context: str, credentials: Sequence[Credential], *, disk: bool = True) -> bool:
        """Whether a request holding ``credentials`` may be given a cached answer for ``context``.

        ``disk=False`` asks memory alone (the no-I/O fast path; a grant only another worker
        or replica recorded is then found by the slower path, still without a request to the registry).
        """
        fingerprints = [ANONYMOUS, *(self.fingerprint(c) for c in credentials)]
        if any(self._memory.get((context, f)) is not None for f in fingerprints):
            return True
        if not disk:
            return False
        for level in self._levels:
            found = level.granted(context, fingerprints)
            if found is not None:
                fingerprint, expires = found
                self._memory.set((context, fingerprint), True, max(0.0, expires - time.time()))
                return True
        return False
