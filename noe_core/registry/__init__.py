"""Registry I/O: the only code in noe_core that speaks HTTP, starts threads for lookups or opens sockets.

Import the modules (``noe_core.registry.resolver``, ``.inspection``, ``.transport``)
or the names re-exported lazily by :mod:`noe_core`; this package itself imports nothing.
"""
