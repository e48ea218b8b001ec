"""Reads as Spark DataFrames: snapshot, read-optimized, time travel and incremental ``(start, end]`` (DESIGN §2.3).

File planning happens on the driver from the timeline and one listing; Spark's Parquet reader reads the chosen
base files with the table schema (meta columns first), so files written before a schema evolution read with nulls
for new columns and promoted types.

Merge-on-read slices with log files: executors decode the logs of each slice and reduce them to one winning record
per key (:mod:`tablecore.spark.mor`); the base rows of those keys are removed with an anti-join (broadcast while the
logs are small) and the winners that are not deletes are added. Base files are still read by Spark's vectorized,
column-pruning Parquet reader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tablecore.config import TableConfig
from tablecore.exceptions import CleanedRangeError, InstantNotFoundError, TableCoreError
from tablecore.format.archived_timeline import ARCHIVED_DIR, last_archived_instant
from tablecore.format.file_view import (
    BaseFile,
    FileSlice,
    TableFiles,
    latest_base_files,
    latest_file_slices,
    list_table_files,
)
from tablecore.format.timeline import InstantsOrEarlier, Timeline
from tablecore.io import FileIO
from tablecore.spark import mor
from tablecore.spark.schema import arrow_to_spark, table_arrow_schema

logger = logging.getLogger(__name__)

EARLIEST = "00000000000000000"
VIEWS = ("snapshot", "read_optimized")
BROADCAST_LOG_BYTES = 256 * 1024 * 1024  # log files up to this size in all: broadcast the keys they supersede
WINNER_BATCH_ROWS = 10_000  # decoded log records handed to the JVM per Arrow batch


@dataclass(frozen=True)
class ReadPlan:
    """The base files a read scans, the table schema, and an optional commit-time range filter."""

    files: tuple[BaseFile, ...]
    schema: pa.Schema  # with meta columns
    start: str | None = None  # exclusive
    end: str | None = None  # inclusive
    log_slices: tuple[FileSlice, ...] = ()  # merge-on-read slices whose logs are merged into their base rows
    valid_instants: frozenset[str] = frozenset()  # write instants whose log blocks count
    event_time: bool = False
    ordering_field: str | None = None

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


def _check_not_cleaned(timeline: Timeline, instant: str, what: str) -> None:
    """Raise if reading the table as of ``instant`` needs file slices a clean removed (savepoints stay readable)."""
    earliest = timeline.earliest_retained()
    if earliest is None or instant >= earliest:
        return
    savepoints = timeline.savepoint_times()
    if instant in savepoints:
        return
    also = f" (or a savepointed instant: {', '.join(savepoints)})" if savepoints else ""
    raise CleanedRangeError(
        f"{what} {instant} is in a cleaned range: a clean removed file slices the table needs as of that instant, "
        f"so the read would return partial data; the earliest instant still readable is {earliest}{also}",
        instant=instant, earliest_readable=earliest)


def _check_not_archived(io: FileIO, timeline: Timeline, start: str) -> None:
    """Raise if the incremental range starting after ``start`` includes instants archived off the active timeline:
    their write stats are gone, so the file groups they changed cannot be found."""
    first = timeline.first_instant_time()
    if first is None or start >= first:
        return
    last = last_archived_instant(f.name for f in io.list_files(io.join(ARCHIVED_DIR)))
    if last is not None and start < last:
        raise CleanedRangeError(
            f"incremental start {start} reaches into archived instants (archived up to {last}): the changes they "
            f"made can no longer be found, so the read would return partial data; the earliest start still "
            f"readable is {last}", instant=start, earliest_readable=last)


def _plan(files: TableFiles, timeline: Timeline, config: TableConfig, *, as_of: str | None, view: str,
          start: str | None = None) -> ReadPlan:
    schema = table_schema(timeline, config.create_schema)
    if config.table_type != "MERGE_ON_READ" or view == "read_optimized":
        return ReadPlan(tuple(latest_base_files(files.bases, timeline, as_of=as_of)), schema, start, as_of)
    slices = latest_file_slices(files, timeline, as_of=as_of)
    # blocks of completed writes count, and those of instants older than the active timeline (archived)
    counted = (i.time for i in timeline.completed_writes(until=as_of) if start is None or i.time > start)
    valid = InstantsOrEarlier(counted, before=timeline.first_instant_time())
    return ReadPlan(tuple(s.base for s in slices if s.base is not None), schema, start, as_of,
                    log_slices=tuple(s for s in slices if s.logs), valid_instants=valid,
                    event_time=config.merge_mode == "EVENT_TIME_ORDERING", ordering_field=config.ordering_field)


def _check_view(view: str) -> None:
    if view not in VIEWS:
        raise TableCoreError(f"unknown view {view!r}: expected one of {', '.join(VIEWS)}")


def plan_snapshot(io: FileIO, timeline: Timeline, config: TableConfig, *, as_of: str | None = None,
                  view: str = "snapshot") -> ReadPlan:
    """Files of the snapshot as of ``as_of`` (default: latest); ``view="read_optimized"`` reads base files only.

    Raises:
        InstantNotFoundError: ``as_of`` is not a completed write on the active timeline.
        CleanedRangeError: ``as_of`` is older than what cleaning kept (and not savepointed).
    """
    _check_view(view)
    if as_of is not None:
        _check_instant(timeline, as_of, "as_of instant")
        _check_not_cleaned(timeline, as_of, "as_of instant")
    # the files are chosen as of the instant; the rows need no commit-time filter
    return replace(_plan(list_table_files(io), timeline, config, as_of=as_of, view=view), end=None)


def plan_incremental(io: FileIO, timeline: Timeline, config: TableConfig, *, start: str | None,
                     end: str | None) -> ReadPlan:
    """Files and range of an incremental read of ``(start, end]``: only the file groups commits in range wrote.

    The read needs the file slices as of ``end`` (rows are filtered by commit time), so a range that starts before
    what cleaning kept is complete as long as ``end`` is readable.

    Raises:
        InstantNotFoundError: ``end`` is not a completed write on the active timeline.
        CleanedRangeError: ``end`` is older than what cleaning kept (and not savepointed), or ``start`` is older
            than the newest archived instant.
    """
    writes = timeline.completed_writes()
    if end is None:
        end = writes[-1].time if writes else EARLIEST
    else:
        _check_instant(timeline, end, "end instant")
    start = start or EARLIEST
    if start > end:
        raise TableCoreError(f"incremental range is empty or inverted: start {start} > end {end}")
    _check_not_cleaned(timeline, end, "incremental end instant")
    _check_not_archived(io, timeline, start)
    in_range = [i for i in writes if start < i.time <= end]
    groups: set[tuple[str, str]] = set()
    for i in in_range:
        groups.update((s.partition_path, s.file_id) for s in timeline.metadata(i).write_stats if s.file_id)
    if not groups:
        return ReadPlan((), table_schema(timeline, config.create_schema), start, end)
    listed = list_table_files(io, {p for p, _ in groups})
    candidates = TableFiles(tuple(f for f in listed.bases if (f.partition, f.file_id) in groups),
                            tuple(f for f in listed.logs if (f.partition, f.file_id) in groups))
    return _plan(candidates, timeline, config, as_of=end, view="snapshot", start=start)


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
    """Execute a read plan: Spark's Parquet reader over the base files, merged with the slices' log records."""
    schema = plan.spark_schema
    if not plan.files:
        df = spark.createDataFrame([], schema)
    else:
        df = read_parquet_files(spark, schema, [io.spark_path(f.path) for f in plan.files])
    if plan.start is not None:
        df = df.where(F.col("_hoodie_commit_time") > F.lit(plan.start))
    if plan.end is not None:
        df = df.where(F.col("_hoodie_commit_time") <= F.lit(plan.end))
    if not plan.log_slices:
        return df
    winners = log_winners(spark, io, plan)
    # Joined on one 64-bit hash of (key, partition) — a long-keyed hash relation, cheap to probe for every base
    # row — with the key and partition compared on hash matches only, so a hash collision never drops a row.
    keys = winners.select(F.xxhash64(mor.KEY_COL, mor.PART_COL).alias("_lg_h"), F.col(mor.KEY_COL).alias("_lg_k"),
                          F.col(mor.PART_COL).alias("_lg_p"))
    log_bytes = sum(lg.size for s in plan.log_slices for lg in s.logs)
    if log_bytes <= BROADCAST_LOG_BYTES:
        keys = F.broadcast(keys)
    same = (df[mor.KEY_COL] == F.col("_lg_k")) & (df[mor.PART_COL] == F.col("_lg_p"))
    cond = (F.xxhash64(df[mor.KEY_COL], df[mor.PART_COL]) == F.col("_lg_h")) & F.coalesce(same, F.lit(False))
    live = winners.where(~F.col(mor.DELETE)).drop(mor.DELETE)
    return df.join(keys, cond, "left_anti").select(*schema.names).unionByName(live)


def slice_job(io: FileIO, plan: ReadPlan) -> mor.SliceJob:
    """What executors need to decode and reduce the logs of the plan's slices."""
    return mor.SliceJob(fs_uri="" if io.is_local else io.uri, table_schema=plan.schema,
                        valid_instants=plan.valid_instants, event_time=plan.event_time,
                        ordering_field=plan.ordering_field, start=plan.start)


