"""The record-level index in Spark jobs (:mod:`tablecore.record_index`): looking a batch's keys up, and writing what
a write changed.

A lookup is one job over the batch's keys: each key gets its file group of the index (Hudi's hash), the keys are
partitioned by group, and each task reads the groups it holds (their logs whole, then only the blocks of the
base HFile the keys fall in) and returns the keys found with their partition and file group. Its cost is the batch's
keys and the blocks they touch, not the table.

After the data files are written, a second job writes the index's log files of the instant: the rows the index did
not locate (inserts: their new file group) and the deleted keys, partitioned by group, one log file per group.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel, TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from tablecore.format.file_naming import write_token
from tablecore.format.record_index import file_group_indexes
from tablecore.io import FileIO
from tablecore.record_index import RecordIndexView, lookup, write_changes
from tablecore.spark.jvm import default_parallelism
from tablecore.spark.task_errors import task_errors
from tablecore.tasks import write as ex

if TYPE_CHECKING:
    from tablecore.format.file_view import BaseFile, FileSlice

__all__ = ["NEW", "locate", "tag_located", "write_index"]

logger = logging.getLogger(__name__)

NEW = ex.NEW
LOC_PART, LOC_FID = "_lg_ri_part", "_lg_ri_fid"
_GROUP = "_lg_ri_group"
_LOCATED = StructType([StructField(ex.KEY, StringType()), StructField(LOC_PART, StringType()),
                       StructField(LOC_FID, StringType())])
_LOCATED_ARROW = pa.schema([(ex.KEY, pa.string()), (LOC_PART, pa.string()), (LOC_FID, pa.string())])


def _tasks(spark: SparkSession, groups: int) -> int:
    return max(1, min(groups, default_parallelism(spark) * 2))


def _with_group(df: DataFrame, groups: int) -> DataFrame:
    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            fg = file_group_indexes(batch.column(ex.KEY), groups)
            yield batch.append_column(_GROUP, pa.array(fg, pa.int32()))

    return df.mapInArrow(add, StructType([*df.schema.fields, StructField(_GROUP, IntegerType())]))


def locate(spark: SparkSession, prepared: DataFrame, view: RecordIndexView) -> DataFrame:
    """The batch's keys the index holds, with the partition and file group it places them in (persisted: the caller
    unpersists it)."""

    def find(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_group: dict[int, set[str]] = {}
        for batch in batches:
            for key, group in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                by_group.setdefault(group, set()).add(key)  # a key given twice is looked up once
        for group, keys in sorted(by_group.items()):
            found = lookup(view, group, sorted(keys))
            if found:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(list(found), pa.string()), pa.array([loc.partition for loc in found.values()],
                                                                  pa.string()),
                     pa.array([loc.file_id for loc in found.values()], pa.string())], schema=_LOCATED_ARROW)

    keys = _with_group(prepared.select(ex.KEY), view.groups)
    located = keys.repartition(_tasks(spark, view.groups), _GROUP).mapInArrow(find, _LOCATED)
    return located.persist(StorageLevel.MEMORY_AND_DISK)


def located_partitions(located: DataFrame) -> set[str]:
    """The partitions the index places the batch's keys in (one small job)."""
    with task_errors():
        return {r[0] for r in located.select(LOC_PART).distinct().collect()}


def tag_located(spark: SparkSession, prepared: DataFrame, located: DataFrame, existing: list[BaseFile],
                slices: list[FileSlice], *, broadcast: bool) -> DataFrame:
    """``prepared`` with the file group (``FID``) of every key the index places in a live file group, in the
    partition it places it (an update keeps its record where it is, as Hudi's global index does by default), and
    ``NEW`` for the rows it does not (inserts)."""
    live = sorted({(f.partition, f.file_id) for f in existing} | {(s.partition, s.file_id) for s in slices})
    # the schema given: Spark Connect infers none from an empty table (an upsert into a table without rows yet)
    live_df = spark.createDataFrame(pa.table({"_lg_lp": pa.array([p for p, _ in live], pa.string()),
                                              "_lg_lf": pa.array([f for _, f in live], pa.string())}),
                                    "_lg_lp string, _lg_lf string")
    joined = prepared.join(F.broadcast(located) if broadcast else located, ex.KEY, "left")
    joined = joined.join(F.broadcast(live_df), (F.col(LOC_PART) == F.col("_lg_lp")) &
                         (F.col(LOC_FID) == F.col("_lg_lf")), "left")
    found = F.col("_lg_lf").isNotNull()
    columns = [F.when(found, F.col(LOC_PART)).otherwise(F.col(ex.PART)).alias(ex.PART) if c == ex.PART
               else F.col(f"`{c}`") for c in prepared.columns]
    return joined.select(*columns, F.col("_lg_lf").alias(ex.FID), (~found).alias(NEW))


def write_index(spark: SparkSession, io: FileIO, assigned: DataFrame, instant: str, groups: int) -> int:
    """Write the index's log files of ``instant``: the rows marked ``NEW`` at their file group, the deleted keys as
    deletes. Returns the number of log files written."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chunks = list(batches)
        if not chunks or not sum(b.num_rows for b in chunks):
            return
        rows = pa.Table.from_batches(chunks)
        ctx = TaskContext.get()
        token = "0-0-0" if ctx is None else write_token(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId())
        deleted = pc.equal(rows.column(ex.OP), "D")
        ups, dels = rows.filter(pc.invert(deleted)), rows.filter(deleted)
        written = write_changes(io, groups, instant, token, ups.column(ex.KEY), ups.column(ex.PART),
                                ups.column(ex.FID), dels.column(ex.KEY))
        yield pa.RecordBatch.from_pydict({"name": [n for n, _ in written], "size": [s for _, s in written]},
                                         schema=pa.schema([("name", pa.string()), ("size", pa.int64())]))

    rows = assigned.where(F.col(NEW) | (F.col(ex.OP) == "D")).select(ex.KEY, ex.PART, ex.FID, ex.OP)
    spread = _with_group(rows, groups).repartition(_tasks(spark, groups), _GROUP)
    out_schema = StructType([StructField("name", StringType()), StructField("size", LongType())])
    with task_errors():
        written = spread.mapInArrow(write, out_schema).collect()
    logger.info("wrote %d record index log files of %s", len(written), instant)
    return len(written)
