"""Checks of what a command is given, made before anything expensive starts (a JVM, a server, a registry call).

- :func:`read_text_file`: a user file (schema, auth config) as UTF-8 text; a missing or unreadable file, a directory
  and bytes that are not UTF-8 end the command with exit 2 and a message naming the file (and the line and byte
  offset of the first bad byte).
- :func:`parse_json`: JSON text, with the file, line and column of a syntax error.

Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


__all__ = [
    "STDIN",
    "decode_problem",
    "parse_json",
    "read_text_file",
]
