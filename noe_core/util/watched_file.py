"""A value loaded from files, and loaded again when one of them changes.

Long-running processes read files that other programs rotate in place: node
credential files (cron jobs, cloud agents), the serving certificate
(cert-manager), the service-account token (the kubelet). Checking each file's
mtime, size and inode on use costs one ``stat`` per file and keeps the value
fresh without a watcher thread.

The first load raises whatever the loader raises. After that, a version that
cannot be read or loaded (a rotation caught half-written) is logged once and
the last good value kept; the same broken version is not loaded again, and the
next change is. The loader's own messages are logged, so they must not carry
a secret (noe's loaders name the file, never its content).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
Stamp = tuple[int, int, int]

# The logger keeps its name from before the move to this module: log filters select on it.
log = logging.getLogger("noe_core.watched_file")


def stamp(path: str | os.PathLike[str]) -> Stamp:
    """What changes when a file is rewritten or replaced: mtime, size and inode; raises ``OSError``."""
    info = os.stat(path)
    return (info.st_mtime_ns, info.st_size, info.st_ino)


@dataclass(frozen=True)
class _State(Generic[T]):
    value: T
    stamps: tuple[Stamp, ...]
    failed: tuple[Stamp, ...] | None = None


class WatchedFiles(Generic[T]):
    """``load()`` of ``paths``, cached until one of them changes; thread-safe.

    ``keep_on`` lists the errors that keep the last good value after the first
    load (``OSError`` always does); ``what`` names the files in log lines.
    ``reloads`` counts the successful loads after the first.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        load: Callable[[], T],
        *,
        what: str,
        keep_on: tuple[type[Exception], ...] = (),
    ) -> None:
        self.paths = tuple(os.fspath(p) for p in paths)
        self.what = what
        self.reloads = 0
        self._load = load
        self._keep_on: tuple[type[Exception], ...] = (OSError, *keep_on)
        self._lock = threading.Lock()
        self._state: _State[T] | None = None
        self._stat_failed = False

    def get(self, *, force: bool = False) -> T:
        """The current value; ``force`` loads again even when no file changed."""
        state = self._state
        try:
            stamps = tuple(stamp(p) for p in self.paths)
        except OSError as exc:
            if state is None:
                raise
            if not self._stat_failed:
                self._stat_failed = True
                log.warning("cannot stat %s, keeping its last good version: %s", self.what, exc.strerror or exc)
            return state.value
        if state is not None and not force and stamps in (state.stamps, state.failed):
            return state.value
        with self._lock:
            state = self._state
            if state is not None and not force and stamps in (state.stamps, state.failed):
                return state.value
            try:
                value = self._load()
            except self._keep_on as exc:
                if state is None:
                    raise
                reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
                log.warning("cannot reload %s, keeping its last good version: %s", self.what, reason)
                self._state = _State(state.value, state.stamps, stamps)
                return state.value
            self._stat_failed = False
            self._state = _State(value, stamps)
            if state is not None:
                self.reloads += 1
                log.info("reloaded %s", self.what)
            return value
