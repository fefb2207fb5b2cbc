"""The installed noe version: read from the package metadata, so setup.cfg's ``version`` is the one place it is written.

The container image's tag and OCI labels, the Helm chart's ``appVersion`` and
``noe --version`` all derive from that one line (tests/deploy/test_image.py checks they agree).
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "installed_version"]

DISTRIBUTION = "noe-webhook"


def installed_version() -> str:
    """The version pip installed; a sentence saying it is not installed when run from a bare source tree."""
    # importlib.metadata imports email (and through it socket): only when a version is asked for.
    from importlib.metadata import PackageNotFoundError  # noqa: PLC0415
    from importlib.metadata import version as distribution_version  # noqa: PLC0415

    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return f"unknown ({DISTRIBUTION} is not installed: pip install -e .)"
