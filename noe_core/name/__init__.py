"""Names and their grammars, pure: image references, registry host patterns, Kubernetes names.

* :mod:`.reference` — the distribution reference grammar: :class:`~.reference.Reference`, ``parse_reference``
* :mod:`.hostmatch` — registry host and image patterns (``*.gcr.io``, ``docker.io/library/*``) and their matching
* :mod:`.kubernetes` — Kubernetes names: label keys and values, DNS subdomains, architecture names
"""
