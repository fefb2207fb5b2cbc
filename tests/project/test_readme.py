"""README's "Use it as a library" example runs as written, and the README keeps its two commands."""

from __future__ import annotations

import contextlib
import io
import re

from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def library_block() -> list[str]:
    """The example of the "Use it as a library" section."""
    section = README.split("## Use it as a library", 1)[-1]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)[:1]


def test_library_example_runs() -> None:
    blocks = library_block()
    assert blocks, "README lost its library example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})
    printed = out.getvalue()
    assert "docker.io/library/nginx:latest" in printed
    assert "/spec/affinity" in printed


def test_every_python_example_runs() -> None:
    """The placement-policy example too: the merge users call offline is the webhook's."""
    for block in python_blocks():
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, "README.md", "exec"), {})


def test_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    assert "noe serve --image-platforms examples/platforms.json" in README
    assert "python3 -m tox" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "tox" in ci