def slice_descriptors(slices: Sequence[FileSlice]) -> pa.Table:
    """The descriptors (:data:`tablecore.spark.mor.SLICE_DDL`) of file slices, for a job over them."""
    return mor.slice_descriptors([(s.partition, s.file_id, s.base.path if s.base else None,
                                   [lg.path for lg in s.logs]) for s in slices])


def log_winners(spark: SparkSession, io: FileIO, plan: ReadPlan) -> DataFrame:
    """The winning log record of every key of the plan's log slices (table columns + ``_lg_delete``), decoded and
    reduced in executors when the first job needs them (the broadcast of the anti-join's keys) and checkpointed in
    executor memory for the second use (the union)."""
    job = slice_job(io, plan)
    desc = slice_descriptors(plan.log_slices)
    out = pa.schema([*plan.schema, pa.field(mor.DELETE, pa.bool_())])

    def read_logs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # the winners of many small slices go back to the JVM in a few large batches, not one small batch each
        pending: list[pa.Table] = []
        rows = 0
        for d in mor.iter_slices(batches):
            winners = mor.read_slice_logs(d, job)
            pending.append(winners)
            rows += winners.num_rows
            if rows >= WINNER_BATCH_ROWS:
                yield from pa.concat_tables(pending).combine_chunks().to_batches()
                pending, rows = [], 0
        if pending:
            yield from pa.concat_tables(pending).combine_chunks().to_batches()

    # the local relation of descriptors already spreads over the cores (no shuffle); the winners are used twice
    # (the anti-join keys and the union), so they are decoded once and kept in executor memory
    return spark.createDataFrame(desc).mapInArrow(read_logs, arrow_to_spark(out)).localCheckpoint(eager=False)
