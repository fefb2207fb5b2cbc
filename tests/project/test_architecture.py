"""docs/architecture.md stays true: it lists every module, package docstrings list theirs, imports follow its rules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

ROW = re.compile(r"^\| `((?:noe_core|noe_web)(?:\.[A-Za-z_][A-Za-z0-9_]*)*)` \|", re.MULTILINE)


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


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``module`` imports anywhere in its file (inside functions too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
    return {name for name in found if name in known and name != module}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_among_noe_modules() -> None:
    paths = {}
    for package in ("noe_core", "noe_web"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {module: _imports(module, path, set(paths)) for module, path in paths.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# --- the folder rules ---------------------------------------------------------------------------------------------

RULE = re.compile(r"^\| `([\w.]+)` \| (.*) \|$", re.MULTILINE)

# Imports the folder rules do not allow, each with its reason. Empty: every rule holds without exception.
EXCEPTIONS: dict[tuple[str, str], str] = {}

# Modules any noe_core module may import: the error tree, and the old paths' table (packages that replaced a module).
CORE_EVERYWHERE = {"errors", "_moved"}


def _graph(package: str) -> dict[str, set[str]]:
    paths = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    known = set(paths) | set(_all_modules())
    return {module: _imports(module, path, known) for module, path in paths.items()}


def _all_modules() -> dict[str, Path]:
    paths = {}
    for package in ("noe_core", "noe_web"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return paths


def _rules(package: str) -> dict[str, set[str]]:
    """The table under "Imports between folders" in ``## package`` of docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split(f"\n## {package}\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("### Imports between folders", 1)[1].split("\n\n| ", 1)[1]
    table = "| " + table.split("\n\n", 1)[0]
    return {folder: set(re.findall(r"`([\w.*]+)`", allowed)) for folder, allowed in RULE.findall(table)}


def _unit(module: str) -> str:
    """The folder (or top-level module) a module belongs to; the package itself is ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _allowed(target: str, allowed: set[str]) -> bool:
    parts = target.split(".")[1:]
    return "*" in allowed or any(".".join(parts[:n]) in allowed for n in range(1, len(parts) + 1))


def _violations(package: str, everywhere: set[str]) -> list[str]:
    rules = _rules(package)
    graph = _graph(package)
    units = {_unit(module) for module in graph}
    assert units <= set(rules), f"docs/architecture.md has no rule for {sorted(units - set(rules))}"
    assert set(rules) <= units, f"docs/architecture.md has rules for {sorted(set(rules) - units)}, which do not exist"
    found = []
    for module, imported in sorted(graph.items()):
        unit = _unit(module)
        for target in sorted(imported):
            if not target.startswith(package + ".") and target != package:
                continue
            other = _unit(target)
            if other == unit or other in everywhere or (module, target) in EXCEPTIONS:
                continue
            if not _allowed(target, rules[unit]):
                found.append(f"{module} imports {target}")
    return found


def test_noe_core_folders_import_only_what_docs_architecture_allows() -> None:
    assert _violations("noe_core", CORE_EVERYWHERE) == []


def test_noe_web_folders_import_only_what_docs_architecture_allows() -> None:
    assert _violations("noe_web", set()) == []


def test_noe_core_never_imports_noe_web_and_noe_web_never_imports_the_test_helpers() -> None:
    graph = _graph("noe_core") | _graph("noe_web")
    wrong = [
        f"{module} imports {target}"
        for module, imported in sorted(graph.items())
        for target in sorted(imported)
        if (module.startswith("noe_core") and target.startswith("noe_web"))
        or (module.startswith("noe_web") and target in ("noe_core.testing", "noe_core._moved"))
    ]
    assert wrong == []


def test_the_rule_checker_finds_a_forbidden_import() -> None:
    rules = {"util": set(), "image": {"util"}}
    assert _allowed("noe_core.util.fields", rules["image"])
    assert not _allowed("noe_core.image.platform", rules["util"])
    assert _allowed("noe_web.kube.errors", {"kube.errors"}) and not _allowed("noe_web.kube.client", {"kube.errors"})
    assert _allowed("noe_web.anything.at_all", {"*"})


def test_every_exception_is_still_needed() -> None:
    graph = _graph("noe_core") | _graph("noe_web")
    stale = [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], set())]
    assert stale == []


# --- package docstrings -------------------------------------------------------------------------------------------

LISTED = re.compile(r"^\* :mod:`\.([A-Za-z_][A-Za-z0-9_]*)` — \S", re.MULTILINE)


def _packages() -> list[Path]:
    return sorted(path.parent for package in ("noe_core", "noe_web") for path in (ROOT / package).rglob("__init__.py"))


@pytest.mark.parametrize("package", _packages(), ids=lambda path: ".".join(path.relative_to(ROOT).parts))
def test_each_package_docstring_lists_exactly_its_modules_one_line_each(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text()), clean=False) or ""
    listed = LISTED.findall(docstring)
    assert len(listed) == len(set(listed)), "a module is listed twice"
    modules = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    modules |= {path.parent.name for path in package.glob("*/__init__.py")}
    assert sorted(listed) == sorted(modules)
    entries = [line for line in docstring.splitlines() if line.startswith("* :mod:`.")]
    assert len(entries) == len(listed), "an entry is not of the form '* :mod:`.module` — what it is'"


# --- names --------------------------------------------------------------------------------------------------------


def test_no_two_noe_core_modules_differ_only_by_a_plural_s() -> None:
    stems = {module.rsplit(".", 1)[-1] for module in _modules("noe_core")}
    assert sorted(stem for stem in stems if stem + "s" in stems) == []
