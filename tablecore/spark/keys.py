"""Record keys and partition paths as Spark column expressions (format reference §5.2)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

from tablecore.config import TableConfig
from tablecore.format.record_keys import DEFAULT_PARTITION, EMPTY_KEY, ESCAPED, NULL_KEY


def _as_string(name: str) -> Column:
    return F.col(f"`{name}`").cast("string")


def record_key_column(config: TableConfig) -> Column:
    """``_hoodie_record_key``: the value of a single key field, or ``f1:v1,f2:v2`` for complex keys."""
    if not config.complex_keys:
        return _as_string(config.record_key[0])
    parts = []
    for f in config.record_key:
        v = _as_string(f)
        v = F.when(v.isNull(), F.lit(NULL_KEY)).when(v == "", F.lit(EMPTY_KEY)).otherwise(v)
        parts.append(F.concat(F.lit(f + ":"), v))
    return F.concat_ws(",", *parts)


def invalid_key_condition(config: TableConfig) -> Column:
    """True for rows whose record key is null or empty (for complex keys: every key field null or empty)."""
    conds = [(_as_string(f).isNull()) | (_as_string(f) == "") for f in config.record_key]
    if not config.complex_keys:
        return conds[0]
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def hive_escape(name: str) -> Column:
    """Hive's path escaping of column ``name`` cast to a string: each special character becomes ``%XX`` (upper-case
    hex). Built as one SQL expression: the 48 nested ``replace`` calls are parsed by the server, where a Spark Connect
    client would otherwise send a protobuf expression nested deeper than its decoder accepts."""
    sql = f"CAST(`{name.replace('`', '``')}` AS STRING)"
    for ch in ESCAPED:
        sql = f"replace({sql}, chr({ord(ch)}), '%{ord(ch):02X}')"
    return F.expr(sql)


def partition_path_column(config: TableConfig) -> Column:
    """``_hoodie_partition_path``: ``""`` for non-partitioned tables, else the joined partition segments."""
    if not config.partition_fields:
        return F.lit("")
    segments = []
    for f in config.partition_fields:
        v = hive_escape(f) if config.url_encode_partitions else _as_string(f)
        v = F.when(v.isNull() | (v == ""), F.lit(DEFAULT_PARTITION)).otherwise(v)
        if config.hive_style_partitioning:
            v = F.concat(F.lit(f + "="), v)
        segments.append(v)
    return F.concat_ws("/", *segments)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def bucket_id(record_key: str, complex_keys: bool, num_buckets: int) -> int:
    """The bucket of a record key, as Hudi's ``BucketIdentifier`` computes it: Java ``List<String>.hashCode()`` of
    the key values, masked to a non-negative int, modulo the bucket count."""
    if complex_keys:
        values = [kv.split(":", 1)[1] if ":" in kv else kv for kv in record_key.split(",")]
    else:
        values = [record_key]
    h = 1
    for v in values:
        h = (31 * h + java_string_hash(v)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % num_buckets


_MASK32 = np.uint64(0xFFFFFFFF)


def _ascii_hashes(keys: pa.Array) -> np.ndarray:
    """Java ``String.hashCode`` of ASCII strings (no nulls) as uint32, vectorized: each string right-aligned in a
    zero-padded byte matrix times the powers of 31 (leading zeros add nothing to the polynomial)."""
    n = len(keys)
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32, count=n + 1, offset=keys.offset * 4)
    lens = np.diff(offsets)
    width = int(lens.max(initial=0))
    if n == 0 or width == 0:
        return np.zeros(n, dtype=np.uint32)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    rows = np.repeat(np.arange(n), lens)
    starts = np.repeat(offsets[:-1] - offsets[0], lens)
    cols = np.repeat(width - lens, lens) + (np.arange(len(data)) - starts)
    matrix = np.zeros((n, width), dtype=np.uint64)
    matrix[rows, cols] = data
    powers = np.ones(width, dtype=np.uint64)
    for j in range(width - 2, -1, -1):
        powers[j] = (powers[j + 1] * np.uint64(31)) & _MASK32
    # every product is < 2^39 and the sum of up to 2^24 of them fits in 64 bits; wrap to 32 bits at the end
    hashes: np.ndarray = ((matrix * powers).sum(axis=1, dtype=np.uint64) & _MASK32).astype(np.uint32)
    return hashes


def bucket_ids(keys: pa.Array, complex_keys: bool, num_buckets: int) -> np.ndarray:
    """:func:`bucket_id` of every key of a string array (no nulls), vectorized for single-field ASCII keys."""
    n = len(keys)
    if num_buckets == 1:
        return np.zeros(n, dtype=np.int64)
    keys = keys.cast(pa.string())
    if complex_keys or n == 0 or not pc.all(pc.string_is_ascii(keys)).as_py():
        return np.array([bucket_id(k, complex_keys, num_buckets) for k in keys.to_pylist()], dtype=np.int64)
    if len(keys) > 1 << 24:  # keep the matrix sum exact (see _ascii_hashes)
        half = len(keys) // 2
        return np.concatenate([bucket_ids(keys.slice(0, half), False, num_buckets),
                               bucket_ids(keys.slice(half), False, num_buckets)])
    # List.hashCode of the one value: 31 * 1 + hash, masked to a non-negative int
    h = (_ascii_hashes(keys).astype(np.uint64) + np.uint64(31)) & np.uint64(0x7FFFFFFF)
    return (h % np.uint64(num_buckets)).astype(np.int64)
