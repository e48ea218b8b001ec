"""Java ``Properties`` text, as Hudi reads and writes ``hoodie.properties``.

Java escapes ``:``, ``=``, ``#``, ``!`` and ``\\`` in values; hudi-rs undoes only ``\\:`` inside schema strings, so
writers should keep escapes out of every value but the create schema (see the format reference §1.1).
"""

from __future__ import annotations

import datetime as dt
import zlib

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java Properties text into a dict.

    Args:
        text: the file content.

    Returns:
        The key/value pairs in file order.

    Raises:
        ValueError: on a malformed line (no separator, bad unicode escape).
    """
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # a line ending in an odd number of backslashes continues on the next line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:":
            return line[:i].rstrip(), line[i + 1 :].lstrip()
        if c in " \t":
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return line[:i], rest
        i += 1
    raise ValueError(f"malformed properties line (no '=' separator): {line[:80]!r}")


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u":
            code = s[i + 2 : i + 6]
            if len(code) != 4 or any(ch not in "0123456789abcdefABCDEF" for ch in code):
                raise ValueError(f"bad unicode escape in properties value: {s[i : i + 6]!r}")
            out.append(chr(int(code, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    return "".join(out)


def escape_value(value: str) -> str:
    """Escape a value the way Java ``Properties.store`` does (``:``, ``=``, ``#``, ``!``, ``\\``)."""
    out: list[str] = []
    stripped = value.lstrip(" ")
    out.append("\\ " * (len(value) - len(stripped)))  # leading blanks are escaped, as Java does
    for c in stripped:
        if c in "\\:=#!":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) > 126 or ord(c) < 32:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def java_date(now: dt.datetime | None = None) -> str:
    """A UTC time as Java's ``Date.toString()`` writes it (``Sat Nov 21 04:47:30 UTC 2026``)."""
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%a %b %d %H:%M:%S UTC %Y")


def format_properties(props: dict[str, str], *, now: dt.datetime | None = None) -> str:
    """Render properties as Java would: two comment lines, then ``key=value`` lines.

    Args:
        props: keys and values; values are escaped with :func:`escape_value`.
        now: the time for the header comments (default: now, UTC).
    """
    now = now or dt.datetime.now(dt.UTC)
    lines = [
        f"#Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.')}{now.microsecond // 1000:03d}Z",
        f"#{java_date(now)}",
    ]
    lines += [f"{k}={escape_value(v)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def table_checksum(database: str, table_name: str) -> int:
    """``hoodie.table.checksum``: CRC32 of ``"<database>.<table>"`` (UTF-8), unsigned."""
    return zlib.crc32(f"{database}.{table_name}".encode()) & 0xFFFFFFFF
