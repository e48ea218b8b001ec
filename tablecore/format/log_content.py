"""The contents of Hudi v6 log blocks (reference §4, §6): AVRO_DATA (records as schemaless Avro datums),
PARQUET_DATA (a whole Parquet file; read only) and DELETE (an Avro ``HoodieDeleteRecordList`` whose ordering values use
Java's wrapper-record union). The framing of blocks is in :mod:`tablecore.format.log_format`.

Everything here is pure (no Spark, no I/O): bytes in, bytes out.
"""

from __future__ import annotations

import datetime
import functools
import io
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from tablecore.format.log_format import AVRO_DECODE_ERRORS, CONTENT_VERSION, INT32, LogFormatError

__all__ = [
    "DELETE_RECORD_LIST_SCHEMA",
    "DeleteRecord",
    "decode_avro_data",
    "decode_delete",
    "decode_parquet_data",
    "encode_avro_data",
    "encode_delete",
]

logger = logging.getLogger(__name__)


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
    out: list[bytes | memoryview] = [INT32.pack(CONTENT_VERSION), INT32.pack(len(ends))]
    begin = 0
    for end in ends:
        out += [INT32.pack(end - begin), raw[begin:end]]
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
    version, count = INT32.unpack_from(content, 0)[0], INT32.unpack_from(content, 4)[0]
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
        length = INT32.unpack_from(content, pos)[0]
        start, end = pos + 4, pos + 4 + length
        if length < 0 or end > len(content):
            raise LogFormatError(f"Avro data block: record {i} length {length} at content offset {pos} overruns the "
                                 f"content ({len(content)} bytes)")
        buf.seek(start)
        try:
            record = fastavro.schemaless_reader(buf, parsed, parsed_reader)
        except AVRO_DECODE_ERRORS as exc:
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
    return INT32.pack(CONTENT_VERSION) + INT32.pack(len(datum)) + datum


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
    version, length = INT32.unpack_from(content, 0)[0], INT32.unpack_from(content, 4)[0]
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
    except AVRO_DECODE_ERRORS as exc:
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
