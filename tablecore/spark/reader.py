"""Reads as Spark DataFrames: executes the read plans of :mod:`tablecore.read_planning` (snapshot, read-optimized,
time travel and incremental ``(start, end]``, DESIGN §2.3).

Spark's Parquet reader reads the chosen
base files with the table schema (meta columns first), so files written before a schema evolution read with nulls
for new columns and promoted types.

Tables whose storage Spark cannot open itself (``FileIO.hadoop_compatible`` False: ``s3://`` without a Hadoop S3
connector) are read in executors through the table's FileIO instead: one ``mapInArrow`` task per group of file slices
reads each base file with pyarrow and merges its logs (:func:`tablecore.tasks.read.read_slices`).

Merge-on-read slices with log files: executors decode the logs of each slice and reduce them to one winning record
per key (:mod:`tablecore.tasks.mor`); the base rows of those keys are removed with an anti-join (broadcast while the
logs are small) and the winners that are not deletes are added. Base files are still read by Spark's vectorized,
column-pruning Parquet reader, and only those of slices with logs go through the anti-join.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tablecore.format.file_view import BaseFile, FileSlice
from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.spark.schema import arrow_to_spark
from tablecore.tasks import mor
from tablecore.tasks import write as ex
from tablecore.tasks.read import read_slices, slice_job

logger = logging.getLogger(__name__)

BROADCAST_LOG_BYTES = 256 * 1024 * 1024  # log files up to this size in all: broadcast the keys they supersede
WINNER_BATCH_ROWS = 10_000  # decoded log records handed to the JVM per Arrow batch
FILE_ID = "_lg_file"  # a winning log record's file group; a base row's file name


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


def scan_keys(spark: SparkSession, io: FileIO, paths: list[str], key: str, part: str, fid: str) -> DataFrame:
    """The record key, partition path and file id of every row of the base files ``paths`` (an index lookup)."""
    if io.hadoop_compatible:
        stored = read_parquet_files(spark, f"{mor.KEY_COL} string, {mor.PART_COL} string",
                                    [io.uri_of(p) for p in paths])
        return stored.select(F.col(mor.KEY_COL).alias(key), F.col(mor.PART_COL).alias(part),
                             F.substring_index(F.col("_metadata.file_name"), "_", 1).alias(fid))
    out = pa.schema([pa.field(key, pa.string()), pa.field(part, pa.string()), pa.field(fid, pa.string())])

    def read_keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column(0).to_pylist():
                t = ex.read_base_file(io, path, [mor.KEY_COL, mor.PART_COL])
                file_id = path.rsplit("/", 1)[-1].split("_", 1)[0]
                ids = pa.repeat(pa.scalar(file_id, pa.string()), t.num_rows)
                yield from pa.table([t.column(0).cast(pa.string()), t.column(1).cast(pa.string()), ids],
                                    schema=out).to_batches()

    return spark.createDataFrame(pa.table({"path": paths})).mapInArrow(read_keys, arrow_to_spark(out))


def read_plan_in_tasks(spark: SparkSession, io: FileIO, plan: ReadPlan) -> DataFrame:
    """Execute a read plan in executors through ``io``: every file slice is read with pyarrow and merged with its
    logs in a task (for storage Spark cannot open)."""
    schema = arrow_to_spark(plan.schema)
    rows = plan.slices()
    if not rows:
        return spark.createDataFrame([], schema)

    def read_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for group in mor.iter_slice_groups(batches):  # the logs of a group of slices are decoded together
            for table in read_slices(io, plan, [(d["base_path"], d["log_paths"] or []) for d in group]):
                if table.num_rows:
                    yield from table.to_batches(max_chunksize=65536)

    return spark.createDataFrame(mor.slice_descriptors(rows)).mapInArrow(read_task, schema)


def read_plan(spark: SparkSession, io: FileIO, plan: ReadPlan) -> DataFrame:
    """Execute a read plan: Spark's Parquet reader over the base files, merged with the slices' log records (or, for
    storage Spark cannot open, :func:`read_plan_in_tasks`).

    Merge-on-read incremental reads with log files take the in-task path on every storage: measured on a local disk
    (``benchmarks/read_path.py``), merging each slice's logs in its task was 0.47-0.71x the time of Spark's scan +
    log job + anti-join, or within noise, for every query shape; for everything else Spark's reader (column pruning,
    filter pushdown) was as fast on full scans and 1.5-3x faster on filtered or projected queries."""
    if not io.hadoop_compatible or plan.cast_in_tasks or (plan.start is not None and plan.log_slices):
        return read_plan_in_tasks(spark, io, plan)
    schema = arrow_to_spark(plan.schema)
    if not plan.log_slices:
        return _scan_base_files(spark, io, plan, schema, plan.files)
    winners = log_winners(spark, io, plan)
    # Only the base files of slices with logs are anti-joined with the keys their logs supersede: the rows of the
    # others are read as they are (neither the key, partition and file-name columns the join compares nor its hash
    # are computed for them; a table whose recent file groups have logs reads its older ones at the plain scan's cost).
    with_logs = {(s.partition, s.file_id) for s in plan.log_slices}
    logged = [f for f in plan.files if (f.partition, f.file_id) in with_logs]
    plain = [f for f in plan.files if (f.partition, f.file_id) not in with_logs]
    parts = [_scan_base_files(spark, io, plan, schema, plain)] if plain else []
    if logged:
        parts.append(_without_superseded(_scan_base_files(spark, io, plan, schema, logged), winners, plan)
                     .select(*schema.names))
    parts.append(winners.where(~F.col(mor.DELETE)).drop(mor.DELETE, FILE_ID))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _without_superseded(df: DataFrame, winners: DataFrame, plan: ReadPlan) -> DataFrame:
    """The base rows ``df`` (of files of ``plan``'s log slices) whose key has no winning log record in its slice.

    Joined on one 64-bit hash of (key, partition) — a long-keyed hash relation, cheap to probe for every base row —
    with the key, partition and file group compared on hash matches only, so a hash collision never drops a row. The
    file group counts: a key can be in two groups of a partition (deleted in one, inserted again into another), and a
    log record only replaces the base row of its own slice."""
    keys = winners.select(F.xxhash64(mor.KEY_COL, mor.PART_COL).alias("_lg_h"), F.col(mor.KEY_COL).alias("_lg_k"),
                          F.col(mor.PART_COL).alias("_lg_p"), F.col(FILE_ID).alias("_lg_f"))
    log_bytes = sum(lg.size for s in plan.log_slices for lg in s.logs)
    if log_bytes <= BROADCAST_LOG_BYTES:
        keys = F.broadcast(keys)
    df = df.withColumn(FILE_ID, F.col("_metadata.file_name"))
    same = ((df[mor.KEY_COL] == F.col("_lg_k")) & (df[mor.PART_COL] == F.col("_lg_p"))
            & (F.substring_index(df[FILE_ID], "_", 1) == F.col("_lg_f")))
    cond = (F.xxhash64(df[mor.KEY_COL], df[mor.PART_COL]) == F.col("_lg_h")) & F.coalesce(same, F.lit(False))
    return df.join(keys, cond, "left_anti")


def _scan_base_files(spark: SparkSession, io: FileIO, plan: ReadPlan, schema: StructType,
                     files: Sequence[BaseFile]) -> DataFrame:
    """Spark's Parquet reader over ``files`` (base files of ``plan``), filtered to the plan's commit range."""
    if not files:
        return spark.createDataFrame([], schema)
    df = read_parquet_files(spark, schema, [io.uri_of(f.path) for f in files])
    if plan.in_range is not None:
        return df.where(F.col("_hoodie_commit_time").isin(sorted(plan.in_range)))
    if plan.start is not None:
        df = df.where(F.col("_hoodie_commit_time") > F.lit(plan.start))
    if plan.end is not None:
        df = df.where(F.col("_hoodie_commit_time") <= F.lit(plan.end))
    return df


def slice_descriptors(slices: Sequence[FileSlice]) -> pa.Table:
    """The descriptors (:data:`tablecore.tasks.mor.SLICE_DDL`) of file slices, for a job over them."""
    return mor.slice_descriptors([(s.partition, s.file_id, s.base.path if s.base else None,
                                   [lg.path for lg in s.logs]) for s in slices])


def log_winners(spark: SparkSession, io: FileIO, plan: ReadPlan) -> DataFrame:
    """The winning log record of every key of the plan's log slices (table columns, ``_lg_delete`` and the slice's
    file id, ``_lg_file``), decoded and reduced in executors when the first job needs them (the broadcast of the
    anti-join's keys) and checkpointed in executor memory for the second use (the union)."""
    job = slice_job(io, plan)
    desc = slice_descriptors(plan.log_slices)
    out = pa.schema([*plan.schema, pa.field(mor.DELETE, pa.bool_()), pa.field(FILE_ID, pa.string())])

    def read_logs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # the winners of many small slices go back to the JVM in a few large batches, not one small batch each
        pending: list[pa.Table] = []
        rows = 0
        for group in mor.iter_slice_groups(batches):
            for d, winners in zip(group, mor.read_slices_logs(group, job), strict=True):
                pending.append(winners.append_column(FILE_ID, ex.constant(d["file_id"], winners.num_rows)))
                rows += winners.num_rows
                if rows >= WINNER_BATCH_ROWS:
                    yield from pa.concat_tables(pending).combine_chunks().to_batches()
                    pending, rows = [], 0
        if pending:
            yield from pa.concat_tables(pending).combine_chunks().to_batches()

    # the local relation of descriptors already spreads over the cores (no shuffle); the winners are used twice
    # (the anti-join keys and the union), so they are decoded once and kept in executor memory
    return spark.createDataFrame(desc).mapInArrow(read_logs, arrow_to_spark(out)).localCheckpoint(eager=False)
