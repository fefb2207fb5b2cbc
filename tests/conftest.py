"""Test-suite wiring: the registry fixtures live in tests/support/fixtures.py."""

from __future__ import annotations

import sys
from pathlib import Path

# `pytest` run as a console script (tox) does not put the checkout on sys.path, and
# tests/ is not a package: make `tests.support` importable either way.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["tests.support.fixtures"]
