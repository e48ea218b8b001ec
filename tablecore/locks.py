"""Commit locks: the short critical section in which a write is published (the conflict check and the completed
instant file, :meth:`tablecore.commit.CommitProtocol.complete`).

Two providers, chosen per process by :func:`commit_lock`:

- :class:`CommitLock` (the default): a lock *file*, ``.hoodie/.aux/lakegate/commit.lock``, created with the table
  storage's atomic create-if-absent (a hard link on a local disk, a conditional put on S3). A stale lock (its holder
  gone, or older than :data:`LOCK_EXPIRY_S`) is broken by one process only.
- :class:`PostgresCommitLock`: a PostgreSQL advisory lock named after the table, for storage that cannot create a
  file atomically (an S3-compatible store that ignores conditional writes; file systems reached through
  ``ArrowFileIO``). Set ``LAKEGATE_LOCK_URL=postgresql://user@host:5432/db`` for every writer of such tables. The
  lock belongs to the database session: a writer that dies releases it with its connection, so it is never stale.

On storage without atomic creates and without a lock URL, writes are refused (:class:`StorageError`) unless
``LAKEGATE_SINGLE_WRITER=1`` says that one process writes at a time: two unsynchronized writers there could both
publish and break the table.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import socket
import time
from contextlib import AbstractContextManager
from typing import Any

from tablecore.exceptions import LockTimeoutError, StorageError
from tablecore.format.timeline import AUX_DIR
from tablecore.io import FileIO

logger = logging.getLogger(__name__)

LOCK_EXPIRY_S = 60.0
_ABANDONED: set[tuple[str, bytes]] = set()
"""(lock path, body) of lock files this process is done with but could not delete, or may have created without
hearing of it (the storage failed): stale to this process at once, whatever their pid and age say."""
LOCK_URL_ENV = "LAKEGATE_LOCK_URL"
SINGLE_WRITER_ENV = "LAKEGATE_SINGLE_WRITER"


class CommitLock:
    """A file lock for the short critical section of publishing (conflict check + completed file)."""

    def __init__(self, io: FileIO, timeout_s: float = 60.0) -> None:
        self.io = io
        self.path = io.join(AUX_DIR, "commit.lock")
        self.timeout_s = timeout_s
        self.body = b""

    def __enter__(self) -> CommitLock:
        deadline = time.monotonic() + self.timeout_s
        self.body = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}).encode()
        while True:
            try:
                if self.io.create_if_absent(self.path, self.body):
                    return self
            except StorageError:
                _ABANDONED.add((self.path, self.body))  # a create whose answer was lost may have taken it
                raise
            stale = self._stale_body()
            if stale is not None and self._break(stale):
                continue
            if time.monotonic() > deadline:
                raise LockTimeoutError(f"could not acquire the commit lock {self.path} in {self.timeout_s}s: another "
                                       "process is publishing (or died holding it less than a minute ago); retry")
            time.sleep(0.05)

    def _read(self) -> bytes | None:
        """The lock file's content (one read of one version of it), None if there is no lock file."""
        try:
            return self.io.read_bytes(self.path)
        except FileNotFoundError:
            return None

    def _stale_body(self) -> bytes | None:
        """The lock file's content if its holder is gone (dead pid on this host, or older than the expiry).

        A body that is not a lock record of this module (it cannot have been torn: the lock is created whole and read
        in one request) proves nothing about its holder, so it is judged by the age of the file alone."""
        raw = self._read()
        if raw is None:
            return None  # released meanwhile: try again
        if (self.path, raw) in _ABANDONED:
            return raw
        try:
            body = json.loads(raw.decode())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            age = self._age_s()
            return raw if age is not None and age > LOCK_EXPIRY_S else None
        if body.get("host") == socket.gethostname():
            try:
                os.kill(int(body.get("pid", -1)), 0)
            except ProcessLookupError:
                return raw
            except PermissionError:
                return None
        return raw if time.time() - float(body.get("time", 0)) > LOCK_EXPIRY_S else None

    def _age_s(self) -> float | None:
        """Seconds since the lock file was last written (its listed modification time), None if unknown."""
        name = posixpath.basename(self.path)
        for f in self.io.list(posixpath.dirname(self.path)):
            if f.name == name and f.mtime_ns is not None:
                return time.time() - f.mtime_ns / 1e9
        return None

    def _break(self, stale: bytes) -> bool:
        """Delete the stale lock whose content is ``stale`` if this process is the one that breaks it (True if it
        did; another breaker's lock is left to it, and waited for like a live one).

        One process breaks a given stale lock: the one that creates its breaker mark (create-if-absent); a second
        breaker cannot delete the lock the first one takes next (the marks are kept). The winner deletes the lock only
        if it still holds ``stale``: a holder that outlived the expiry may have released it and another taken it."""
        mark = f"{self.path}.broken.{hashlib.sha256(stale).hexdigest()[:16]}"
        if self.io.create_if_absent(mark, stale) and self._read() == stale:
            logger.warning("breaking stale commit lock %s", self.path)
            self.io.delete(self.path)
            _ABANDONED.discard((self.path, stale))
            return True
        return False

    def __exit__(self, *exc: object) -> None:
        try:
            self.io.delete(self.path)
        except StorageError as e:  # what the lock guarded is done (a publish is not undone by a failed release)
            _ABANDONED.add((self.path, self.body))
            logger.warning("could not release the commit lock %s (%s): this process breaks it when it next needs "
                           "it, others once it expires (%.0fs)", self.path, e, LOCK_EXPIRY_S)


