"""The registry cache: bounded memory, then the node's SQLite file, then the Redis every replica shares.

* :mod:`.layers` — the resolver's caches, level by level (``LayeredCache``)
* :mod:`.rows` — an image's platforms as the shared levels store them: one JSON text per digest (pure)
* :mod:`.sqlite` — the node's level: one SQLite file shared by every worker, kept across restarts
* :mod:`.redis` — the level every replica and rollout shares: Redis or Valkey
* :mod:`.url` — ``--cache-url`` read once into :class:`~.url.CacheURL` (pure)
"""
