"""The records of Apache Hudi's record-level index: the ``record_index`` partition of the metadata table.

The partition has ``N`` file groups, ``record-index-0000-0`` .. ``record-index-{N-1:04d}-0``. A record key lives in
the group ``abs(abs(hashCode(key)) % N)``, ``hashCode`` being Java's ``String.hashCode`` (Hudi's
``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``; checked against every key of the Hudi 1.0 fixture).

Each record is an HFile key/value: the key is the record key, the value the Avro datum of ``HoodieMetadataRecord``
with ``key`` empty, ``type`` 5 and ``recordIndexMetadata`` a ``HoodieRecordIndexInfo``: the partition, the file id
(``fileIdEncoding`` 0: a ``<uuid>-<index>`` id as the UUID's two 64-bit halves plus the index, ``fileId`` the empty
string; 1: the raw id in ``fileId``) and the instant that wrote the record as epoch milliseconds (UTC). A deleted key
is a record of a DELETE log block (Hudi's ``EmptyHoodieRecordPayload``). The newest record of a key wins.

lakegate writes the values with a writer schema holding ``key``, ``type``, ``filesystemMetadata`` and
``recordIndexMetadata`` (readers resolve it against the full ``HoodieMetadataRecord``, whose other fields default
to null) and reads values with whatever writer schema their HFile or log block carries.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import io
import json
import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from tablecore.format.hfile import HFileError, write_hfile, write_hfile_columns
from tablecore.format.hfile_reader import RangedInput, open_hfile
from tablecore.format.metadata_records import parsed_writer_schema

__all__ = [
    "RECORD_INDEX_PARTITION", "RECORD_INDEX_SCHEMA_JSON", "Location", "decode_location", "encode_location",
    "encode_record_index", "encode_record_index_columns", "file_group_id", "file_group_index", "file_group_indexes",
    "location_codes", "location_values", "lookup_hfile", "parse_file_group_id",
]

RECORD_INDEX_PARTITION = "record_index"
GZIP_LEVEL = 1
"""gzip level of the record index's HFiles written from columns: writing a group of millions of keys is bound by
compression; level 1 took 6.5 s for 4 M keys against 10.5 s at the default level, for files 1 % larger."""
BLOCK_SIZE = 4096
"""Data block size of the record index's HFiles: a point lookup decompresses the blocks its keys fall in (Hudi's
1 MiB blocks make a lookup of a few thousand keys decompress every block of a large file)."""
RECORD_INDEX = 5
_UUID_ENCODING, _RAW_ENCODING = 0, 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_INFO: dict[str, Any] = {"type": "record", "name": "HoodieRecordIndexInfo", "fields": [
    {"name": "partitionName", "type": ["null", {"type": "string", "avro.java.string": "String"}], "default": None},
    {"name": "fileIdHighBits", "type": ["null", "long"], "default": None},
    {"name": "fileIdLowBits", "type": ["null", "long"], "default": None},
    {"name": "fileIndex", "type": ["null", "int"], "default": None},
    {"name": "fileId", "type": ["null", {"type": "string", "avro.java.string": "String"}], "default": None},
    {"name": "instantTime", "type": ["null", "long"], "default": None},
    {"name": "fileIdEncoding", "type": "int", "default": 0},
    {"name": "position", "type": ["null", "long"], "default": None}]}
_FILE_INFO = {"type": "record", "name": "HoodieMetadataFileInfo", "fields": [
    {"name": "size", "type": "long"}, {"name": "isDeleted", "type": "boolean"}]}
_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieMetadataRecord", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "key", "type": {"type": "string", "avro.java.string": "String"}},
        {"name": "type", "type": "int"},
        {"name": "filesystemMetadata", "default": None,
         "type": ["null", {"type": "map", "values": _FILE_INFO, "avro.java.string": "String"}]},
        {"name": "recordIndexMetadata", "type": ["null", _INFO], "default": None},
    ]}
RECORD_INDEX_SCHEMA_JSON = json.dumps(_SCHEMA, separators=(",", ":"))
"""The writer schema of the record index values lakegate writes."""


@dataclass(frozen=True)
class Location:
    """Where a record key lives: its partition path and file group, written by ``instant``."""

    partition: str
    file_id: str
    instant: str


def file_group_id(index: int) -> str:
    """The id of the record index's file group ``index``."""
    return f"record-index-{index:04d}-0"


