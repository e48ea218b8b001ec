"""Hudi v6 log files: block framing, data/delete/command block contents and log file names (reference §4, §6).

A log file is a plain concatenation of blocks; every integer is big-endian::

    magic "#HUDI#" | blockSize int64 | version int32 (=1) | type int32 | header map | contentLen int64 | content
    | footer map | totalLen int64

``blockSize`` counts the bytes after itself up to and including ``totalLen``; ``totalLen`` = ``blockSize + 6`` (the
bytes from the magic through the footer). A map is an int32 entry count, then per entry an int32 key, an int32
byte length and that many UTF-8 bytes.

Block contents handled here (content version 3, the only one Hudi 0.14/0.15 writes):

- AVRO_DATA: int32 version, int32 record count, then per record an int32 length and the schemaless Avro datum,
  decoded with the block's SCHEMA header (:func:`encode_avro_data`, :func:`decode_avro_data`);
- DELETE: int32 version, int32 length, an Avro ``HoodieDeleteRecordList`` datum whose ordering values use Java's
  wrapper-record union (:func:`encode_delete`, :func:`decode_delete`);
- COMMAND: a rollback of the blocks of a target instant; empty content (:func:`encode_rollback_command`);
- PARQUET_DATA: a complete Parquet file (:func:`decode_parquet_data`; read only).

Everything here is pure (no Spark, no I/O): bytes in, bytes out.
"""

from __future__ import annotations

import datetime
import enum
import functools
import io
import json
import logging
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from tablecore.exceptions import TableCoreError

__all__ = [
    "CONTENT_VERSION",
    "DELETE_RECORD_LIST_SCHEMA",
    "MAGIC",
    "BlockType",
    "DeleteRecord",
    "HeaderKey",
    "LogBlock",
    "LogFileName",
    "LogFormatError",
    "TruncatedBlockError",
    "decode_avro_data",
    "decode_delete",
    "decode_parquet_data",
    "encode_avro_data",
    "encode_block",
    "encode_delete",
    "encode_rollback_command",
    "iter_blocks",
    "read_blocks",
]

logger = logging.getLogger(__name__)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
CONTENT_VERSION = 3
ROLLBACK_COMMAND = "0"  # COMMAND_BLOCK_TYPE value of a rollback, the only command type

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
# bytes of a block after blockSize when header, content and footer are all empty: version, type, header count,
# content length, footer count, total length
_MIN_BLOCK_SIZE = 4 + 4 + 4 + 8 + 4 + 8
# fastavro reports malformed input with assorted builtin exceptions
_AVRO_DECODE_ERRORS = (EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError, StopIteration)


class LogFormatError(TableCoreError, ValueError):
    """Bytes that are not a valid Hudi log file, block or block content (the message names the offset)."""


class TruncatedBlockError(LogFormatError):
    """The data ends inside a block, as after a writer died mid-append.

    Attributes:
        offset: the file offset at which the incomplete block starts.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class BlockType(enum.IntEnum):
    """The block type codes of log format version 1."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    """Keys of the block header and footer maps (Java decodes them by ordinal, so only 0-6 exist in v6)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6


