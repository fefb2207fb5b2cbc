"""Registry I/O: the only code in noe_core that speaks HTTP, starts threads for lookups or opens sockets.

Import the modules, or the names :mod:`noe_core` re-exports lazily; this
package itself imports nothing. The pure modules beside the I/O ones
(``settings``, ``observer``, ``tracer``, ``challenge``, ``cache.url``,
``cache.rows``) may be imported by pure code at module level.

* :mod:`.settings` — how noe talks to registries: :class:`~.settings.RegistrySettings` (pure)
* :mod:`.observer` — what the client reports of its work, for metrics, without a metrics library (pure)
* :mod:`.tracer` — what the client says it is doing, for tracing, without a tracing library (pure)
* :mod:`.challenge` — ``WWW-Authenticate`` parsing, RFC 7235 (pure)
* :mod:`.watchdog` — wall-clock limits on exchanges: a connection busy at the deadline is shut down
* :mod:`.sender` — one request to a registry host, made robust, with no notion of credentials
* :mod:`.auth` — the auth handshake: challenges, Bearer tokens and their cache, Basic, OAuth2 refresh
* :mod:`.transport` — authenticated HTTP: the candidate loop over credentials; ``make_session``
* :mod:`.access` — who may be given a cached answer (KEP-2535, "ensure secret pulled images")
* :mod:`.manifest_walk` — an image's platforms read from its manifests, index to every entry
* :mod:`.resolver` — image reference → ``ImagePlatforms``, cheaply and within a deadline: ``Resolver``
* :mod:`.lookup_service` — a pod's images → their lookups: declared platforms, the registry, pull Secrets
* :mod:`.tags` — a repository's tags (``/v2/<name>/tags/list``), page by page, bounded
* :mod:`.cache` — the registry cache: memory, the node's SQLite file, the Redis every replica shares
"""
