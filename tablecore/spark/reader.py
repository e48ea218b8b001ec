"""Reads as Spark DataFrames: snapshot, time travel and incremental ``(start, end]`` (DESIGN §2.3).

File planning happens on the driver from the timeline and one listing; Spark's Parquet reader reads the chosen
base files with the table schema (meta columns first), so files written before a schema evolution read with nulls
for new columns and promoted types.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tablecore.exceptions import InstantNotFoundError, TableCoreError
from tablecore.format.file_view import BaseFile, latest_base_files, list_base_files
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO
from tablecore.spark.schema import arrow_to_spark, table_arrow_schema

logger = logging.getLogger(__name__)

EARLIEST = "00000000000000000"


@dataclass(frozen=True)
class ReadPlan:
    """The base files a read scans, the table schema, and an optional commit-time range filter."""

    files: tuple[BaseFile, ...]
    schema: pa.Schema  # with meta columns
    start: str | None = None  # exclusive
    end: str | None = None  # inclusive

    @property
    def spark_schema(self) -> StructType:
        """The Spark schema of the read."""
        return arrow_to_spark(self.schema)


def table_schema(timeline: Timeline, create_schema: str | None) -> pa.Schema:
    """The Arrow schema (meta columns first) every read uses: like Hudi (Java and hudi-rs), the latest table
    schema, also for time travel; older files read with nulls for columns added later and with promoted types."""
    avro = timeline.latest_schema() or create_schema
    if avro is None:
        return pa.schema(table_arrow_schema({"type": "record", "name": "empty", "fields": []}))
    return table_arrow_schema(avro)


def _check_instant(timeline: Timeline, instant: str, what: str) -> None:
    if not timeline.is_completed_write(instant):
        raise InstantNotFoundError(f"{what} {instant!r} is not a completed commit of this table")


def plan_snapshot(io: FileIO, timeline: Timeline, *, as_of: str | None = None,
                  create_schema: str | None = None) -> ReadPlan:
    """Files of the snapshot as of ``as_of`` (default: latest)."""
    if as_of is not None:
        _check_instant(timeline, as_of, "as_of instant")
    files = latest_base_files(list_base_files(io), timeline, as_of=as_of)
    return ReadPlan(tuple(files), table_schema(timeline, create_schema))


def plan_incremental(io: FileIO, timeline: Timeline, *, start: str | None, end: str | None,
                     create_schema: str | None = None) -> ReadPlan:
    """Files and range of an incremental read of ``(start, end]``: only the file groups commits in range wrote."""
    writes = timeline.completed_writes()
    if end is None:
        end = writes[-1].time if writes else EARLIEST
    else:
        _check_instant(timeline, end, "end instant")
    start = start or EARLIEST
    if start > end:
        raise TableCoreError(f"incremental range is empty or inverted: start {start} > end {end}")
    in_range = [i for i in writes if start < i.time <= end]
    groups: set[tuple[str, str]] = set()
    for i in in_range:
        groups.update((s.partition_path, s.file_id) for s in timeline.metadata(i).write_stats if s.file_id)
    if not groups:
        return ReadPlan((), table_schema(timeline, create_schema), start, end)
    listed = list_base_files(io, {p for p, _ in groups})
    candidates = [f for f in listed if (f.partition, f.file_id) in groups]
    files = latest_base_files(candidates, timeline, as_of=end)
    return ReadPlan(tuple(files), table_schema(timeline, create_schema), start, end)


LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
DRIVER_LISTING_MAX = 5000  # up to this many known files, status them on the driver instead of a listing job


@contextmanager
def _no_listing_job(spark: SparkSession, paths: int) -> Iterator[None]:
    """Read known file paths without the Spark job Spark starts to 'list' more than 32 paths (about a second per
    read); the planned files are exact, so the driver only needs their status."""
    if paths > DRIVER_LISTING_MAX:
        yield
        return
    old = spark.conf.get(LISTING_THRESHOLD, None)
    spark.conf.set(LISTING_THRESHOLD, str(DRIVER_LISTING_MAX))
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(LISTING_THRESHOLD)
        else:
            spark.conf.set(LISTING_THRESHOLD, old)


def read_parquet_files(spark: SparkSession, schema: StructType | str, paths: list[str]) -> DataFrame:
    """Spark's Parquet reader over exact file paths, with an explicit schema."""
    with _no_listing_job(spark, len(paths)):
        return spark.read.schema(schema).parquet(*paths)


def read_plan(spark: SparkSession, io: FileIO, plan: ReadPlan) -> DataFrame:
    """Execute a read plan with Spark's Parquet reader."""
    schema = plan.spark_schema
    if not plan.files:
        return spark.createDataFrame([], schema)
    df = read_parquet_files(spark, schema, [io.spark_path(f.path) for f in plan.files])
    if plan.start is not None:
        df = df.where(F.col("_hoodie_commit_time") > F.lit(plan.start))
    if plan.end is not None:
        df = df.where(F.col("_hoodie_commit_time") <= F.lit(plan.end))
    return df