@dataclass(frozen=True)
class LogBlock:
    """One decoded block. ``header`` and ``footer`` keep the order in which the file holds their entries.

    ``offset`` (the file offset of the block's magic) is informational and not part of equality.
    """

    block_type: BlockType
    header: dict[HeaderKey, str]
    content: bytes
    footer: dict[HeaderKey, str] = field(default_factory=dict)
    offset: int = field(default=0, compare=False)

    @property
    def instant(self) -> str | None:
        """The INSTANT_TIME header: the instant that wrote the block (for a command block, the rollback instant)."""
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant(self) -> str | None:
        """The TARGET_INSTANT_TIME header: the instant a command block rolls back."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        """The SCHEMA header: the Avro writer schema (JSON text) of a data or delete block."""
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def is_rollback(self) -> bool:
        """True for a COMMAND block that rolls back ``target_instant``."""
        return (self.block_type is BlockType.COMMAND
                and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND)

    def to_bytes(self) -> bytes:
        """Encode the block again, header and footer entries in their current order."""
        return encode_block(self.block_type, list(self.header.items()), self.content, footer=list(self.footer.items()))


# ---------------------------------------------------------------------------------------------------------------------
# block framing
# ---------------------------------------------------------------------------------------------------------------------


def _encode_map(entries: Iterable[tuple[HeaderKey, str]] | Mapping[HeaderKey, str]) -> bytes:
    items = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
    keys = [HeaderKey(k) for k, _ in items]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate header/footer keys: {[k.name for k in keys]}")
    out = [_INT32.pack(len(items))]
    for key, (_, value) in zip(keys, items, strict=True):
        raw = value.encode("utf-8")
        out += [_INT32.pack(key), _INT32.pack(len(raw)), raw]
    return b"".join(out)


def encode_block(
    block_type: BlockType,
    header: Sequence[tuple[HeaderKey, str]] | Mapping[HeaderKey, str],
    content: bytes,
    *,
    footer: Sequence[tuple[HeaderKey, str]] | Mapping[HeaderKey, str] = (),
) -> bytes:
    """Frame ``content`` as one log block (log format version 1).

    Args:
        block_type: the block type.
        header: the header entries, written in the given order (Java's order varies by block type, and byte-identical
            re-encoding needs the original order).
        content: the block content (see :func:`encode_avro_data`, :func:`encode_delete`).
        footer: footer entries; Java always writes none.

    Returns:
        The block bytes, magic through trailing length.

    Raises:
        ValueError: a header or footer key appears twice.
    """
    body = b"".join([
        _INT32.pack(LOG_FORMAT_VERSION),
        _INT32.pack(BlockType(block_type)),
        _encode_map(header),
        _INT64.pack(len(content)),
        content,
        _encode_map(footer),
    ])
    block_size = len(body) + 8
    return MAGIC + _INT64.pack(block_size) + body + _INT64.pack(block_size + len(MAGIC))


class _Cursor:
    """Reads the fields of one complete block ``data[start:end]``; errors name the file offset."""

    def __init__(self, data: bytes, pos: int, end: int, block_start: int) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.block_start = block_start

    def fail(self, problem: str) -> LogFormatError:
        return LogFormatError(f"corrupt log block at offset {self.block_start}: {problem} (at offset {self.pos})")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"{what} of {n} bytes overruns the block end at offset {self.end}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int32(self, what: str) -> int:
        value: int = _INT32.unpack(self.take(4, what))[0]
        return value

    def int64(self, what: str) -> int:
        value: int = _INT64.unpack(self.take(8, what))[0]
        return value

    def map(self, what: str) -> dict[HeaderKey, str]:
        count = self.int32(f"{what} entry count")
        if count < 0:
            raise self.fail(f"negative {what} entry count {count}")
        out: dict[HeaderKey, str] = {}
        for _ in range(count):
            raw_key = self.int32(f"{what} key")
            try:
                key = HeaderKey(raw_key)
            except ValueError:
                raise self.fail(f"unknown {what} key {raw_key}") from None
            raw = self.take(self.int32(f"{what} value length"), f"{what} value {key.name}")
            try:
                out[key] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail(f"{what} value {key.name} is not UTF-8") from None
        return out


def _read_block(data: bytes, start: int) -> tuple[LogBlock, int]:
    """Decode the block starting at ``start``; return it and the offset after it."""
    remaining = len(data) - start
    if data[start:start + len(MAGIC)] != MAGIC[:min(remaining, len(MAGIC))]:
        raise LogFormatError(f"bad magic at offset {start}: expected {MAGIC!r}, found {data[start:start + 6]!r}")
    if remaining < len(MAGIC) + 8:
        raise TruncatedBlockError(f"truncated log block at offset {start}: only {remaining} bytes left", start)
    block_size: int = _INT64.unpack_from(data, start + len(MAGIC))[0]
    if block_size < _MIN_BLOCK_SIZE:
        raise LogFormatError(f"corrupt log block at offset {start}: blockSize {block_size} is too small")
    body_start = start + len(MAGIC) + 8
    end = body_start + block_size
    if end > len(data):
        raise TruncatedBlockError(
            f"truncated log block at offset {start}: blockSize {block_size} needs {end - start} bytes, "
            f"only {remaining} left", start)
    cur = _Cursor(data, body_start, end, start)
    version = cur.int32("log format version")
    if version != LOG_FORMAT_VERSION:
        raise cur.fail(f"unsupported log format version {version}")
    raw_type = cur.int32("block type")
    try:
        block_type = BlockType(raw_type)
    except ValueError:
        raise cur.fail(f"unknown block type {raw_type}") from None
    header = cur.map("header")
    content = cur.take(cur.int64("content length"), "content")
    footer = cur.map("footer")
    total = cur.int64("total block length")
    if cur.pos != end:
        raise cur.fail(f"{end - cur.pos} unexpected bytes before the block end (blockSize {block_size})")
    if total != block_size + len(MAGIC):
        raise cur.fail(f"total block length {total} does not match blockSize {block_size} (expected "
                       f"{block_size + len(MAGIC)})")
    return LogBlock(block_type, header, content, footer, offset=start), end


def iter_blocks(data: bytes) -> Iterator[LogBlock]:
    """Decode the blocks of a log file in file order.

    Every block is checked: magic, log format version 1, known block type and header keys, all lengths inside the
    block, trailing length = blockSize + 6 and nothing left over.

    Args:
        data: the whole log file.

    Yields:
        The blocks.

    Raises:
        TruncatedBlockError: the data ends inside a block (e.g. a writer killed mid-append).
        LogFormatError: any other malformed block.
    """
    data = bytes(data)
    pos = 0
    while pos < len(data):
        block, pos = _read_block(data, pos)
        yield block


def read_blocks(data: bytes, *, tolerate_truncated_tail: bool = True) -> list[LogBlock]:
    """Decode all blocks of a log file, optionally dropping an incomplete last block.

    Args:
        data: the whole log file.
        tolerate_truncated_tail: if true, a last block cut short (the writer died while appending it) is dropped with
            a warning and the complete blocks before it are returned; corrupt blocks still raise.

    Returns:
        The complete blocks in file order.

    Raises:
        TruncatedBlockError: the data ends inside a block and ``tolerate_truncated_tail`` is false.
        LogFormatError: any other malformed block.
    """
    blocks: list[LogBlock] = []
    try:
        blocks.extend(iter_blocks(data))
    except TruncatedBlockError as exc:
        if not tolerate_truncated_tail:
            raise
        logger.warning("ignoring the incomplete last log block (%d blocks kept): %s", len(blocks), exc)
    return blocks


# ---------------------------------------------------------------------------------------------------------------------
# AVRO_DATA and PARQUET_DATA
# ---------------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _parsed_schema(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


def _parse(schema: Mapping[str, Any] | str) -> Any:
    text = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)
    return _parsed_schema(text)


def encode_avro_data(records: Sequence[Mapping[str, Any]], schema: Mapping[str, Any] | str) -> bytes:
    """The content of an AVRO_DATA block (version 3): record count, then each record as length + Avro datum.

    Args:
        records: the records, as fastavro writes them (logical types as Python objects or raw ints; see
            :mod:`tablecore.format.avro_values` to build them from Arrow).
        schema: the writer schema (dict or JSON text); the block's SCHEMA header must carry the same schema.

    Returns:
        The content bytes.

    Raises:
        ValueError: a record does not match the schema (the message names its index).
    """
    parsed = _parse(schema)
    buf = io.BytesIO()
    ends = []
    for i, record in enumerate(records):
        try:
            fastavro.schemaless_writer(buf, parsed, record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise ValueError(f"record {i} does not match the Avro schema: {exc}") from exc
        ends.append(buf.tell())
    raw = buf.getbuffer()
    out: list[bytes | memoryview] = [_INT32.pack(CONTENT_VERSION), _INT32.pack(len(ends))]
    begin = 0
    for end in ends:
        out += [_INT32.pack(end - begin), raw[begin:end]]
        begin = end
    return b"".join(out)


def decode_avro_data(
    content: bytes,
    schema: Mapping[str, Any] | str,
    *,
    reader_schema: Mapping[str, Any] | str | None = None,
) -> list[dict[str, Any]]:
    """Decode the records of an AVRO_DATA block content (version 3).

    Args:
        content: the block content.
        schema: the writer schema, i.e. the block's SCHEMA header.
        reader_schema: an optional (evolved) schema to resolve the records to, by Avro schema resolution.

    Returns:
        The records as fastavro decodes them (logical types as Python objects, maps as dicts).

    Raises:
        LogFormatError: wrong version, a record length that does not match its datum, or undecodable bytes.
    """
    parsed = _parse(schema)
    parsed_reader = _parse(reader_schema) if reader_schema is not None else None
    if len(content) < 8:
        raise LogFormatError(f"Avro data block content of {len(content)} bytes is too short")
    version, count = _INT32.unpack_from(content, 0)[0], _INT32.unpack_from(content, 4)[0]
    if version != CONTENT_VERSION:
        raise LogFormatError(f"unsupported Avro data block content version {version} (expected {CONTENT_VERSION})")
    if count < 0:
        raise LogFormatError(f"negative record count {count} in Avro data block")
    buf = io.BytesIO(content)
    pos = 8
    records: list[dict[str, Any]] = []
    for i in range(count):
        if pos + 4 > len(content):
            raise LogFormatError(f"Avro data block: record {i} of {count} starts past the content end")
        length = _INT32.unpack_from(content, pos)[0]
        start, end = pos + 4, pos + 4 + length
        if length < 0 or end > len(content):
            raise LogFormatError(f"Avro data block: record {i} length {length} at content offset {pos} overruns the "
                                 f"content ({len(content)} bytes)")
        buf.seek(start)
        try:
            record = fastavro.schemaless_reader(buf, parsed, parsed_reader)
        except _AVRO_DECODE_ERRORS as exc:
            raise LogFormatError(f"Avro data block: record {i} at content offset {start} cannot be decoded: "
                                 f"{exc!r}") from exc
        if buf.tell() != end:
            raise LogFormatError(f"Avro data block: record {i} at content offset {start} decoded {buf.tell() - start} "
                                 f"bytes but its length says {length}")
        if not isinstance(record, dict):
            raise LogFormatError(f"Avro data block: the schema is not a record schema (record {i} is {record!r})")
        records.append(record)
        pos = end
    if pos != len(content):
        raise LogFormatError(f"Avro data block: {len(content) - pos} unexpected bytes after {count} records")
    return records


def decode_parquet_data(content: bytes) -> pa.Table:
    """Read the Parquet file that is the content of a PARQUET_DATA block.

    Raises:
        LogFormatError: the content is not a readable Parquet file.
    """
    try:
        return pq.read_table(pa.BufferReader(content))
    except (pa.ArrowException, OSError) as exc:
        raise LogFormatError(f"Parquet data block content is not a valid Parquet file: {exc}") from exc


# ---------------------------------------------------------------------------------------------------------------------
# DELETE
# ---------------------------------------------------------------------------------------------------------------------

_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, value_type: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": "value", "type": value_type}]}


# Java 0.14/0.15 ordering-value union (HUDI-5760). Branch order fixes the union index on the wire; logical types on the
# values change nothing in the encoding, so the values are declared with their plain types and converted here.
_WRAPPERS: tuple[tuple[str, str], ...] = (
    ("BooleanWrapper", "boolean"),
    ("IntWrapper", "int"),
    ("LongWrapper", "long"),
    ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"),
    ("BytesWrapper", "bytes"),
    ("StringWrapper", "string"),
    ("DateWrapper", "int"),  # days since epoch
    ("DecimalWrapper", "bytes"),  # decimal(30,15) two's complement, big-endian
    ("TimeMicrosWrapper", "long"),  # microseconds since midnight
    ("TimestampMicrosWrapper", "long"),  # microseconds since epoch, UTC
)

DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": _NS,
    "fields": [{
        "name": "deleteRecordList",
        "type": {"type": "array", "items": {
            "type": "record",
            "name": "HoodieDeleteRecord",
            "fields": [
                {"name": "recordKey", "type": ["null", "string"], "default": None},
                {"name": "partitionPath", "type": ["null", "string"], "default": None},
                {"name": "orderingVal", "type": ["null", *(_wrapper(n, t) for n, t in _WRAPPERS)], "default": None},
            ],
        }},
    }],
}
_DELETE_SCHEMA = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)

# Avro type of the ordering field -> wrapper record name
_WRAPPER_OF_TYPE: dict[str, str] = {
    "boolean": "BooleanWrapper",
    "int": "IntWrapper",
    "long": "LongWrapper",
    "float": "FloatWrapper",
    "double": "DoubleWrapper",
    "bytes": "BytesWrapper",
    "string": "StringWrapper",
    "date": "DateWrapper",
    "decimal": "DecimalWrapper",
    "time-micros": "TimeMicrosWrapper",
    "timestamp-micros": "TimestampMicrosWrapper",
}
_DECIMAL_SCALE = 15
_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_INT32_RANGE = range(-(2**31), 2**31)
_INT64_RANGE = range(-(2**63), 2**63)


@dataclass(frozen=True)
class DeleteRecord:
    """One key deleted by a DELETE block.

    ``natural_order`` marks a delete without a usable ordering value: readers apply it in commit order ("natural
    order") instead of comparing ordering values. Java writes such deletes as ``IntWrapper(0)`` and treats exactly
    ``IntWrapper(0)`` (and null) that way, so a real ordering value 0 of an ``int`` ordering field is natural order
    too. A record built with ``ordering_value=None`` is always natural order. Decoded records keep the stored value:
    ``0`` for ``IntWrapper(0)``, ``None`` for a null union branch.

    Ordering values are Python values: ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``Decimal``,
    ``datetime.date``, ``datetime.time`` or a UTC ``datetime.datetime`` (see :func:`encode_delete`).
    """

    record_key: str
    partition_path: str
    ordering_value: Any = None
    natural_order: bool = False

    def __post_init__(self) -> None:
        if self.ordering_value is None and not self.natural_order:
            object.__setattr__(self, "natural_order", True)


def _int_in(value: Any, valid: range, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in valid:
        raise ValueError(f"{what} ordering value must be an int in [{valid.start}, {valid.stop - 1}], got {value!r}")
    return value


def _wrap_ordering(value: Any, ordering_type: str) -> Any:
    """The wrapper value (a plain Avro value) for ``value`` of an ordering field of Avro type ``ordering_type``."""
    if ordering_type == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"boolean ordering value must be a bool, got {value!r}")
        return value
    if ordering_type == "int":
        return _int_in(value, _INT32_RANGE, "int")
    if ordering_type == "long":
        return _int_in(value, _INT64_RANGE, "long")
    if ordering_type in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{ordering_type} ordering value must be a float, got {value!r}")
        return float(value)
    if ordering_type == "string":
        if not isinstance(value, str):
            raise ValueError(f"string ordering value must be a str, got {value!r}")
        return value
    if ordering_type == "bytes":
        if not isinstance(value, (bytes, bytearray)):
            raise ValueError(f"bytes ordering value must be bytes, got {value!r}")
        return bytes(value)
    if ordering_type == "date":
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return _int_in((value - _EPOCH_DATE).days, _INT32_RANGE, "date")
        return _int_in(value, _INT32_RANGE, "date (days since epoch)")
    if ordering_type == "decimal":
        return _decimal_bytes(value)
    if ordering_type == "time-micros":
        if isinstance(value, datetime.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return _int_in(value, range(86_400_000_000), "time-micros (microseconds of the day)")
    if ordering_type == "timestamp-micros":
        if isinstance(value, datetime.datetime):
            aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
            return _int_in((aware - _EPOCH) // datetime.timedelta(microseconds=1), _INT64_RANGE, "timestamp-micros")
        return _int_in(value, _INT64_RANGE, "timestamp-micros (microseconds since epoch)")
    raise ValueError(f"unsupported ordering type {ordering_type!r}; expected one of {sorted(_WRAPPER_OF_TYPE)}")


def _decimal_bytes(value: Any) -> bytes:
    """``value`` as the unscaled decimal(30,15) two's complement big-endian bytes (minimal length, as Java)."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int)):
        raise ValueError(f"decimal ordering value must be a Decimal or int, got {value!r}")
    scaled = Decimal(value).scaleb(_DECIMAL_SCALE)
    if not scaled.is_finite() or scaled != scaled.to_integral_value():
        raise ValueError(f"decimal ordering value {value!r} has more than {_DECIMAL_SCALE} decimal places")
    unscaled = int(scaled)
    if abs(unscaled) >= 10**30:
        raise ValueError(f"decimal ordering value {value!r} exceeds decimal(30,{_DECIMAL_SCALE})")
    # Java's BigInteger.toByteArray: minimal two's complement, i.e. the bits without the sign bit, plus one sign bit
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def _unwrap_ordering(branch: Any) -> tuple[Any, bool]:
    """(python value, natural order) of a decoded ordering union branch (``None`` or ``(full name, record)``)."""
    if branch is None:
        return None, True
    name, record = branch
    short = name.rsplit(".", 1)[-1]
    value = record["value"]
    if short == "IntWrapper":
        return value, value == 0
    if short == "DateWrapper":
        return _EPOCH_DATE + datetime.timedelta(days=value), False
    if short == "DecimalWrapper":
        return Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-_DECIMAL_SCALE), False
    if short == "TimeMicrosWrapper":
        seconds, micros = divmod(value, 1_000_000)
        minutes, second = divmod(seconds, 60)
        return datetime.time(minutes // 60 % 24, minutes % 60, second, micros), False
    if short == "TimestampMicrosWrapper":
        return _EPOCH + datetime.timedelta(microseconds=value), False
    return value, False


def encode_delete(records: Iterable[DeleteRecord], ordering_type: str | None) -> bytes:
    """The content of a DELETE block (version 3) in Java 0.14/0.15's layout.

    Args:
        records: the deleted keys. A natural-order record (no ordering value) is written as ``IntWrapper(0)``.
        ordering_type: the Avro type of the table's ordering field, choosing the wrapper of real ordering values:
            ``"boolean"``, ``"int"``, ``"long"``, ``"float"``, ``"double"``, ``"string"``, ``"bytes"``, or the
            logical types ``"date"`` (``datetime.date`` or days), ``"timestamp-micros"`` (``datetime.datetime``,
            naive taken as UTC, or microseconds), ``"time-micros"`` (``datetime.time`` or microseconds) and
            ``"decimal"`` (``Decimal``, written as Java's decimal(30,15)). ``None`` if every record is natural order.

    Returns:
        The content bytes: int32 version 3, int32 length, the Avro ``HoodieDeleteRecordList`` datum.

    Raises:
        ValueError: an ordering value without ``ordering_type``, a value that does not fit ``ordering_type``, or a
            natural-order record that carries a non-zero ordering value.
    """
    items = []
    for rec in records:
        ordering: Any
        if rec.natural_order:
            if rec.ordering_value not in (None, 0):
                raise ValueError(f"delete of {rec.record_key!r}: a natural-order delete cannot carry ordering value "
                                 f"{rec.ordering_value!r}")
            ordering = (f"{_NS}.IntWrapper", {"value": 0})
        elif ordering_type is None:
            raise ValueError(f"delete of {rec.record_key!r} has ordering value {rec.ordering_value!r}: "
                             "ordering_type is required")
        else:
            wrapper = _WRAPPER_OF_TYPE.get(ordering_type)
            if wrapper is None:
                raise ValueError(f"unsupported ordering type {ordering_type!r}; expected one of "
                                 f"{sorted(_WRAPPER_OF_TYPE)}")
            try:
                value = _wrap_ordering(rec.ordering_value, ordering_type)
            except ValueError as exc:
                raise ValueError(f"delete of {rec.record_key!r}: {exc}") from None
            ordering = (f"{_NS}.{wrapper}", {"value": value})
        items.append({"recordKey": rec.record_key, "partitionPath": rec.partition_path, "orderingVal": ordering})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _DELETE_SCHEMA, {"deleteRecordList": items})
    datum = buf.getvalue()
    return _INT32.pack(CONTENT_VERSION) + _INT32.pack(len(datum)) + datum


