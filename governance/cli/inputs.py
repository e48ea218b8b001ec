"""Checks of what a command is given, made before anything expensive starts (a JVM, a server, a registry call).

- :func:`read_text_file`: a user file (schema, auth config) as UTF-8 text; a missing or unreadable file, a directory
  and bytes that are not UTF-8 end the command with exit 2 and a message naming the file (and the line and byte
  offset of the first bad byte).
- :func:`parse_json`: JSON text, with the file, line and column of a syntax error.
- :func:`check_local_directory` / :func:`require_table`: a local table path (or a folder option such as
  ``--audit-dir``) that is a regular file, or lies below one, is a usage error (exit 2) found with a few ``stat``
  calls; a table a command needs must have ``.hoodie/hoodie.properties`` (else exit 3, ``no table at PATH``).
  Object-store paths (``s3://``) get only the ``hoodie.properties`` test, which is one request.

Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from governance.cli.output import CliError, ExitCode

STDIN = "-"


def decode_problem(data: bytes, error: UnicodeDecodeError) -> tuple[int, str]:
    """The 1-based line of the first byte of ``data`` that is not UTF-8, and the byte and its offset
    (``byte 0xff at offset 41``)."""
    line = data.count(b"\n", 0, error.start) + 1
    return line, f"byte 0x{data[error.start]:02x} at offset {error.start}"


def read_text_file(name: str | Path, what: str) -> str:
    """The text of the user file ``name`` (``-``: standard input), decoded as UTF-8.

    Args:
        name: the file's path as the user gave it (the messages repeat it), or ``-``.
        what: what the file holds, for the messages (``schema file``, ``auth config``).

    Raises:
        CliError: (exit 2) the file is missing, unreadable or a directory, or its bytes are not UTF-8; the message
            starts with the file's name.
    """
    label = "<stdin>" if str(name) == STDIN else str(name)
    try:
        data = sys.stdin.buffer.read() if str(name) == STDIN else Path(name).read_bytes()
    except OSError as e:
        raise CliError(f"{label}: cannot read the {what}: {e.strerror or e}", ExitCode.USAGE) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, where = decode_problem(data, e)
        raise CliError(f"{label}:{line}: the {what} is not UTF-8 text ({where})", ExitCode.USAGE) from None


def parse_json(text: str, name: str | Path, what: str) -> Any:
    """The JSON document ``text`` of the file ``name``.

    Raises:
        CliError: (exit 2) not JSON: ``schema.avsc:3:14: the schema file is not valid JSON: Expecting ',' delimiter``.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        label = "<stdin>" if str(name) == STDIN else str(name)
        raise CliError(f"{label}:{e.lineno}:{e.colno}: the {what} is not valid JSON: {e.msg}", ExitCode.USAGE) \
            from None


def local_path(path: str) -> Path | None:
    """The local file-system path of a table location (a plain path or a ``file://`` URI); None for other URIs —
    the same split as :func:`tablecore.io.file_io_for`."""
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme == "":
        return Path(path)
    return None


def directory_problem(path: str, what: str) -> str | None:
    """Why the local ``path`` cannot be a directory — it is a regular file (or another non-directory), or one of its
    parents is — else None (also for a path that does not exist yet, and for URIs that are not local).

    Only ``stat`` calls: the nearest existing ancestor-or-self of the path must be a directory.
    """
    local = local_path(path)
    if local is None:
        return None
    candidate = Path(os.path.abspath(local))
    for current in (candidate, *candidate.parents):
        try:
            is_dir = current.is_dir()
            exists = is_dir or current.exists()
        except OSError:  # cannot tell (permissions): what opens the path later reports it
            return None
        if not exists:
            continue
        if is_dir:
            return None
        if current == candidate:
            return f"{path} is a file, not a {what}"
        return f"{path}: {current} is a file, not a directory"
    return None


def check_local_directory(path: str, what: str = "table directory") -> None:
    """Refuse a local ``path`` that is a file or lies below a file (see :func:`directory_problem`).

    Raises:
        CliError: (exit 2) naming the path.
    """
    problem = directory_problem(path, what)
    if problem is not None:
        raise CliError(problem, ExitCode.USAGE)


def check_folder_option(value: str | None, option: str, what: str = "folder") -> None:
    """Refuse a folder option (``--audit-dir``, ``--quarantine-path``) whose local path is a file or lies below one;
    None passes.

    Raises:
        CliError: (exit 2) naming the option and the path.
    """
    if value is not None:
        problem = directory_problem(value, what)
        if problem is not None:
            raise CliError(f"{option}: {problem}", ExitCode.USAGE)


def require_table(path: str, *, hint: str = "") -> None:
    """Check, without Spark, that a table exists at ``path``: a local path must be a directory (exit 2) and every
    table needs ``.hoodie/hoodie.properties`` (exit 3).

    Args:
        path: the table's base path or URI.
        hint: appended to the not-found message (``" (run the pipeline first)"``).

    Raises:
        CliError: the local path is a file or below one.
        TableNotFoundError: no ``hoodie.properties``.
    """
    from tablecore import TableNotFoundError
    from tablecore.io import file_io_for
    from tablecore.table_properties import PROPERTIES, PROPERTIES_BACKUP

    check_local_directory(path)
    io = file_io_for(path)
    if not io.exists(io.join(PROPERTIES)) and not io.exists(io.join(PROPERTIES_BACKUP)):
        raise TableNotFoundError(f"no table at {path}: {PROPERTIES} not found{hint}")


def table_exists(path: str) -> bool:
    """True if ``.hoodie/hoodie.properties`` exists at ``path`` (one ``stat``, or one request on an object store)."""
    from tablecore.io import file_io_for
    from tablecore.table import PROPERTIES

    io = file_io_for(path)
    return io.exists(io.join(PROPERTIES))


__all__ = [
    "STDIN",
    "check_folder_option",
    "check_local_directory",
    "decode_problem",
    "directory_problem",
    "local_path",
    "parse_json",
    "read_text_file",
    "require_table",
    "table_exists",
]