def lock_key(table_uri: str) -> int:
    """The advisory-lock key of a table: the first 8 bytes of the SHA-256 of its URI, as a signed 64-bit int."""
    return int.from_bytes(hashlib.sha256(table_uri.encode()).digest()[:8], "big", signed=True)


def _libpq_url(url: str) -> str:
    """A SQLAlchemy-style ``postgresql+psycopg://`` URL as libpq takes it."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}" if sep else url


class PostgresCommitLock:
    """A PostgreSQL advisory lock (``pg_try_advisory_lock``) on :func:`lock_key` of the table, held by a connection
    of its own for the critical section; a dead holder's lock is released with its session.

    Raises (on enter):
        LockTimeoutError: another writer held it for ``timeout_s``.
        StorageError: the database cannot be reached.
    """

    def __init__(self, url: str, table_uri: str, timeout_s: float = 60.0) -> None:
        self.url = _libpq_url(url)
        self.table_uri = table_uri
        self.key = lock_key(table_uri)
        self.timeout_s = timeout_s
        self._conn: Any = None

    def __enter__(self) -> PostgresCommitLock:
        import psycopg

        try:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            raise StorageError(f"cannot reach the lock database of {LOCK_URL_ENV} for {self.table_uri}: "
                               f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from e
        deadline = time.monotonic() + self.timeout_s
        while True:
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if row and row[0]:
                return self
            if time.monotonic() > deadline:
                self._conn.close()
                self._conn = None
                raise LockTimeoutError(f"could not acquire the commit lock of {self.table_uri} (PostgreSQL advisory "
                                       f"lock {self.key}) in {self.timeout_s}s: another process is publishing; retry")
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        finally:
            conn.close()


def external_lock_url() -> str | None:
    """The lock database named by ``LAKEGATE_LOCK_URL``, if any."""
    return os.environ.get(LOCK_URL_ENV) or None


def check_writable(io: FileIO) -> None:
    """Refuse to write where two writers could both publish: storage without atomic create-if-absent, no lock
    database, and no ``LAKEGATE_SINGLE_WRITER=1``.

    Raises:
        StorageError: naming the table, why, and the two ways out.
    """
    if external_lock_url() is not None or io.supports_atomic_create():
        return
    if os.environ.get(SINGLE_WRITER_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    raise StorageError(
        f"the storage of {io.table_uri()} cannot create a file atomically (create-if-absent: on S3, conditional "
        "writes with If-None-Match), so two writers could both publish: set "
        f"{LOCK_URL_ENV}=postgresql://user@host:5432/db to lock commits in PostgreSQL, or {SINGLE_WRITER_ENV}=1 if "
        "only one process ever writes this table")


def commit_lock(io: FileIO, timeout_s: float = 60.0) -> AbstractContextManager[Any]:
    """The commit lock of the table on ``io``: the PostgreSQL advisory lock when ``LAKEGATE_LOCK_URL`` is set,
    else the lock file."""
    url = external_lock_url()
    if url is not None:
        return PostgresCommitLock(url, io.table_uri(), timeout_s)
    return CommitLock(io, timeout_s)