def decode_delete(content: bytes) -> list[DeleteRecord]:
    """Decode the content of a DELETE block (version 3, Java 0.14/0.15 wrapper union).

    Returns:
        The deleted keys in stored order; see :class:`DeleteRecord` for ``natural_order`` and ordering values
        (``DateWrapper`` -> ``datetime.date``, ``DecimalWrapper`` -> ``Decimal``, ``TimeMicrosWrapper`` ->
        ``datetime.time``, ``TimestampMicrosWrapper`` -> UTC ``datetime.datetime``). A null partition path is
        returned as ``""``.

    Raises:
        LogFormatError: another version (1 and 2 are pre-0.14 Java/Kryo serializations), a length mismatch, a null
            record key or undecodable bytes.
    """
    if len(content) < 8:
        raise LogFormatError(f"delete block content of {len(content)} bytes is too short")
    version, length = _INT32.unpack_from(content, 0)[0], _INT32.unpack_from(content, 4)[0]
    if version != CONTENT_VERSION:
        raise LogFormatError(f"unsupported delete block content version {version} (expected {CONTENT_VERSION}; "
                             "versions 1 and 2 are pre-0.14 Kryo/Java serializations)")
    if length != len(content) - 8:
        raise LogFormatError(f"delete block content length field {length} does not match the {len(content) - 8} "
                             "bytes that follow it")
    buf = io.BytesIO(content)
    buf.seek(8)
    try:
        datum = fastavro.schemaless_reader(buf, _DELETE_SCHEMA, None, return_record_name=True)
    except _AVRO_DECODE_ERRORS as exc:
        raise LogFormatError(f"delete block content cannot be decoded: {exc!r}") from exc
    if buf.tell() != len(content):
        raise LogFormatError(f"delete block: {len(content) - buf.tell()} unexpected bytes after the record list")
    assert isinstance(datum, dict)  # the schema is a record
    out = []
    for i, item in enumerate(datum["deleteRecordList"]):
        if item["recordKey"] is None:
            raise LogFormatError(f"delete block: record {i} has a null record key")
        value, natural = _unwrap_ordering(item["orderingVal"])
        out.append(DeleteRecord(item["recordKey"], item["partitionPath"] or "", value, natural))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# COMMAND
