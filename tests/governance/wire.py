"""Test helper: Kafka messages in the Confluent wire format, and files of them as the files source reads them.

A message is the magic byte 0, the 4-byte big-endian schema id and the Avro binary body (fastavro's schemaless
writer); a file is a sequence of messages, each framed by its 4-byte big-endian length.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import fastavro


def message(schema_id: int, schema: Mapping[str, Any], record: Mapping[str, Any], *, magic: int = 0) -> bytes:
    """One wire-format message of ``record`` written with ``schema`` (registered under ``schema_id``)."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(dict(schema)), dict(record))
    return bytes([magic]) + schema_id.to_bytes(4, "big") + body.getvalue()


def frame(data: bytes) -> bytes:
    """``data`` prefixed by its 4-byte big-endian length."""
    return len(data).to_bytes(4, "big") + data


def write_confluent_file(path: Path, messages: Iterable[bytes]) -> Path:
    """Write length-framed ``messages`` to ``path``."""
    path.write_bytes(b"".join(frame(m) for m in messages))
    return path
