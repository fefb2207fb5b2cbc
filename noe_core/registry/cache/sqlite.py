"""The registry cache on disk: one SQLite file per node, shared by every worker and kept across restarts.

What it holds (``SCHEMA_VERSION`` names the layout; another version is moved aside):

* ``content`` — digest → manifest facts (media type, platforms as JSON): immutable, never expires;
* ``tags`` — tag → digest with the wall-clock time it was fetched (the reader applies ``--cache-ttl``);
* ``grants`` — (registry/repository, credential fingerprint) → until when that credential (or
  ``anonymous``) was seen reading the repository (see :mod:`noe_core.registry.access`);
* ``failures`` — (image, credentials) → an error and its expiry (``--negative-cache-ttl``).

Fingerprints are HMAC-SHA256 of a credential under a random key kept beside the database
(mode 0600), never the credential. Each table is bounded; the least recently used rows go
first. The file runs in WAL mode, so readers never wait for a writer, and writers wait at
most :data:`BUSY_TIMEOUT` before a write is dropped (a cache write is never worth failing an
admission for). A file that cannot be read as this schema is moved aside with a warning and
the cache starts empty; a directory that cannot be written leaves the process with its
in-memory cache alone (:func:`open_store` returns ``None``).

:meth:`CacheStore.lock` is the cross-process single-flight: one byte-range ``lockf`` lock per
key stripe on ``registry-cache.lock``. The kernel drops a dead process's locks, so a crashed
worker never wedges the others, and waiting is bounded by the caller's deadline.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from noe_core.errors import DeadlineExceeded
from noe_core.util.deadline import Deadline

# The logger keeps its name from before the move to this module: log filters select on it.
log = logging.getLogger("noe_core.registry.cache_store")

SCHEMA_VERSION = 1
DB_FILE = "registry-cache.sqlite3"
KEY_FILE = "registry-cache.key"
LOCK_FILE = "registry-cache.lock"
LOCK_STRIPES = 4096
BUSY_TIMEOUT = 2.0
"""Seconds a write waits for another writer before it is dropped."""
_LOCK_POLL = 0.005
_TOUCH_EVERY = 60.0
"""A row's last use is rewritten at most this often: reads stay reads."""

