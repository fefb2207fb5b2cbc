"""Small pure helpers the rest of noe_core shares; none knows images, Kubernetes or registries.

* :mod:`.comma_list` — comma-separated flag values (``a, b,,c``): the one way noe splits them
* :mod:`.deadline` — :class:`~.deadline.Deadline`: one time budget threaded through a lookup, injectable clock
* :mod:`.duration` — seconds or Go's ``time.Duration`` syntax (``1h30m``), as flags and Kubernetes write them
* :mod:`.fields` — fields of decoded JSON/YAML read with the caller's error type and the field's path
* :mod:`.installed_version` — the version of the installed ``noe-webhook`` distribution
* :mod:`.json_patch` — RFC 6902: :class:`~.json_patch.Edits` recording operations as edits happen, ``apply_patch``
* :mod:`.lru` — thread-safe bounded caches with per-entry expiry (``LRUCache``), and ``SingleFlight``
* :mod:`.printable` — text from outside made safe to show (escapes), long names shortened at both ends
* :mod:`.safe_load` — JSON and YAML from outside, with bounded nesting and alias expansion
* :mod:`.text_file` — a settings file read as UTF-8 text; :class:`~noe_core.errors.InvalidSettings` naming it
* :mod:`.watched_file` — a value loaded from files, and loaded again when one of them changes
"""
