"""File I/O for tables: the :class:`FileIO` interface and its backends, chosen from the table URI."""

from collections.abc import Mapping
from urllib.parse import urlparse

from tablecore.io.arrow_fileio import ArrowFileIO, LocalFileIO
from tablecore.io.fileio import FileInfo, FileIO
from tablecore.io.memory import InMemoryFileIO, clear_memory_stores
from tablecore.io.object_store import S3FileIO, S3Options, check_storage_options, is_s3


def file_io_for(uri: str, storage_options: Mapping[str, str] | None = None) -> FileIO:
    """The FileIO of a table location: a local path or ``file://`` URI -> :class:`LocalFileIO`; ``memory://name``
    -> :class:`InMemoryFileIO`; ``s3://`` / ``s3a://`` -> :class:`S3FileIO` (conditional writes; ``storage_options``
    as documented there); any other URI -> :class:`ArrowFileIO` (what ``pyarrow.fs`` opens: ``hdfs://``,
    ``gs://``...)."""
    scheme = urlparse(uri).scheme
    io: FileIO
    if is_s3(uri):
        return S3FileIO(uri, storage_options)
    if scheme in ("", "file"):
        io = LocalFileIO(uri)
    elif scheme == "memory":
        io = InMemoryFileIO(uri)
    else:
        io = ArrowFileIO(uri)
    check_storage_options(io, storage_options)
    return io


__all__ = [
    "ArrowFileIO", "FileIO", "FileInfo", "InMemoryFileIO", "LocalFileIO", "S3FileIO", "S3Options",
    "clear_memory_stores", "file_io_for",
]