def parse_file_group_id(file_id: str) -> int | None:
    """The index of a record index file group id, or None for another id."""
    if len(file_id) == 19 and file_id.startswith("record-index-") and file_id.endswith("-0") and \
            file_id[13:17].isdigit():
        return int(file_id[13:17])
    return None


def _java_hash(key: str) -> int:
    h = 0
    for unit in struct.unpack(f"<{len(key.encode('utf-16-le')) // 2}H", key.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _group_of_hash(h: int, groups: int) -> int:
    """Java's ``Math.abs(Math.abs(h) % groups)`` (``Math.abs(Integer.MIN_VALUE)`` is negative)."""
    return (1 << 31) % groups if h == -(1 << 31) else abs(h) % groups


def file_group_index(key: str, groups: int) -> int:
    """The record index file group of ``key`` among ``groups`` (Hudi's mapping)."""
    return _group_of_hash(_java_hash(key), groups)


def file_group_indexes(keys: pa.Array | pa.ChunkedArray, groups: int) -> np.ndarray:
    """:func:`file_group_index` of every key of a string array, vectorised for ASCII keys."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else \
        np.zeros(0, dtype=np.uint8)
    chunk = data[offsets[0]:offsets[-1]]
    if arr.null_count or (chunk.size and chunk.max() >= 0x80):  # nulls never reach here; non-ASCII: per key
        return np.array([file_group_index(k, groups) for k in arr.to_pylist()], dtype=np.int64)
    lengths = np.diff(offsets)
    # position of each byte from its key's end: 31 ** (len - 1 - i) mod 2**32
    owner = np.repeat(np.arange(n), lengths)
    starts = offsets[:-1] - offsets[0]
    within = np.arange(chunk.size) - np.repeat(starts, lengths)
    exponent = np.repeat(lengths, lengths) - 1 - within
    top = int(lengths.max())
    powers = np.ones(top, dtype=np.uint64)
    for i in range(1, top):
        powers[i] = (powers[i - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
    terms = (chunk.astype(np.uint64) * powers[exponent]) & np.uint64(0xFFFFFFFF)
    sums = np.zeros(n, dtype=np.uint64)
    np.add.at(sums, owner, terms)
    h = (sums & np.uint64(0xFFFFFFFF)).astype(np.int64)
    h = np.where(h >= 1 << 31, h - (1 << 32), h)
    out = np.abs(h) % groups
    return np.where(h == -(1 << 31), (1 << 31) % groups, out).astype(np.int64)


def _instant_millis(instant: str) -> int:
    base = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
    millis = int(instant[14:17]) if len(instant) >= 17 else 0
    return (base - _EPOCH) // dt.timedelta(milliseconds=1) + millis


def _millis_instant(millis: int) -> str:
    when = _EPOCH + dt.timedelta(milliseconds=millis)
    return when.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        low, z = z & 0x7F, z >> 7
        out.append(low | 0x80 if z else low)
        if not z:
            return bytes(out)


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _zigzag(len(raw)) + raw


def _uuid_parts(file_id: str) -> tuple[int, int, int] | None:
    """(high bits, low bits, file index) of a ``<uuid>-<index>`` file id that Hudi's encoding reproduces exactly."""
    head, _, index = file_id.rpartition("-")
    if len(head) != 36 or not index.isdigit():
        return None
    try:
        parsed = uuid.UUID(head)
    except ValueError:
        return None
    if str(parsed) != head or str(int(index)) != index or int(index) >= 1 << 31:
        return None
    bits = parsed.int
    high, low = bits >> 64, bits & ((1 << 64) - 1)
    return (high - (1 << 64) if high >= 1 << 63 else high), (low - (1 << 64) if low >= 1 << 63 else low), int(index)


def encode_location(location: Location) -> bytes:
    """The Avro value (writer schema :data:`RECORD_INDEX_SCHEMA_JSON`) of a record index entry."""
    parts = _uuid_parts(location.file_id)
    head = b"\x00" + _zigzag(RECORD_INDEX) + b"\x00\x02" + b"\x02" + _string(location.partition)
    if parts is not None:
        high, low, index = parts
        body = b"\x02" + _zigzag(high) + b"\x02" + _zigzag(low) + b"\x02" + _zigzag(index) + b"\x02\x00"
        encoding = _UUID_ENCODING
    else:
        body = b"\x02" + _zigzag(-1) + b"\x02" + _zigzag(-1) + b"\x02" + _zigzag(-1) + b"\x02" + \
            _string(location.file_id)
        encoding = _RAW_ENCODING
    return head + body + b"\x02" + _zigzag(_instant_millis(location.instant)) + _zigzag(encoding) + b"\x00"


def _varint_at(value: bytes, pos: int) -> tuple[int, int]:
    z = shift = 0
    while True:
        byte = value[pos]
        z |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return (z >> 1) ^ -(z & 1), pos


def _string_at(value: bytes, pos: int) -> tuple[str, int]:
    size, pos = _varint_at(value, pos)
    return value[pos:pos + size].decode("utf-8"), pos + size


@functools.lru_cache(maxsize=1 << 16)
def _decode_ours(value: bytes) -> Location:
    """A value written with :data:`RECORD_INDEX_SCHEMA_JSON`, decoded without a schema interpreter (lookups decode
    thousands; most share a location, hence the cache)."""
    if value[:4] != b"\x00\x0a\x00\x02":  # key "", type 5, no files map, a record index entry
        raise ValueError("not a record index entry")
    pos = 4
    partition = ""
    if value[pos] == 2:
        partition, pos = _string_at(value, pos + 1)
    else:
        pos += 1
    longs: list[int | None] = []
    for _ in range(3):  # high bits, low bits, file index
        if value[pos] == 2:
            n, pos = _varint_at(value, pos + 1)
            longs.append(n)
        else:
            longs.append(None)
            pos += 1
    raw = ""
    if value[pos] == 2:
        raw, pos = _string_at(value, pos + 1)
    else:
        pos += 1
    millis = None
    if value[pos] == 2:
        millis, pos = _varint_at(value, pos + 1)
    else:
        pos += 1
    encoding, pos = _varint_at(value, pos)
    if encoding == _RAW_ENCODING:
        file_id = raw
    else:
        high, low, index = longs
        if high is None or low is None:
            raise ValueError("a UUID file id without its bits")
        bits = ((high & ((1 << 64) - 1)) << 64) | (low & ((1 << 64) - 1))
        file_id = str(uuid.UUID(int=bits)) + ("" if index is None or index < 0 else f"-{index}")
    return Location(partition, file_id, "" if millis is None else _millis_instant(millis))


def decode_location(value: bytes, schema: str) -> Location:
    """The location a record index value holds, decoded with its writer ``schema``.

    Raises:
        HFileError: the value is not a record index entry of that schema.
    """
    if schema == RECORD_INDEX_SCHEMA_JSON:
        try:
            return _decode_ours(value)
        except (ValueError, IndexError) as e:
            raise HFileError(f"a record index value does not decode with its writer schema: {e}") from e
    try:
        datum = fastavro.schemaless_reader(io.BytesIO(value), parsed_writer_schema(schema), None)
    except (EOFError, ValueError, IndexError, KeyError, TypeError) as e:
        raise HFileError(f"a record index value does not decode with its writer schema: {e}") from e
    info = datum.get("recordIndexMetadata") if isinstance(datum, dict) else None
    if not isinstance(datum, dict) or datum.get("type") != RECORD_INDEX or not isinstance(info, dict):
        raise HFileError("a value of the record index is not a record index entry")
    if info.get("fileIdEncoding", 0) == _RAW_ENCODING:
        file_id = info.get("fileId") or ""
    else:
        bits = ((info["fileIdHighBits"] & ((1 << 64) - 1)) << 64) | (info["fileIdLowBits"] & ((1 << 64) - 1))
        index = info.get("fileIndex")
        file_id = str(uuid.UUID(int=bits)) + ("" if index is None or index < 0 else f"-{index}")
    millis = info.get("instantTime")
    return Location(info.get("partitionName") or "", file_id, "" if millis is None else _millis_instant(millis))


def encode_record_index(entries: Iterable[tuple[str, bytes]], *, block_size: int = BLOCK_SIZE) -> bytes:
    """An HFile of record index entries (record key, encoded value): a base file, or an HFILE_DATA block's content."""
    return write_hfile(entries, {"schema": RECORD_INDEX_SCHEMA_JSON.encode()}, block_size=block_size)


def _codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    encoded = (column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column).dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary.to_pylist()


def location_codes(partitions: pa.Array | pa.ChunkedArray, file_ids: pa.Array | pa.ChunkedArray,
                   instants: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """The rows' locations as codes into their distinct encoded values (:func:`encode_location` of each distinct
    location once; a table's rows share a few thousand): ``distinct.take(codes)`` are the rows' values."""
    p_codes, p_names = _codes(partitions)
    f_codes, f_names = _codes(file_ids)
    t_codes, t_names = _codes(instants)
    combined = (f_codes * max(1, len(p_names)) + p_codes) * max(1, len(t_names)) + t_codes
    unique, codes = np.unique(combined, return_inverse=True)
    distinct = []
    for c in unique.tolist():
        rest, t = divmod(c, max(1, len(t_names)))
        f, p = divmod(rest, max(1, len(p_names)))
        distinct.append(encode_location(Location(p_names[p], f_names[f], t_names[t])))
    return codes.astype(np.int64), pa.array(distinct, pa.binary())


def location_values(partitions: pa.Array | pa.ChunkedArray, file_ids: pa.Array | pa.ChunkedArray,
                    instants: pa.Array | pa.ChunkedArray) -> pa.Array:
    """:func:`encode_location` of every row of three string columns, each distinct location encoded once."""
    codes, distinct = location_codes(partitions, file_ids, instants)
    return distinct.take(pa.array(codes))


def encode_record_index_columns(keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray, *,
                                block_size: int = BLOCK_SIZE) -> bytes:
    """:func:`encode_record_index` of columns (record keys, encoded values), for millions of entries."""
    return write_hfile_columns(keys, values, {"schema": RECORD_INDEX_SCHEMA_JSON.encode()}, block_size=block_size,
                               level=GZIP_LEVEL)


def lookup_hfile(data: bytes | RangedInput, keys: Sequence[str]) -> dict[str, Location]:
    """The locations of those of ``keys`` an HFile of the record index holds (the file whole, or an input file of
    which only the blocks the keys fall in are read: :mod:`tablecore.format.hfile_reader`), decompressing only those
    blocks.

    Raises:
        HFileError: the file does not decode, or a value is not a record index entry.
    """
    hfile = open_hfile(data)
    schema = hfile.schema
    if schema is None:
        raise HFileError("a record index HFile without a writer schema")
    out: dict[str, Location] = {}
    firsts = hfile.first_rows
    by_block: dict[int, list[bytes]] = {}
    for key in keys:
        row = key.encode("utf-8")
        block = bisect.bisect_right(firsts, row) - 1
        if block >= 0:
            by_block.setdefault(block, []).append(row)
    hfile.prefetch(by_block)
    for block, rows in by_block.items():
        for row, value in hfile.get(block, rows).items():
            out[row.decode("utf-8")] = decode_location(value, schema)
    return out