WallClock = Callable[[], float]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS content (
    context TEXT NOT NULL, digest TEXT NOT NULL, media_type TEXT NOT NULL, platforms TEXT NOT NULL,
    created REAL NOT NULL, used REAL NOT NULL, PRIMARY KEY (context, digest)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS content_used ON content (used);
CREATE TABLE IF NOT EXISTS tags (
    context TEXT NOT NULL, tag TEXT NOT NULL, digest TEXT NOT NULL, fetched REAL NOT NULL,
    used REAL NOT NULL, PRIMARY KEY (context, tag)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tags_used ON tags (used);
CREATE TABLE IF NOT EXISTS grants (
    context TEXT NOT NULL, fingerprint TEXT NOT NULL, expires REAL NOT NULL,
    PRIMARY KEY (context, fingerprint)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS grants_expires ON grants (expires);
CREATE TABLE IF NOT EXISTS failures (
    context TEXT NOT NULL, identifier TEXT NOT NULL, credentials TEXT NOT NULL, message TEXT NOT NULL,
    status INTEGER, expires REAL NOT NULL, PRIMARY KEY (context, identifier, credentials)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS failures_expires ON failures (expires);
"""


@dataclass(frozen=True)
class StoredTag:
    """A tag's digest and when (wall clock, seconds since the epoch) it was read from the registry."""

    digest: str
    fetched: float


@dataclass(frozen=True)
class StoredFailure:
    """A remembered failure: its message and HTTP status (``None``: not an HTTP answer)."""

    message: str
    status: int | None


@dataclass(frozen=True)
class CachedImage:
    """One row of ``noe cache list``."""

    context: str
    digest: str
    media_type: str
    platforms: str
    tags: tuple[str, ...]
    age: float


@dataclass(frozen=True)
class CacheStats:
    """What ``noe cache stats`` prints."""

    path: str
    images: int
    tags: int
    grants: int
    failures: int
    bytes: int
    oldest_tag_age: float | None


class CacheStore:
    """The shared SQLite cache; thread-safe (one connection per thread), process-safe (SQLite, lockf)."""

    name = "disk"
    """Its level's name in the cache metrics (:class:`~noe_core.registry.cache.layers.SharedLevel`)."""

    def __init__(
        self,
        directory: Path,
        *,
        max_images: int,
        max_tags: int,
        wall: WallClock = time.time,
        on_evict: Callable[[str, int], None] | None = None,
    ) -> None:
        self.directory = directory
        self._on_evict = on_evict
        self.path = directory / DB_FILE
        self.max_images = max_images
        self.max_tags = max_tags
        self._wall = wall
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self.key = _load_key(directory / KEY_FILE)
        self._lock_fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        self._stripes = [threading.Lock() for _ in range(64)]
        self.evictions = 0
        self._initialise()

    # -- connections ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @property
    def _db(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn = conn
            self._local.pid = os.getpid()
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _initialise(self) -> None:
        """Check the schema version; create the tables in an empty file. Raises ``sqlite3.DatabaseError``."""
        db = self._db
        with db:  # one IMMEDIATE transaction: workers starting together create the tables once
            db.execute("BEGIN IMMEDIATE")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            if version == 0 and tables == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"schema version {version}, this noe reads version {SCHEMA_VERSION}")
        db.execute("SELECT count(*) FROM content").fetchone()  # a torn file fails here, not mid-admission

    def close(self) -> None:
        """Close every connection this store opened and the lock file."""
        with self._connections_lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)

    def _write(self, sql: str, params: Sequence[object]) -> bool:
        """One statement in its own transaction; ``False`` (logged) when the database refused it."""
        try:
            self._db.execute(sql, params)
        except sqlite3.Error as exc:
            log.warning("registry cache %s: a write was dropped: %s", self.path, exc)
            return False
        return True

    def _read(self, sql: str, params: Sequence[object]) -> list[tuple[object, ...]]:
        try:
            return list(self._db.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            log.warning("registry cache %s: a read failed, treated as a miss: %s", self.path, exc)
            return []

    # -- content ----------------------------------------------------------------------------

    def content(self, context: str, digest: str) -> tuple[str, str] | None:
        """``(media_type, platforms_json)`` of a digest, or ``None``."""
        rows = self._read(
            "SELECT media_type, platforms, used FROM content WHERE context = ? AND digest = ?", (context, digest)
        )
        if not rows:
            return None
        media_type, platforms, used = rows[0]
        now = self._wall()
        if now - float(used) > _TOUCH_EVERY:  # type: ignore[arg-type]
            self._write("UPDATE content SET used = ? WHERE context = ? AND digest = ?", (now, context, digest))
        return str(media_type), str(platforms)

    def put_content(self, context: str, digest: str, media_type: str, platforms: str) -> None:
        now = self._wall()
        if self._write(
            "INSERT INTO content VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (context, digest) DO UPDATE SET used = ?",
            (context, digest, media_type, platforms, now, now, now),
        ):
            self._evict("content", self.max_images)

    # -- tags -------------------------------------------------------------------------------

    def tag(self, context: str, tag: str) -> StoredTag | None:
        rows = self._read("SELECT digest, fetched, used FROM tags WHERE context = ? AND tag = ?", (context, tag))
        if not rows:
            return None
        digest, fetched, used = rows[0]
        now = self._wall()
        if now - float(used) > _TOUCH_EVERY:  # type: ignore[arg-type]
            self._write("UPDATE tags SET used = ? WHERE context = ? AND tag = ?", (now, context, tag))
        return StoredTag(str(digest), float(fetched))  # type: ignore[arg-type]

    def put_tag(self, context: str, tag: str, digest: str, fetched: float | None = None) -> None:
        """Record that ``tag`` pointed at ``digest`` at ``fetched`` (default: now)."""
        now = self._wall()
        when = now if fetched is None else fetched
        if self._write(
            "INSERT INTO tags VALUES (?, ?, ?, ?, ?) ON CONFLICT (context, tag) "
            "DO UPDATE SET digest = excluded.digest, fetched = excluded.fetched, used = excluded.used",
            (context, tag, digest, when, now),
        ):
            self._evict("tags", self.max_tags)

    # -- grants -----------------------------------------------------------------------------

    def granted(self, context: str, fingerprints: Sequence[str]) -> tuple[str, float] | None:
        """The fingerprint among ``fingerprints`` with the latest fresh grant, and its expiry (wall clock)."""
        if not fingerprints:
            return None
        marks = ",".join("?" * len(fingerprints))
        rows = self._read(
            f"SELECT fingerprint, expires FROM grants WHERE context = ? AND fingerprint IN ({marks}) "  # noqa: S608
            "AND expires > ? ORDER BY expires DESC LIMIT 1",
            (context, *fingerprints, self._wall()),
        )
        if not rows:
            return None
        fingerprint, expires = rows[0]
        return str(fingerprint), float(expires)  # type: ignore[arg-type]

    def grant(self, context: str, fingerprint: str, ttl: float) -> None:
        now = self._wall()
        if self._write(
            "INSERT INTO grants VALUES (?, ?, ?) ON CONFLICT (context, fingerprint) DO UPDATE SET expires = ?",
            (context, fingerprint, now + ttl, now + ttl),
        ):
            self._evict("grants", self.max_tags, order="expires")

    # -- failures ---------------------------------------------------------------------------

    def failure(self, context: str, identifier: str, credentials: str) -> StoredFailure | None:
        rows = self._read(
            "SELECT message, status FROM failures WHERE context = ? AND identifier = ? AND credentials = ? "
            "AND expires > ?",
            (context, identifier, credentials, self._wall()),
        )
        if not rows:
            return None
        message, status = rows[0]
        return StoredFailure(str(message), None if status is None else int(status))  # type: ignore[call-overload]

    def put_failure(
        self, context: str, identifier: str, credentials: str, *, message: str, status: int | None, ttl: float
    ) -> None:
        if self._write(
            "INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?, ?)",
            (context, identifier, credentials, message, status, self._wall() + ttl),
        ):
            self._evict("failures", self.max_tags, order="expires")

    # -- bounds -----------------------------------------------------------------------------

    def _evict(self, table: str, bound: int, order: str = "used") -> None:
        """Delete the least recently used rows beyond ``bound`` (``table``/``order`` are ours, not input)."""
        try:
            with self._db:  # one transaction: the count and the delete see the same rows
                self._db.execute("BEGIN IMMEDIATE")
                count = self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608
                excess = count - bound
                if excess > 0:
                    self._db.execute(_delete_oldest(table, order), (excess,))
                    self.evictions += excess
                    if self._on_evict is not None:
                        self._on_evict(table, excess)
        except sqlite3.Error as exc:
            log.warning("registry cache %s: eviction skipped: %s", self.path, exc)

    # -- operators --------------------------------------------------------------------------

    def stats(self) -> CacheStats:
        def count(table: str) -> int:
            rows = self._read(f"SELECT count(*) FROM {table}", ())  # noqa: S608
            return int(rows[0][0]) if rows else 0  # type: ignore[call-overload]

        rows = self._read("SELECT min(fetched) FROM tags", ())
        oldest = rows[0][0] if rows else None
        size = sum(p.stat().st_size for p in self.directory.glob(DB_FILE + "*") if p.is_file())
        return CacheStats(
            str(self.path),
            count("content"),
            count("tags"),
            count("grants"),
            count("failures"),
            size,
            None if oldest is None else self._wall() - float(oldest),  # type: ignore[arg-type]
        )

    def images(self) -> list[CachedImage]:
        tags: dict[tuple[str, str], list[str]] = {}
        for context, tag, digest in self._read("SELECT context, tag, digest FROM tags ORDER BY tag", ()):
            tags.setdefault((str(context), str(digest)), []).append(str(tag))
        now = self._wall()
        return [
            CachedImage(str(c), str(d), str(m), str(p), tuple(tags.get((str(c), str(d)), ())), now - float(t))  # type: ignore[arg-type]
            for c, d, m, p, t in self._read(
                "SELECT context, digest, media_type, platforms, created FROM content ORDER BY context, digest", ()
            )
        ]

    def purge(self, contexts: Sequence[str] = ()) -> int:
        """Forget every image of ``contexts`` (all images when empty); returns the rows deleted."""
        deleted = 0
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for table in ("content", "tags", "grants", "failures"):
                    if contexts:
                        marks = ",".join("?" * len(contexts))
                        cursor = self._db.execute(f"DELETE FROM {table} WHERE context IN ({marks})", tuple(contexts))  # noqa: S608
                    else:
                        cursor = self._db.execute(f"DELETE FROM {table}")  # noqa: S608
                    deleted += cursor.rowcount
        except sqlite3.Error as exc:
            log.warning("registry cache %s: purge failed: %s", self.path, exc)
        return deleted

    # -- single flight across processes -----------------------------------------------------

    @contextlib.contextmanager
    def lock(self, key: str, deadline: Deadline, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the stripe of ``key`` across processes, waiting at most until ``deadline``.

        ``on_wait`` is called once when another process (or thread) holds it.
        """
        stripe = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % LOCK_STRIPES
        # lockf locks belong to the process: threads of one process are kept apart by a thread lock,
        # or one thread's unlock would release another's.
        local = self._stripes[stripe % len(self._stripes)]
        waited = False
        timeout = deadline.wait_timeout()
        if not local.acquire(blocking=False):
            waited = True
            if on_wait is not None:
                on_wait()
            if not local.acquire(timeout=-1 if timeout is None else timeout):
                raise DeadlineExceeded("gave up waiting for the same image being looked up by another thread")
        try:
            while True:
                try:
                    fcntl.lockf(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, stripe)
                    break
                except OSError:
                    if not waited and on_wait is not None:
                        on_wait()
                    waited = True
                    if deadline.expired:
                        raise DeadlineExceeded(
                            "gave up waiting for the same image being looked up by another worker"
                        ) from None
                    time.sleep(_LOCK_POLL)
            try:
                yield
            finally:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, stripe)
        finally:
            local.release()


def _delete_oldest(table: str, order: str) -> str:
    keys = {
        "content": "context, digest",
        "tags": "context, tag",
        "grants": "context, fingerprint",
        "failures": "context, identifier, credentials",
    }[table]
    return f"DELETE FROM {table} WHERE ({keys}) IN (SELECT {keys} FROM {table} ORDER BY {order} LIMIT ?)"  # noqa: S608


def _load_key(path: Path) -> bytes:
    """The fingerprint key: read, or made once (0600; racing workers agree through O_EXCL)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(100):
            data = path.read_bytes()
            if len(data) == 32:
                return data
            time.sleep(0.01)  # another worker is writing it
        raise OSError(f"{path} is not a 32-byte key") from None
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def open_store(
    directory: Path,
    *,
    max_images: int,
    max_tags: int,
    wall: WallClock = time.time,
    on_evict: Callable[[str, int], None] | None = None,
) -> CacheStore | None:
    """The store in ``directory``; a damaged file is moved aside; ``None`` (with a warning) when unusable."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        log.warning("registry cache: cannot create %s (%s); caching in memory only", directory, exc.strerror)
        return None
    for attempt in range(2):
        try:
            return CacheStore(directory, max_images=max_images, max_tags=max_tags, wall=wall, on_evict=on_evict)
        except sqlite3.OperationalError as exc:
            # Cannot open, lock or write (read-only files, a full disk): not the file's fault.
            log.warning("registry cache %s unusable (%s); caching in memory only", directory / DB_FILE, exc)
            return None
        except sqlite3.DatabaseError as exc:
            if attempt == 1:
                break
            _move_aside(directory, str(exc))
        except OSError as exc:
            log.warning("registry cache in %s unusable (%s); caching in memory only", directory, exc.strerror or exc)
            return None
    log.warning("registry cache %s still unreadable after moving it aside; caching in memory only", directory / DB_FILE)
    return None


def _move_aside(directory: Path, reason: str) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for suffix in ("", "-wal", "-shm"):
        source = directory / (DB_FILE + suffix)
        if source.exists():
            with contextlib.suppress(OSError):
                source.rename(directory / f"{DB_FILE}.corrupt-{stamp}-{os.getpid()}{suffix}")
    log.warning("registry cache %s could not be read (%s); moved aside, starting empty", directory / DB_FILE, reason)
