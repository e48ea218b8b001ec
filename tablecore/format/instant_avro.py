"""Avro instant files of Hudi table services (table version 6 / Hudi 0.14-0.15, format reference §2 and §9).

Hudi stores the plans and results of compaction, clean, rollback, savepoint, restore and clustering as Avro object
container files (OCF) in ``.hoodie/``: magic ``Obj\\x01``, a header map holding only ``avro.schema``, no codec
(so no ``avro.codec`` key), a random 16-byte sync marker and one block with exactly one record.

Writing. fastavro's ``writer`` always adds ``avro.codec`` to the header, so this module writes the container
itself (a dozen lines) and uses fastavro only to encode the record body. The embedded schema is the compact JSON
that Java's ``Schema.toString()`` produces for Hudi's generated classes: ``"avro.java.string":"String"`` on
strings and maps, field docs kept, type docs dropped, nested named types without a namespace and referenced by
name after their first use. With the same sync marker, a file written here is byte-for-byte the file Hudi wrote
(checked against real 0.14/0.15 rollback, rollback plan and requested-replace files in the tests).

The schemas are in :mod:`tablecore.format.service_schemas`; typed builders and readers in
:mod:`tablecore.format.service_metadata`.
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

import fastavro
from fastavro.validation import ValidationError, validate

from tablecore.format.service_schemas import KIND_BY_RECORD_NAME, parsed_schema, schema_json

logger = logging.getLogger(__name__)

MAGIC = b"Obj\x01"
SCHEMA_KEY = "avro.schema"


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _avro_bytes(b: bytes) -> bytes:
    return _zigzag(len(b)) + b


def encode_instant_avro(kind: str, record: Mapping[str, Any], *, sync_marker: bytes | None = None) -> bytes:
    """Encode one record of ``kind`` as a Hudi Avro instant file (OCF with only ``avro.schema``, no codec).

    ``kind`` is one of :data:`SCHEMAS` (``"compaction_plan"``, ``"cleaner_plan"``, ``"clean_metadata"``,
    ``"rollback_plan"``, ``"rollback_metadata"``, ``"savepoint_metadata"``, ``"restore_plan"``,
    ``"restore_metadata"``, ``"requested_replace_metadata"``). ``record`` must give every field (Avro field
    names); it is validated against the schema first. ``sync_marker`` (16 bytes) defaults to random bytes, as in
    Java; pass one only to reproduce a file byte for byte.
    """
    parsed = parsed_schema(kind)
    sync = os.urandom(16) if sync_marker is None else sync_marker
    if len(sync) != 16:
        raise ValueError("sync_marker must be 16 bytes")
    try:
        validate(dict(record), parsed, raise_errors=True)
    except ValidationError as e:
        raise ValueError(f"record does not match the {kind} schema: {e}") from e
    body = io.BytesIO()
    fastavro.schemaless_writer(body, parsed, dict(record))
    data = body.getvalue()
    out = b"".join(
        [
            MAGIC,
            _zigzag(1),  # metadata map: one entry, then the end-of-map 0
            _avro_bytes(SCHEMA_KEY.encode()),
            _avro_bytes(schema_json(kind).encode()),
            _zigzag(0),
            sync,
            _zigzag(1),  # one block of one record
            _zigzag(len(data)),
            data,
            sync,
        ]
    )
    logger.debug("encoded %s instant file (%d bytes)", kind, len(out))
    return out


def is_avro_instant(data: bytes) -> bool:
    """Whether ``data`` starts like an Avro container file (empty inflight files and JSON commits do not)."""
    return data[:4] == MAGIC


def _reader(data: bytes, reader_schema: Any = None) -> Any:
    if not data:
        raise ValueError("empty instant file: there is no Avro record to read")
    if not is_avro_instant(data):
        raise ValueError("not an Avro object container file (magic Obj\\x01 missing)")
    return fastavro.reader(io.BytesIO(data), reader_schema=reader_schema)


def embedded_schema(data: bytes) -> dict[str, Any]:
    """The writer schema embedded in an Avro instant file's header, parsed from JSON."""
    schema: dict[str, Any] = json.loads(_reader(data).metadata[SCHEMA_KEY])
    return schema


def instant_kind(data: bytes) -> str | None:
    """The kind of an Avro instant file, from the record name of its embedded schema (None if not a known one)."""
    schema = embedded_schema(data)
    name = schema.get("name", "")
    full = name if "." in name else f"{schema.get('namespace', '')}.{name}"
    return KIND_BY_RECORD_NAME.get(full)


def decode_instant_avro(data: bytes, kind: str | None = None) -> dict[str, Any]:
    """Decode the single record of a Hudi Avro instant file into a dict (Avro field names).

    Without ``kind`` the record is read with the schema embedded in the file. With ``kind`` it is also resolved
    against this module's schema of that kind: fields the writer lacked get their defaults and fields this module
    does not know are dropped; a file of another kind raises ``ValueError``.
    """
    reader_schema = None
    if kind is not None:
        found = instant_kind(data)
        if found != kind:
            raise ValueError(f"expected a {kind} instant file, found {found or embedded_schema(data).get('name')}")
        reader_schema = parsed_schema(kind)
    records = list(_reader(data, reader_schema))
    if len(records) != 1:
        raise ValueError(f"a Hudi instant file holds exactly one record, found {len(records)}")
    record: dict[str, Any] = records[0]
    return record