# ---------------------------------------------------------------------------------------------------------------------


def encode_rollback_command(instant: str, target_instant: str) -> bytes:
    """A complete rollback COMMAND block: blocks written by ``target_instant`` in this file slice are void.

    Header order as Java writes it: INSTANT_TIME, TARGET_INSTANT_TIME, COMMAND_BLOCK_TYPE ``"0"``; empty content.
    With 17-digit instants the block is 105 bytes.

    Args:
        instant: the rollback instant.
        target_instant: the instant whose blocks are rolled back.

    Returns:
        The block bytes.
    """
    header = [
        (HeaderKey.INSTANT_TIME, instant),
        (HeaderKey.TARGET_INSTANT_TIME, target_instant),
        (HeaderKey.COMMAND_BLOCK_TYPE, ROLLBACK_COMMAND),
    ]
    return encode_block(BlockType.COMMAND, header, b"")


# ---------------------------------------------------------------------------------------------------------------------
# log file names
# ---------------------------------------------------------------------------------------------------------------------

# Java's log name pattern, anchored at the end so that e.g. Hadoop ``.crc`` side files do not match
_LOG_RE = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(\.cdc)?)?$")


@dataclass(frozen=True, order=True)
class LogFileName:
    """A parsed log file name ``.<fileId>_<baseInstant>.log.<version>_<writeToken>``.

    ``base_instant`` is the instant of the file slice's base file, not of the write. Sort with :attr:`sort_key` to get
    Hudi's order within a slice.
    """

    file_id: str
    base_instant: str
    version: int
    write_token: str

    @property
    def name(self) -> str:
        """The file name (no write token part if ``write_token`` is empty, as in very old Hudi files)."""
        token = f"_{self.write_token}" if self.write_token else ""
        return f".{self.file_id}_{self.base_instant}.log.{self.version}{token}"

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's order of the log files of one file group: (base instant, version, write token)."""
        return (self.base_instant, self.version, self.write_token)

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        """Parse a log file name (no directory part).

        Returns:
            The parsed name, or ``None`` if ``name`` is not a data log file (archive and CDC log files give
            ``None`` as well).
        """
        m = _LOG_RE.match(name)
        if m is None or m.group(3) != "log" or m.group(10) is not None:
            return None
        return cls(m.group(1), m.group(2), int(m.group(4)), m.group(6) or "")
