"""What every pipeline source hands out: a :class:`Batch` (lazy rows and the position they end at), and the small
helpers sources share for Avro schemas."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from governance.errors import SourceError
from tablecore.format.avro_schema import avro_to_arrow, meta_arrow_fields

__all__ = ["Batch", "PartitionLag", "arrow_schema", "parse_json", "schema_dict", "without_meta"]


@dataclass(frozen=True)
class PartitionLag:
    """Where a batch ended in one topic-partition, and how far behind the head that was.

    Attributes:
        topic / partition: the topic-partition.
        start / end: the batch's offsets ``[start, end)``.
        offset_lag: messages between the batch's end and the partition's high watermark when the batch was read.
        newest_event_ms: the newest event time among the batch's messages (epoch ms; None when it had none).
    """

    topic: str
    partition: int
    start: int
    end: int
    offset_lag: int
    newest_event_ms: int | None


@dataclass(frozen=True)
class Batch:
    """One batch of a source.

    Attributes:
        df: the rows, lazy (never collected to the driver).
        position: JSON-able; passing it back as ``after`` yields the batch that follows.
        description: human text, e.g. ``files batch-0003.json..batch-0004.json (2 files)``.
        end_instant: table sources: the source table's instant the batch ends at (its instant time; the position
            holds its completion time from table version 8).
        lag: Kafka sources: per topic-partition, where the batch ended and its lag.
        commits: table sources: the number of source commits the batch covers.
        after: the position the batch starts after (None for a first batch, and for a backfill's batches).
    """

    df: DataFrame
    position: Any
    description: str
    end_instant: str | None = None
    lag: tuple[PartitionLag, ...] | None = None
    commits: int | None = None
    after: Any = None


def schema_dict(text: str, what: str) -> dict[str, Any]:
    """An Avro record schema parsed from its JSON text.

    Raises:
        SourceError: not JSON, or not a record (``what`` names the schema in the message).
    """
    try:
        node = json.loads(text)
    except ValueError as e:
        raise SourceError(f"{what}: the Avro schema is not JSON: {e}") from e
    if not isinstance(node, dict) or node.get("type") != "record":
        raise SourceError(f"{what}: the Avro schema must be a record")
    return node


def arrow_schema(avro: dict[str, Any], what: str) -> pa.Schema:
    """The Arrow schema of an Avro record schema.

    Raises:
        SourceError: a type that cannot be read into columns.
    """
    try:
        return avro_to_arrow(avro)
    except ValueError as e:
        raise SourceError(f"{what}: the Avro schema {avro.get('name')!r} cannot be read into columns: {e}") from e


def parse_json(df: DataFrame, column: str, schema: StructType | None, keep: tuple[str, ...] = ()) -> DataFrame | None:
    """The JSON texts of ``column`` parsed by Spark's own ``from_json`` (as ``spark.read.json`` parses them) into
    columns, beside the ``keep`` columns; without ``schema``, the schema is inferred from the first non-null text
    (one row reaches the driver for it). None when there is no text to infer from."""
    if schema is None:
        first = df.where(F.col(column).isNotNull()).select(column).limit(1).collect()
        if not first:
            return None
        ddl = df.sparkSession.range(1).select(F.schema_of_json(F.lit(first[0][0]))).collect()[0][0]
        parsed = F.from_json(column, ddl)
    else:
        parsed = F.from_json(column, schema)
    return df.select(parsed.alias("_lg_json"), *keep).select("_lg_json.*", *keep)


META_COLUMNS = frozenset(f.name for f in meta_arrow_fields())
"""The Hudi meta columns (``_hoodie_commit_time``...) a table read carries before its data columns."""


def without_meta(df: DataFrame, *, prefixes: tuple[str, ...] = ("",)) -> DataFrame:
    """``df`` without the Hudi meta columns; ``prefixes`` (``("before_", "after_")``) also drops the prefixed meta
    columns of flattened change rows."""
    drop = {f"{p}{m}" for p in prefixes for m in META_COLUMNS}
    return df.select(*[F.col(f"`{c}`") for c in df.columns if c not in drop])
