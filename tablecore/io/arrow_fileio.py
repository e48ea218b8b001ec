"""FileIO backends over ``pyarrow.fs``: :class:`ArrowFileIO` for any file system pyarrow opens from a URI, and
:class:`LocalFileIO` for a local disk.

On a local disk, :meth:`LocalFileIO.create_if_absent` (the atomic publish of a commit) writes a temporary file and
hard-links it to the final name, which fails if the name exists: readers never see a partial file, and two writers
can never both create it. :class:`ArrowFileIO` checks, then writes: atomic only with a single writer (documented in
``docs/tablecore.md``); an object-store backend with conditional writes replaces it where the store offers them.

Both are picklable (``pyarrow.fs`` file systems are), so engines hand them to their executors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import re
import uuid
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from tablecore.io.fileio import FileInfo, FileIO

logger = logging.getLogger(__name__)


class ArrowFileIO(FileIO):
    """File operations on one table location of any ``pyarrow.fs`` file system.

    Args:
        base_path: the table's base URI (``s3://bucket/t``, ``hdfs://...``).
        fs: the file system (default: opened from ``base_path``), and then ``base_path`` is its path in it.
    """

    def __init__(self, base_path: str, fs: pafs.FileSystem | None = None) -> None:
        if fs is None:
            fs, path = pafs.FileSystem.from_uri(base_path)
        else:
            path = base_path
        self.fs: pafs.FileSystem = fs
        self.base = path.rstrip("/") or "/"
        self.remote = not isinstance(fs, pafs.LocalFileSystem)  # HDFS: a name-node request each
        self.uri = base_path

    def table_uri(self) -> str:
        """The table URI as given."""
        return self.uri

    def uri_of(self, path: str) -> str:
        """``scheme://path``."""
        scheme = urlparse(self.uri).scheme
        return f"{scheme}://{path}" if scheme else path

    # reads -------------------------------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        """True if a file or directory exists at ``path``."""
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def open_input(self, path: str) -> Any:
        """A random-access ``pyarrow`` input file."""
        return self.fs.open_input_file(path)

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file (one sequential stream)."""
        with self.fs.open_input_stream(path) as f:
            return bytes(f.read())

    def list(self, directory: str, *, recursive: bool = False) -> list[FileInfo]:
        """Files (not directories) under ``directory``; empty if it does not exist."""
        sel = pafs.FileSelector(directory, allow_not_found=True, recursive=recursive)
        out = []
        for info in self.fs.get_file_info(sel):
            if info.type == pafs.FileType.File:
                out.append(FileInfo(info.path, info.base_name, int(info.size or 0), info.mtime_ns))
        return out

    # writes ------------------------------------------------------------------------------------------------------
    def makedirs(self, directory: str) -> None:
        """Create a directory and its parents."""
        self.fs.create_dir(directory, recursive=True)

    def open_output(self, path: str) -> Any:
        """A ``pyarrow`` output stream (parents created first)."""
        self.makedirs(posixpath.dirname(path))
        return self.fs.open_output_stream(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file."""
        with self.open_output(path) as out:
            out.write(pa.py_buffer(data))

    def supports_atomic_create(self) -> bool:
        """False: :meth:`create_if_absent` checks, then writes."""
        return False

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Check, then write: atomic only with a single writer."""
        if self.exists(path):
            return False
        self.write_bytes(path, data)
        return True

    def move(self, source: str, target: str) -> None:
        """Rename (parents of ``target`` created first)."""
        self.makedirs(posixpath.dirname(target))
        self.fs.move(source, target)

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete a file."""
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            if not missing_ok:
                raise
        except OSError:
            if self.exists(path) or not missing_ok:
                raise

    def delete_dir(self, directory: str) -> None:
        """Delete a directory and everything below it; nothing happens if it does not exist."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(directory)


_TEMPORARY = re.compile(r"\.[0-9a-f]{32}\.tmp$")


def _temporary(name: str) -> str:
    """The name of a temporary file beside ``name`` (``write_bytes``: ``name.<hex>.tmp``; ``create_if_absent``:
    ``.name.<hex>.tmp``)."""
    return f"{name}.{uuid.uuid4().hex}.tmp"


def is_temporary(name: str) -> bool:
    """True for the name of a :class:`LocalFileIO` temporary file: what an atomic write or create-if-absent leaves
    beside its target when the process is killed between its write and its rename or unlink."""
    return _TEMPORARY.search(name) is not None


class LocalFileIO(ArrowFileIO):
    """File operations on a table on a local disk (``/data/t`` or ``file:///data/t``), with atomic replace and
    create-if-absent."""

    def __init__(self, base_path: str) -> None:
        parsed = urlparse(base_path)
        local = parsed.path if parsed.scheme == "file" else base_path
        base = os.path.abspath(local).rstrip("/") or "/"
        super().__init__(base, pafs.LocalFileSystem())
        self.uri = base

    def table_uri(self) -> str:
        """``file://`` + the absolute base path."""
        return "file://" + self.base

    def uri_of(self, path: str) -> str:
        """``file://`` + ``path``."""
        return "file://" + path

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a temporary file, then rename it over ``path`` (readers see the old or the new content)."""
        self.makedirs(posixpath.dirname(path))
        tmp = _temporary(path)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def supports_atomic_create(self) -> bool:
        """True: :meth:`create_if_absent` hard-links a complete temporary file."""
        return True

    def move_if_absent(self, source: str, target: str) -> bool:
        """Hard-link ``source`` to ``target`` (fails atomically if it exists), then unlink ``source``."""
        self.makedirs(posixpath.dirname(target))
        try:
            os.link(source, target)
        except FileExistsError:
            return False
        os.unlink(source)
        return True

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Write a temporary file, then hard-link it to ``path``: fails (False) if ``path`` exists, atomically."""
        parent = posixpath.dirname(path)
        self.makedirs(parent)
        tmp = posixpath.join(parent, _temporary("." + posixpath.basename(path)))
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        return True
