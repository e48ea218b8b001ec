"""``memory://name``: a FileIO over a dict in this process, for fast unit tests of the format layer and the
transaction (no disk, no JVM). Tables opened with the same name share the store, so a test can create a table and
open it again; :func:`clear_memory_stores` forgets them all.

It is the in-memory backend the engine cannot use: Spark executors run in other processes and cannot reach it.
"""

from __future__ import annotations

import io
import posixpath
import threading
import time
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa

from tablecore.io.fileio import FileInfo, FileIO

_STORES: dict[str, dict[str, tuple[bytes, int]]] = {}
_LOCK = threading.Lock()


def clear_memory_stores() -> None:
    """Forget every in-memory table store."""
    with _LOCK:
        _STORES.clear()


class _Sink(io.BytesIO):
    """A byte buffer that stores its content under a path when closed."""

    def __init__(self, fileio: InMemoryFileIO, path: str) -> None:
        super().__init__()
        self._fileio = fileio
        self._path = path

    def close(self) -> None:
        if not self.closed:
            self._fileio.write_bytes(self._path, self.getvalue())
        super().close()


class InMemoryFileIO(FileIO):
    """Files in a dict shared by every FileIO of the same ``memory://name``."""

    hadoop_compatible = False

    def __init__(self, base_path: str) -> None:
        parsed = urlparse(base_path)
        if parsed.scheme != "memory":
            raise ValueError(f"not a memory:// URI: {base_path!r}")
        name = parsed.netloc
        self.base = "/" + name + (parsed.path.rstrip("/") if parsed.path not in ("", "/") else "")
        self.uri = base_path
        with _LOCK:
            self._files = _STORES.setdefault(name, {})

    def table_uri(self) -> str:
        """The ``memory://`` URI."""
        return "memory:/" + self.base

    def uri_of(self, path: str) -> str:
        """``memory:/`` + ``path``."""
        return "memory:/" + path

    @staticmethod
    def _norm(path: str) -> str:
        return posixpath.normpath(path)

    def exists(self, path: str) -> bool:
        """True for a file, or a directory that holds files."""
        p = self._norm(path)
        with _LOCK:
            return p in self._files or any(k.startswith(p.rstrip("/") + "/") for k in self._files)

    def open_input(self, path: str) -> Any:
        """A ``pyarrow.BufferReader`` over the file's bytes."""
        return pa.BufferReader(self.read_bytes(path))

    def read_bytes(self, path: str) -> bytes:
        """The file's bytes; FileNotFoundError if there is no such file."""
        with _LOCK:
            entry = self._files.get(self._norm(path))
        if entry is None:
            raise FileNotFoundError(path)
        return entry[0]

    def list(self, directory: str, *, recursive: bool = False) -> list[FileInfo]:
        """Files under ``directory`` (directly, or at any depth with ``recursive``)."""
        prefix = self._norm(directory).rstrip("/") + "/"
        with _LOCK:
            items = list(self._files.items())
        out = []
        for path, (data, mtime) in sorted(items):
            if not path.startswith(prefix):
                continue
            if not recursive and "/" in path[len(prefix):]:
                continue
            out.append(FileInfo(path, posixpath.basename(path), len(data), mtime))
        return out

    def open_output(self, path: str) -> Any:
        """An output stream stored under ``path`` when closed."""
        return pa.PythonFile(_Sink(self, path), mode="w")

    def write_bytes(self, path: str, data: bytes) -> None:
        """Store ``data`` under ``path`` (replacing it)."""
        with _LOCK:
            self._files[self._norm(path)] = (bytes(data), time.time_ns())

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Store ``data`` under ``path`` unless it exists (atomic under the store's lock)."""
        p = self._norm(path)
        with _LOCK:
            if p in self._files:
                return False
            self._files[p] = (bytes(data), time.time_ns())
            return True

    def move(self, source: str, target: str) -> None:
        """Re-key the file."""
        with _LOCK:
            entry = self._files.pop(self._norm(source), None)
            if entry is None:
                raise FileNotFoundError(source)
            self._files[self._norm(target)] = entry

    def move_if_absent(self, source: str, target: str) -> bool:
        """Re-key the file unless ``target`` exists (under the store's lock: atomic in this process)."""
        with _LOCK:
            if self._norm(target) in self._files:
                return False
            entry = self._files.pop(self._norm(source), None)
            if entry is None:
                raise FileNotFoundError(source)
            self._files[self._norm(target)] = entry
            return True

    def makedirs(self, directory: str) -> None:
        """Directories are implicit."""

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete a file."""
        with _LOCK:
            found = self._files.pop(self._norm(path), None)
        if found is None and not missing_ok:
            raise FileNotFoundError(path)

    def delete_dir(self, directory: str) -> None:
        """Delete every file under ``directory``."""
        prefix = self._norm(directory).rstrip("/") + "/"
        with _LOCK:
            for k in [k for k in self._files if k.startswith(prefix)]:
                del self._files[k]
