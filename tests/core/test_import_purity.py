"""The pure core is pure on import: no HTTP library, no thread, checked in a fresh interpreter.

The interpreter's own start-up (site hooks) may load modules before ours do, so
each check compares ``sys.modules`` before and after the imports under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HTTP_MODULES = ("requests", "urllib3", "certifi", "http.client", "flask", "socket", "concurrent.futures")

PROBE = textwrap.dedent(
    """
    import json, sys, threading
    before = set(sys.modules)
    threads = threading.active_count()
    exec(sys.argv[1])
    after = set(sys.modules) - before
    print(json.dumps({"new": sorted(after), "threads": threading.active_count() - threads}))
    """
)


def _probe(statement: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, statement], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize(
    "statement",
    [
        "import noe_core",
        "from noe_core import decide, make_patch, parse_reference, parse_manifest",
        "import noe_core.placement.rules, noe_core.admission.review, noe_core.testing",
        "import noe_core.image.manifest, noe_core.image.declared",
        "import noe_core.cli",
    ],
)
def test_pure_imports_load_no_http_library_and_start_no_thread(statement: str) -> None:
    result = _probe(statement)
    new = result["new"]
    assert isinstance(new, list)
    loaded = [name for name in HTTP_MODULES if name in new or any(m.startswith(name + ".") for m in new)]
    assert loaded == [], f"{statement!r} imported {loaded}"
    assert result["threads"] == 0


def test_registry_names_still_resolve_lazily_from_the_top_level() -> None:
    result = _probe(
        "import noe_core\n"
        "assert 'Resolver' in dir(noe_core)\n"
        "missing = [n for n in noe_core.__all__ if getattr(noe_core, n, None) is None]\n"
        "assert not missing, missing\n"
        "from noe_core import Resolver, LookupService, Credential, Keychain, MultiKeychain, resolve_platforms\n"
        "assert Resolver.__module__ == 'noe_core.registry.resolver'\n"
    )
    assert "requests" in result["new"]  # type: ignore[operator]


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import noe_core

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = noe_core.nope  # type: ignore[attr-defined]
