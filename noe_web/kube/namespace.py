"""noe's own namespace: the pod's, from its service-account mount.

``noe serve`` (the ConfigMap ``noe-learned-platforms``), ``noe controller``
(its leader Lease, the ConfigMaps it writes), ``noe report`` and ``noe certs``
read it when no flag names a namespace.
"""

from __future__ import annotations

from pathlib import Path

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace(path: Path = NAMESPACE_FILE, *, default: str = "default") -> str:
    """The pod's namespace from its service-account mount; ``default`` outside a pod (or when the file is empty)."""
    try:
        return path.read_text().strip() or default
    except OSError:
        return default
