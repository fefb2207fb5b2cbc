"""Where the checkout's files are, for tests at any depth of the tests/ tree."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
FIXTURES = ROOT / "tests" / "fixtures"
