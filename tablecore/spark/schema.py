"""Spark <-> Arrow <-> Avro schema glue for the Spark engine."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from tablecore.format.table_schema import table_arrow_schema


def spark_to_arrow(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark uses for a DataFrame (timestamps in UTC)."""
    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)


def arrow_to_spark(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema."""
    # zone-less Arrow timestamps (Avro local-timestamp-*) are Spark's timestamp_ntz; UTC ones are timestamp
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def table_spark_schema(avro: str | dict[str, Any], *, with_meta: bool = True) -> StructType:
    """The Spark schema of a table (meta columns first) from its Avro schema."""
    return arrow_to_spark(table_arrow_schema(avro, with_meta=with_meta))
