"""Exact row counts of a snapshot without reading its rows (:meth:`Table.count`).

A snapshot's rows are its base files' rows, minus the base rows a winning log record replaces or deletes, plus the
winning log records that are not deletes (:func:`tablecore.spark.reader.read_plan` does exactly this with an
anti-join on key, partition and file group). The count follows the same arithmetic per partition, in executors:

* a base file's rows come from its Parquet footer: no page is read;
* in a partition whose slices have log records, the logs are decoded and reduced to their winners (the reader's own
  :func:`tablecore.tasks.mor.read_slice_logs`, building only the key, partition, delete-flag and, with event-time
  ordering, ordering columns of the records), and only the key column of the base files of those slices' file
  groups is read (the partition column too, unless the file's footer statistics show it holds the partition path in
  every row) to count the base rows the winners supersede.

A copy-on-write table, or a merge-on-read table right after compaction, is counted from footers alone. Where a
winner's partition path differs from the partition it was written in (never, for tables written by tablecore or
Hudi), the count falls back to counting the merged rows with Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tablecore.exceptions import TableCoreError
from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.spark.reader import read_plan, slice_descriptors
from tablecore.tasks import mor
from tablecore.tasks import write as ex
from tablecore.tasks.read import slice_job

logger = logging.getLogger(__name__)

_OUT = "rows long, exact boolean"


def _partition_descriptors(plan: ReadPlan) -> pa.Table:
    """One row per partition: its base files and the descriptors of its slices with logs."""
    bases: dict[str, list[str]] = {}
    slices: dict[str, list[dict[str, Any]]] = {}
    for f in plan.files:
        bases.setdefault(f.partition, []).append(f.path)
    described = slice_descriptors(plan.log_slices)
    for desc in described.to_pylist():
        slices.setdefault(desc["partition"], []).append(desc)
    parts = sorted(set(bases) | set(slices))
    return pa.table({"partition": pa.array(parts, pa.string()),
                     "base_paths": pa.array([bases.get(p, []) for p in parts], pa.list_(pa.string())),
                     "slices": pa.array([slices.get(p, []) for p in parts],
                                        pa.list_(pa.struct(list(described.schema))))})


def _footer_rows(fs: Any, path: str) -> int:
    with fs.open_input(path) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


def counting_job(job: mor.SliceJob) -> mor.SliceJob:
    """``job`` reading only what a count needs of the log records: the key, the partition path, the delete flag and,
    with event-time ordering, the ordering value (the other columns of a log block are stepped over, not built)."""
    needed = {mor.KEY_COL, mor.PART_COL, ex.IS_DELETED}
    if job.event_time and job.ordering_field:
        needed.add(job.ordering_field)
    schema = pa.schema([f for f in job.table_schema if f.name in needed])
    return replace(job, table_schema=schema)


def count_partition(desc: dict[str, Any], job: mor.SliceJob) -> tuple[int, bool]:
    """The rows of one partition of the snapshot, and whether the count is exact (False: count with Spark)."""
    fs = job.filesystem()
    partition: str = desc["partition"]
    base_paths: list[str] = list(desc["base_paths"])
    slices = list(desc["slices"])
    winners = list(mor.read_slices_logs(slices, job))
    won = pa.concat_tables(winners) if winners else None
    if won is None or won.num_rows == 0:
        return sum(_footer_rows(fs, p) for p in base_paths), True
    parts = won.column(mor.PART_COL)
    if pc.any(pc.not_equal(parts, partition)).as_py() or parts.null_count:
        return 0, False
    # a log record supersedes a base row of its own file group only (a key deleted in one group can be in another)
    keys = {s["file_id"]: pc.unique(w.column(mor.KEY_COL)) for s, w in zip(slices, winners, strict=True)
            if w.num_rows}
    rows = 0
    for path in base_paths:
        group_keys = keys.get(path.rsplit("/", 1)[-1].split("_", 1)[0])
        if group_keys is None:
            rows += _footer_rows(fs, path)
            continue
        with fs.open_input(path) as f:
            pf = pq.ParquetFile(f)
            if _holds_only(pf.metadata, mor.PART_COL, partition):  # the footer proves it: no need to read it
                superseded = pc.is_in(pf.read(columns=[mor.KEY_COL]).column(0), value_set=group_keys)
            else:
                base = pf.read(columns=[mor.KEY_COL, mor.PART_COL])
                superseded = pc.and_(pc.is_in(base.column(mor.KEY_COL), value_set=group_keys),
                                     pc.equal(base.column(mor.PART_COL), partition))
        rows += pf.metadata.num_rows - _trues(superseded)
    return rows + won.num_rows - _trues(won.column(mor.DELETE)), True


def _trues(flags: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(flags.cast(pa.int64())).as_py() or 0)  # nulls (a null key or partition) count as False


def _holds_only(metadata: pq.FileMetaData, column: str, value: str) -> bool:
    """Whether the column statistics of every row group say that ``column`` holds ``value`` in every row."""
    names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    if column not in names:
        return False
    index = names.index(column)
    for g in range(metadata.num_row_groups):
        stats = metadata.row_group(g).column(index).statistics
        if stats is None or not stats.has_min_max or stats.null_count != 0 or stats.min != value \
                or stats.max != value:
            return False
    return True


def count_plan(spark: SparkSession, io: FileIO, plan: ReadPlan) -> int:
    """The exact number of rows ``read_plan(spark, io, plan)`` returns, for a snapshot plan (no commit-time range).

    One Spark job over the partitions of the plan; only a count per partition reaches the driver.

    Raises:
        TableCoreError: ``plan`` has a commit-time range (incremental reads are counted by reading them).
    """
    if plan.start is not None or plan.end is not None:
        raise TableCoreError("count_plan counts snapshots; an incremental read is counted by reading it")
    if not plan.files and not plan.log_slices:
        return 0
    job = counting_job(slice_job(io, plan))

    def count_partitions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        counts: list[int] = []
        exact: list[bool] = []
        for batch in batches:
            for desc in batch.to_pylist():
                n, ok = count_partition(desc, job)
                counts.append(n)
                exact.append(ok)
        yield pa.record_batch({"rows": pa.array(counts, pa.int64()), "exact": pa.array(exact, pa.bool_())})

    per_partition = spark.createDataFrame(_partition_descriptors(plan)).mapInArrow(count_partitions, _OUT)
    row = per_partition.agg(F.sum("rows").alias("rows"), F.bool_and("exact").alias("exact")).head()
    assert row is not None  # a global aggregate always has a row
    if row["exact"] is False:
        logger.warning("a log record's partition path differs from its file's partition: counting merged rows")
        return read_plan(spark, io, plan).count()
    return int(row["rows"] or 0)
