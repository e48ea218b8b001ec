"""File I/O for tables: a thin layer over ``pyarrow.fs`` with the one atomic primitive a commit needs."""

from tablecore.io.fileio import FileInfo, FileIO

__all__ = ["FileIO", "FileInfo"]
