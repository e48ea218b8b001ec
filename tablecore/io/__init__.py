"""File I/O for tables: the :class:`FileIO` interface and its backends, chosen from the table URI."""

from urllib.parse import urlparse

from tablecore.io.arrow_fileio import ArrowFileIO, LocalFileIO
from tablecore.io.fileio import FileInfo, FileIO
from tablecore.io.memory import InMemoryFileIO, clear_memory_stores


def file_io_for(uri: str) -> FileIO:
    """The FileIO of a table location: a local path or ``file://`` URI -> :class:`LocalFileIO`; ``memory://name``
    -> :class:`InMemoryFileIO`; any other URI -> :class:`ArrowFileIO` (what ``pyarrow.fs`` opens: ``s3://``,
    ``hdfs://``, ``gs://``...)."""
    scheme = urlparse(uri).scheme
    if scheme in ("", "file"):
        return LocalFileIO(uri)
    if scheme == "memory":
        return InMemoryFileIO(uri)
    return ArrowFileIO(uri)


__all__ = ["ArrowFileIO", "FileIO", "FileInfo", "InMemoryFileIO", "LocalFileIO", "clear_memory_stores", "file_io_for"]
