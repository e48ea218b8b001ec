"""``FileIO``: read, write, list, delete and create-if-absent over ``pyarrow.fs``.

The completed instant file of a commit is written with :meth:`FileIO.create_if_absent`, the atomic publish. On a
local file system it is a write to a temporary file followed by ``os.link`` to the final name, which fails if the
name exists: readers never see a partial file, and two writers can never both create it. Other file systems get a
check-then-write that is atomic only with a single writer (documented in ``docs/tablecore.md``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileInfo:
    """A listed file: its full path, bare name and size."""

    path: str
    name: str
    size: int
    mtime_ns: int | None = None


class FileIO:
    """File operations on one table location.

    Args:
        base_path: the table's base path or URI (``/data/t``, ``file:///data/t``, ``s3://bucket/t``...).
    """

    def __init__(self, base_path: str) -> None:
        uri = base_path
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            local = parsed.path if parsed.scheme == "file" else uri
            self.fs: pafs.FileSystem = pafs.LocalFileSystem()
            self.base = os.path.abspath(local).rstrip("/") or "/"
            self.is_local = True
        else:
            self.fs, path = pafs.FileSystem.from_uri(uri)
            self.base = path.rstrip("/")
            self.is_local = False
        self.uri = base_path if not self.is_local else self.base

    # paths -------------------------------------------------------------------------------------------------------
    def join(self, *parts: str) -> str:
        """A path under the table base; empty parts are skipped."""
        return posixpath.join(self.base, *[p for p in parts if p])

    def table_uri(self) -> str:
        """An absolute URI of the table (what Spark and hudi-rs are given)."""
        if self.is_local:
            return "file://" + self.base
        return self.uri

    def spark_path(self, path: str) -> str:
        """A path as Spark must be given it."""
        if self.is_local:
            return "file://" + path
        scheme = urlparse(self.uri).scheme
        return f"{scheme}://{path}"

    # reads -------------------------------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        """True if a file or directory exists at ``path``."""
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file."""
        with self.fs.open_input_stream(path) as f:
            return bytes(f.read())

    def list_files(self, directory: str, *, recursive: bool = False) -> list[FileInfo]:
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

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file, replacing any previous content atomically where the file system allows."""
        parent = posixpath.dirname(path)
        self.makedirs(parent)
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            return
        with self.fs.open_output_stream(path) as out:
            out.write(pa.py_buffer(data))

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist yet; return False if it existed.

        Local file systems: atomic (temporary file + hard link). Elsewhere: check then write.
        """
        parent = posixpath.dirname(path)
        self.makedirs(parent)
        if self.is_local:
            tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
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
        if self.exists(path):
            return False
        with self.fs.open_output_stream(path) as out:
            out.write(pa.py_buffer(data))
        return True

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
