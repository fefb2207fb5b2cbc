"""docs/architecture.md lists every module of noe_core and noe_web, and only those."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `((?:noe_core|noe_web)(?:\.[A-Za-z_]+)*)` \|", re.MULTILINE)


def _modules(package: str) -> set[str]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.add(".".join(parts))
    return found


def test_architecture_table_matches_the_packages() -> None:
    listed = ROW.findall((ROOT / "docs" / "architecture.md").read_text())
    assert len(listed) == len(set(listed)), "a module is listed twice"
    actual = _modules("noe_core") | _modules("noe_web")
    assert sorted(actual - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - actual) == [], "docs/architecture.md lists modules that do not exist"
