"""The storage side of :mod:`tablecore.services.replicate`: reading the source's files, writing the target's whole and
atomically, and the target's replication lock.

- :class:`Source` / :class:`Target` keep one listing per folder they touch (a partition, the timeline folder, an
  archive folder), never a listing of the whole table; the target's is updated as files are written and deleted, so
  a file already there with the size to copy is skipped.
- A file appears in the target whole or not at all: one ``PutObject`` where the FileIO writes whole objects (S3),
  else a temporary file under ``.hoodie/.aux/lakegate/replicate-tmp/`` moved over the target name (a rename on a
  local disk). Files up to :data:`WHOLE_COPY_MAX` bytes are read in one go, larger ones streamed in chunks.
- :class:`ReplicationLock`: ``.hoodie/.aux/lakegate/replicate.lock`` in the target, created with create-if-absent,
  so that two replications never interleave; a lock whose holder died on this host, or that was not refreshed for
  :data:`LOCK_STALE_S` seconds, is taken over.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid

from tablecore.exceptions import ReplicationError, TableCorruptError
from tablecore.format.timeline import AUX_DIR
from tablecore.io import FileIO
from tablecore.io.arrow_fileio import is_temporary

__all__ = [
    "LOCK_PATH", "LOCK_STALE_S", "TEMP_DIR", "WHOLE_COPY_MAX", "ReplicationLock", "Source", "SourceFileMissing",
    "Target",
]

logger = logging.getLogger(__name__)

WHOLE_COPY_MAX = 32 << 20
"""Files up to this size are read whole and written with one call; larger ones are streamed."""
CHUNK = 8 << 20
TEMP_DIR = f"{AUX_DIR}/replicate-tmp"
LOCK_PATH = f"{AUX_DIR}/replicate.lock"
LOCK_STALE_S = 600.0
"""A replication lock not refreshed for this long is stale (a running replication refreshes it after each instant)."""
_REFRESH_S = 30.0


class SourceFileMissing(Exception):
    """A file the source's timeline names is not in the source (internal to the replication)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _Folders:
    """Listings of one table's folders, by table-relative folder: name -> size."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._dirs: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def folder(self, rel_dir: str) -> dict[str, int]:
        """The files of a folder (listed once)."""
        with self._lock:
            found = self._dirs.get(rel_dir)
        if found is None:
            found = {f.name: f.size for f in self.io.list(self.path(rel_dir))}
            with self._lock:
                found = self._dirs.setdefault(rel_dir, found)
        return found

    def path(self, rel: str) -> str:
        """The full path of a table-relative path."""
        return self.io.join(rel) if rel else self.io.base

    def size(self, rel: str) -> int | None:
        """The listed size of a file, None if it is not there."""
        return self.folder(posixpath.dirname(rel)).get(posixpath.basename(rel))

    def forget(self, rel_dir: str) -> None:
        """List the folder again when it is next asked for."""
        with self._lock:
            self._dirs.pop(rel_dir, None)


class Source(_Folders):
    """The table replicated from."""

    def read(self, rel: str, size: int) -> bytes:
        """The first ``size`` bytes of a file (all of it when it has no more)."""
        try:
            with self.io.open_input(self.path(rel)) as f:
                return bytes(f.read(size))
        except FileNotFoundError:
            raise SourceFileMissing(rel) from None

    def read_all(self, rel: str) -> bytes:
        """A whole file."""
        try:
            return self.io.read_bytes(self.path(rel))
        except FileNotFoundError:
            raise SourceFileMissing(rel) from None


class Target(_Folders):
    """The table replicated into: every write whole and atomic, with counts of what was copied and deleted."""

    def __init__(self, io: FileIO) -> None:
        super().__init__(io)
        self.files_copied = 0
        self.bytes_copied = 0
        self.files_deleted = 0

    def _record(self, rel: str, size: int | None) -> None:
        with self._lock:
            listed = self._dirs.get(posixpath.dirname(rel))
            if listed is None:
                return
            if size is None:
                listed.pop(posixpath.basename(rel), None)
            else:
                listed[posixpath.basename(rel)] = size

    def _temp(self) -> str:
        return self.io.join(TEMP_DIR, uuid.uuid4().hex)

    def write(self, rel: str, data: bytes) -> None:
        """Write a whole file (replacing it): one put, or a temporary file moved into place."""
        target = self.path(rel)
        if self.io.whole_object_writes:
            self.io.write_bytes(target, data)
        else:
            temp = self._temp()
            self.io.write_bytes(temp, data)
            self.io.move(temp, target)
        self._record(rel, len(data))
        with self._lock:
            self.files_copied += 1
            self.bytes_copied += len(data)

    def put(self, rel: str, data: bytes) -> bool:
        """Write a (timeline) file unless it is there with the same size; True if it was written."""
        if self.size(rel) == len(data):
            return False
        self.write(rel, data)
        return True

    def copy(self, source: Source, rel: str, size: int, *, prefix: bool, instant: str | None) -> bool:
        """Copy a data file of ``size`` recorded bytes (0: unknown, the source's size) unless the target has it with
        that size; ``prefix``: a log file, longer in the source when later writes appended to it, of which the first
        ``size`` bytes are copied. True if it was copied.

        Raises:
            SourceFileMissing: the source has no such file.
            TableCorruptError: the source's file is shorter than recorded (or, not a log, longer).
        """
        have = source.size(rel)
        if have is None:
            raise SourceFileMissing(rel)
        want = size if size > 0 else have
        if have < want or (have != want and not prefix):
            raise TableCorruptError(f"the source's file has {have} bytes, its commit recorded {want}: replicating "
                                    f"would copy damage (check the source with `lakegate table doctor`)",
                                    path=source.path(rel), instant=instant)
        if self.size(rel) == want:
            return False
        if want <= WHOLE_COPY_MAX:
            data = source.read(rel, want)
            if len(data) != want:
                raise SourceFileMissing(rel)  # replaced by a shorter file since it was listed
            self.write(rel, data)
            return True
        self._stream(source, rel, want)
        return True

    def _stream(self, source: Source, rel: str, size: int) -> None:
        final = self.path(rel)
        target = final if self.io.whole_object_writes else self._temp()
        try:
            src = source.io.open_input(source.path(rel))
        except FileNotFoundError:
            raise SourceFileMissing(rel) from None
        with src, self.io.open_output(target) as out:
            left = size
            while left:
                chunk = src.read(min(CHUNK, left))
                if not chunk:
                    raise SourceFileMissing(rel)
                out.write(chunk)
                left -= len(chunk)
        if target != final:
            self.io.move(target, final)
        self._record(rel, size)
        with self._lock:
            self.files_copied += 1
            self.bytes_copied += size

    def delete(self, rel: str) -> bool:
        """Delete a file if the target has it; True if it did."""
        if self.size(rel) is None:
            return False
        self.io.delete(self.path(rel))
        self._record(rel, None)
        with self._lock:
            self.files_deleted += 1
        return True

    def delete_folder(self, rel_dir: str) -> None:
        """Delete a folder and everything below it."""
        self.io.delete_dir(self.path(rel_dir))
        self.forget(rel_dir)
        with self._lock:
            self.files_deleted += 1


class ReplicationLock:
    """The target's replication lock (a context manager); see the module docstring."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.path = io.join(LOCK_PATH)
        self.token = uuid.uuid4().hex
        self._refreshed = 0.0

    def _body(self) -> bytes:
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
                           "token": self.token}).encode()

    def __enter__(self) -> ReplicationLock:
        for _ in range(2):
            if self.io.create_if_absent(self.path, self._body()):
                self._refreshed = time.monotonic()
                self._sweep()
                return self
            held = self._holder()
            if held is not None:
                raise ReplicationError(f"another replication into {self.io.uri} is running ({held}); if it is not, "
                                       f"delete {self.path}")
            logger.warning("taking over the stale replication lock %s", self.path)
            self.io.delete(self.path)
        raise ReplicationError(f"another replication into {self.io.uri} took the lock {self.path}")

    def _sweep(self) -> None:
        """Delete the temporary files of replications that were killed: the copies under :data:`TEMP_DIR`, and the
        temporaries of atomic writes left beside ``hoodie.properties`` and the lock (only replications write the
        target, so nothing else owns them)."""
        self.io.delete_dir(self.io.join(TEMP_DIR))
        for folder in (self.io.join(".hoodie"), self.io.join(AUX_DIR)):
            for info in self.io.list(folder):
                if is_temporary(info.name):
                    logger.info("deleting the temporary file %s of a replication that was killed", info.path)
                    self.io.delete(info.path)

    def _holder(self) -> str | None:
        """Who holds the lock, if that holder may be alive (None: stale or gone)."""
        try:
            body = json.loads(self.io.read_bytes(self.path).decode())
        except FileNotFoundError:
            return None
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        host, pid, since = body.get("host"), body.get("pid"), float(body.get("time") or 0)
        if host == socket.gethostname() and isinstance(pid, int):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return None
            except PermissionError:
                pass
        if time.time() - since > LOCK_STALE_S:
            return None
        return f"pid {pid} on {host}, {time.time() - since:.0f} s since it last made progress"

    def refresh(self) -> None:
        """Record progress (at most every 30 s): a lock that stops being refreshed goes stale."""
        if time.monotonic() - self._refreshed > _REFRESH_S:
            self.io.write_bytes(self.path, self._body())
            self._refreshed = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        try:
            body = json.loads(self.io.read_bytes(self.path).decode())
        except (FileNotFoundError, ValueError):
            return
        if isinstance(body, dict) and body.get("token") == self.token:
            self.io.delete(self.path)
