"""The installed noe version: read from the package metadata, so setup.cfg's ``version`` is the one place it is written.

The container image's tag and OCI labels, the Helm chart's ``appVersion`` and
``noe --version`` all derive from that one line (tests/test_image.py checks they agree).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version

__all__ = ["DISTRIBUTION", "installed_version"]

DISTRIBUTION = "noe-webhook"


def installed_version() -> str:
    """The version pip installed; a sentence saying it is not installed when run from a bare source tree."""
    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return f"unknown ({DISTRIBUTION} is not installed: pip install -e .)"
