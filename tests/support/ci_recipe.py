"""examples/ci/where-will-it-land.sh, as the suites that check it and the chart read it."""

from __future__ import annotations

import re

from tests.support.paths import EXAMPLES

SCRIPT = EXAMPLES / "ci" / "where-will-it-land.sh"


def script_kinds() -> list[str]:
    match = re.search(r'^KINDS="([^"]+)"', SCRIPT.read_text(), flags=re.MULTILINE)
    assert match, "the script names the kinds it checks in KINDS"
    return match.group(1).split()
