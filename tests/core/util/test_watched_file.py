"""WatchedFiles: a value loaded from files, reloaded when they change, the last good one kept."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from noe_core.util.watched_file import WatchedFiles


def _touch(path: Path, text: str, n: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(1, n * 10**18))


def test_loads_once_then_again_only_when_a_file_changes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _touch(a, "1", 1)
    _touch(b, "x", 1)
    calls: list[str] = []

    def load() -> str:
        calls.append("load")
        return a.read_text() + b.read_text()

    files = WatchedFiles([a, b], load, what="pair")
    assert files.get() == "1x"
    assert files.get() == "1x"
    assert len(calls) == 1
    _touch(b, "yy", 2)
    assert files.get() == "1yy"
    assert files.reloads == 1
    assert files.get(force=True) == "1yy"
    assert len(calls) == 3


def test_the_first_load_raises_what_the_loader_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        WatchedFiles([tmp_path / "missing"], lambda: "never", what="missing").get()
    bad = tmp_path / "bad"
    bad.write_text("bad")

    def refuse() -> str:
        raise ValueError("bad file")

    with pytest.raises(ValueError, match="bad file"):
        WatchedFiles([bad], refuse, what="bad", keep_on=(ValueError,)).get()


def test_a_broken_version_keeps_the_last_good_value_until_the_next_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "f"
    _touch(path, "good", 1)
    calls: list[str] = []

    def load() -> str:
        text = path.read_text()
        calls.append(text)
        if text.startswith("broken"):
            raise ValueError(f"{path} is malformed")
        return text

    files = WatchedFiles([path], load, what=f"file {path}", keep_on=(ValueError,))
    assert files.get() == "good"
    caplog.set_level(logging.WARNING)
    _touch(path, "broken", 2)
    assert files.get() == "good"
    assert files.get() == "good"
    assert calls == ["good", "broken"]  # the same broken version is not loaded twice
    assert caplog.text.count("cannot reload") == 1
    path.unlink()
    assert files.get() == "good"
    assert files.get() == "good"
    assert caplog.text.count("cannot stat") == 1
    _touch(path, "better", 3)
    assert files.get() == "better"
    assert files.reloads == 1


def test_errors_not_listed_in_keep_on_are_raised(tmp_path: Path) -> None:
    path = tmp_path / "f"
    _touch(path, "ok", 1)
    fail = False

    def load() -> str:
        if fail:
            raise KeyError("a bug")
        return "ok"

    files = WatchedFiles([path], load, what="f")
    files.get()
    fail = True
    _touch(path, "changed", 2)
    with pytest.raises(KeyError):
        files.get()
