"""README's "Use it as a library" example runs as written, and the README keeps its two commands."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_library_example_runs() -> None:
    blocks = python_blocks()
    assert blocks, "README lost its library example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})
    printed = out.getvalue()
    assert "docker.io/library/nginx:latest" in printed
    assert "/spec/affinity" in printed


def test_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    assert "noe serve --image-platforms examples/platforms.json" in README
    assert "python3 -m tox" in README
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "tox" in ci
