"""Record keys and partition paths as Spark column expressions (format reference §5.2)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tablecore.config import TableConfig

NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Hive's escapePathName: control characters, '"', '#', '%', "'", '*', '/', ':', '=', '?', '\\', 0x7F, '{', '[', ']', '^'
_ESCAPED = ["%"] + [chr(c) for c in range(1, 32)] + ['"', "#", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[",
                                                      "]", "^"]


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


def hive_escape(col: Column) -> Column:
    """Hive's path escaping: each special character becomes ``%XX`` (upper-case hex)."""
    for ch in _ESCAPED:
        col = F.replace(col, F.lit(ch), F.lit(f"%{ord(ch):02X}"))
    return col


def partition_path_column(config: TableConfig) -> Column:
    """``_hoodie_partition_path``: ``""`` for non-partitioned tables, else the joined partition segments."""
    if not config.partition_fields:
        return F.lit("")
    segments = []
    for f in config.partition_fields:
        v = _as_string(f)
        if config.url_encode_partitions:
            v = hive_escape(v)
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
