"""``FileIO``: the storage interface of tablecore; every file a table owns is read, written, listed and deleted
through it.

Backends (chosen from the table's URI by :func:`tablecore.io.file_io_for`):

- :class:`~tablecore.io.arrow_fileio.LocalFileIO` — a local disk; atomic create-if-absent (temporary file +
  ``os.link``);
- :class:`~tablecore.io.object_store.S3FileIO` — ``s3://`` (and ``s3a://``): S3 and S3-compatible stores, atomic
  create-if-absent by conditional put;
- :class:`~tablecore.io.arrow_fileio.ArrowFileIO` — any other file system ``pyarrow.fs`` opens from a URI;
- :class:`~tablecore.io.memory.InMemoryFileIO` — ``memory://name``: a dict in this process, for fast unit tests of the
  format layer (executors in other processes cannot reach it).

A new backend (another object store, ...) subclasses :class:`FileIO`, implements the
abstract methods, and is registered in :func:`tablecore.io.file_io_for`. The one primitive a commit needs from it is
:meth:`FileIO.create_if_absent`: the completed instant file of a commit is written with it, so it must never let two
writers both create a file.
"""

from __future__ import annotations

import copy
import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FileInfo:
    """A listed file: its full path, bare name and size."""

    path: str
    name: str
    size: int
    mtime_ns: int | None = None


class FileIO(ABC):
    """File operations on one table location. Paths are full paths in the backend's namespace (``join`` builds them
    from paths relative to the table base).

    Attributes:
        base: the table base path in the backend's namespace (no trailing slash).
        uri: the table location as given.
    """

    base: str
    uri: str
    #: True when an engine with a Hadoop file-system layer (Spark) opens :meth:`uri_of` paths itself (local disk,
    #: HDFS); False when it must read through this FileIO in its tasks (object stores without a Hadoop connector).
    hadoop_compatible: bool = True
    #: True when :meth:`write_bytes` makes a whole file appear at once and leaves nothing behind if it fails (an
    #: object store's single put): writers may then write a file under its final name instead of a temporary name
    #: and a move (which costs an object store a copy and a delete).
    whole_object_writes: bool = False
    #: True when each call is a request to a remote store (object storage, HDFS): many listings or small reads are
    #: then worth running side by side in threads; False where they are quick local calls (threads only add
    #: contention for the GIL).
    remote: bool = False

    def supports_atomic_create(self) -> bool:
        """True when :meth:`create_if_absent` is atomic across processes (two writers can never both create a file):
        what a commit's publish and the lock file rely on. Without it, writers need an external lock
        (:mod:`tablecore.locks`)."""
        return True

    # paths -------------------------------------------------------------------------------------------------------
    def join(self, *parts: str) -> str:
        """A path under the table base; empty parts are skipped."""
        return posixpath.join(self.base, *[p for p in parts if p])

    def rebased(self, relative: str) -> FileIO:
        """This FileIO rooted at ``relative`` below its base, on the same store with the same options (the metadata
        table at ``.hoodie/metadata`` is a table of its own)."""
        sub = copy.copy(self)
        sub.base = self.join(relative)
        sub.uri = self.uri.rstrip("/") + "/" + relative.strip("/")
        return sub

    @abstractmethod
    def table_uri(self) -> str:
        """An absolute URI of the table (what other readers, such as hudi-rs, are given)."""

    @abstractmethod
    def uri_of(self, path: str) -> str:
        """An absolute URI of ``path`` (a full path of this backend)."""

    # reads -------------------------------------------------------------------------------------------------------
    @abstractmethod
    def exists(self, path: str) -> bool:
        """True if a file or directory exists at ``path``."""

    @abstractmethod
    def open_input(self, path: str) -> Any:
        """A seekable binary input file (``pyarrow.NativeFile``: Parquet and the log readers take it); close it after
        use (it is a context manager)."""

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file."""
        with self.open_input(path) as f:
            return bytes(f.read())

    @abstractmethod
    def list(self, directory: str, *, recursive: bool = False) -> list[FileInfo]:
        """Files (not directories) under ``directory``; empty if it does not exist."""

    # writes ------------------------------------------------------------------------------------------------------
    @abstractmethod
    def open_output(self, path: str) -> Any:
        """A binary output stream (``pyarrow.NativeFile``) that creates or replaces ``path`` when closed; parents are
        created as needed."""

    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file, replacing any previous content atomically where the backend allows."""

    @abstractmethod
    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist yet; return False if it existed."""

    @abstractmethod
    def move(self, source: str, target: str) -> None:
        """Move a complete file to ``target`` (replacing it), so that ``target`` never shows a partial file."""

    def move_if_absent(self, source: str, target: str) -> bool:
        """Move a complete file to ``target`` unless ``target`` exists: False (``source`` left in place) if it does.
        Atomic where :meth:`supports_atomic_create` is (backends override this check-then-move)."""
        if self.exists(target):
            return False
        self.move(source, target)
        return True

    @abstractmethod
    def makedirs(self, directory: str) -> None:
        """Create a directory and its parents (a no-op where directories are implicit)."""

    @abstractmethod
    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete a file."""

    @abstractmethod
    def delete_dir(self, directory: str) -> None:
        """Delete a directory and everything below it; nothing happens if it does not exist."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"
