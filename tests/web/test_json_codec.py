"""noe_web.json_codec: orjson when installed, the standard library otherwise — the same bytes either way.

The single-file ``kubectl-noe`` and ``pip install noe-webhook`` without the web
extra have no orjson (it is compiled); every command must still work there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from noe_web import json_codec
from tests.support.paths import ROOT

DOCS: list[Any] = [
    {"kind": "AdmissionReview", "response": {"uid": "u-1", "allowed": True, "patch": "W10="}},
    {"msg": "café — 日本語 😀", "n": [1, 2.5, -0.0, 1e100, None, True, False]},
    {"tab\tnewline\ncontrol\x01": 'quote" backslash\\ slash/'},
    {1: "integer key", "nested": {"deep": [[[]]], "empty": {}}},
    {"big": 2**63 - 1, "small": -(2**63)},
    {"lone surrogate": "\ud800"},
]

# In a fresh interpreter where `import orjson` fails, as on an install without the web extra.
WITHOUT_ORJSON = """
import ast, json, sys
sys.modules["orjson"] = None
from noe_web import json_codec
docs = ast.literal_eval(sys.stdin.read())
print(json.dumps({
    "orjson": "orjson" in sys.modules and sys.modules["orjson"] is not None,
    "dumps": [json_codec.dumps(doc).decode("utf-8", "surrogatepass") for doc in docs],
    "loads": [json_codec.loads(json_codec.dumps(doc)) for doc in docs],
}, ensure_ascii=True))
"""


def _without_orjson() -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_ORJSON],
        input=repr(DOCS),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_without_orjson_the_standard_library_writes_the_same_bytes() -> None:
    result = _without_orjson()
    assert result["orjson"] is False
    assert json_codec.orjson is not None, "the suite runs with the web extra: orjson is the reference here"
    assert result["dumps"] == [json_codec.dumps(doc).decode("utf-8", "surrogatepass") for doc in DOCS]


def test_without_orjson_what_is_written_reads_back() -> None:
    result = _without_orjson()
    expected = json.loads(json.dumps(DOCS))
    expected[3] = {"1": "integer key", "nested": {"deep": [[[]]], "empty": {}}}
    assert result["loads"] == expected
