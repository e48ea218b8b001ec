"""``SparkEngine``: the Spark implementation of :class:`tablecore.engine.Engine` — the one door between tablecore and
Spark. It works on classic sessions (local, standalone, YARN, Kubernetes) and uses only DataFrame APIs for its jobs
(``mapInArrow``, grouped writes, Parquet scans); what needs a JVM handle is in :mod:`tablecore.spark.jvm`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tablecore.cdc_planning import CdcPlan
from tablecore.config import TableConfig
from tablecore.engine import KeyCopies, Operation, WritePart
from tablecore.exceptions import ConfigError
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_naming import write_token
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.spark.cdc import read_cdc_plan
from tablecore.spark.counting import count_plan
from tablecore.spark.jvm import default_parallelism
from tablecore.spark.reader import read_plan
from tablecore.spark.schema import spark_to_arrow, table_spark_schema
from tablecore.spark.task_errors import task_errors
from tablecore.spark.writer import SparkPlannedWrite, SparkWriter
from tablecore.tasks import key_check, mor
from tablecore.tasks import write as ex
from tablecore.tasks.key_check import WrittenFile

TASKS_PER_CORE = 4


def active_session(spark: SparkSession | None = None) -> SparkSession:
    """``spark``, else the active session; ConfigError if there is none."""
    if spark is not None:
        return spark
    active = SparkSession.getActiveSession()
    if active is None:
        raise ConfigError("no SparkSession: pass spark=... or create one first")
    return active


class SparkEngine:
    """Runs tablecore's jobs on a SparkSession."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        from tablecore.spark.datasource import register

        register(spark)

    def plan_write(self, io: FileIO, config: TableConfig, timeline: Timeline, parts: Sequence[WritePart],
                   operation: Operation) -> SparkPlannedWrite:
        """Plan a write with :class:`~tablecore.spark.writer.SparkWriter`."""
        with task_errors():
            return SparkWriter(self.spark, io, config).plan(timeline, parts, operation)

    def read(self, io: FileIO, plan: ReadPlan) -> DataFrame:
        """Spark's Parquet reader over the plan's base files, merged with the decoded logs."""
        return read_plan(self.spark, io, plan)

    def read_cdc(self, io: FileIO, plan: CdcPlan, *, flatten: bool) -> DataFrame:
        """The plan's change rows from one job over its descriptors (:mod:`tablecore.spark.cdc`)."""
        return read_cdc_plan(self.spark, io, plan, flatten=flatten)

    def count(self, io: FileIO, plan: ReadPlan) -> int:
        """Rows from footers and log keys (:mod:`tablecore.spark.counting`)."""
        with task_errors():
            return count_plan(self.spark, io, plan)

    def run_tasks(self, descriptors: pa.Table, task: Callable[[dict[str, Any], str], pa.Table]) -> list[WriteStat]:
        """One ``mapInArrow`` over the descriptor rows, spread over a multiple of the cores."""

        def run_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            ctx = TaskContext.get()
            token = write_token(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId()) if ctx else "0-0-0"
            for d in mor.iter_slices(batches):
                yield from task(d, token).to_batches()

        tasks = max(1, min(descriptors.num_rows, default_parallelism(self.spark) * TASKS_PER_CORE))
        with task_errors():
            rows = (self.spark.createDataFrame(descriptors).repartition(tasks)
                    .mapInArrow(run_rows, ex.STAT_DDL).collect())
        return ex.write_stats(rows)

    def common_keys(self, io: FileIO, left: Sequence[WrittenFile], right: Sequence[WrittenFile], limit: int,
                    ) -> list[tuple[str, str]]:
        """Two ``mapInArrow`` key scans joined on (partition, key); a sample of the matches reaches the driver."""
        if not left or not right:
            return []

        def keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return key_check.iter_written_keys(io, mor.iter_slices(batches))

        def scan(files: Sequence[WrittenFile]) -> DataFrame:
            return self.spark.createDataFrame(key_check.file_descriptors(files)).mapInArrow(keys,
                                                                                            key_check.KEYS_DDL)

        with task_errors():
            rows = scan(left).join(scan(right).distinct(), ["partition", "key"]).distinct().limit(limit).collect()
        return sorted((r["partition"], r["key"]) for r in rows)

    def duplicate_keys(self, io: FileIO, plan: ReadPlan, limit: int) -> tuple[int, list[KeyCopies]]:
        """The plan's rows grouped by (partition, key), kept where a group has two rows or more (persisted: normally
        none); one job counts them, one takes the sample."""
        rows = read_plan(self.spark, io, plan)
        # a base file is <fileId>_<token>_<instant>.parquet, a log file .<fileId>_<instant>.log.<n>_<token>, and a
        # log record may carry the bare file id: the file id is what precedes the first underscore
        group = F.regexp_extract(F.col("_hoodie_file_name"), r"^\.?([^_]+)", 1)
        copies = (rows.groupBy("_hoodie_partition_path", "_hoodie_record_key")
                  .agg(F.count(F.lit(1)).alias("copies"), F.sort_array(F.collect_set(group)).alias("file_ids"))
                  .where(F.col("copies") > 1).persist())
        try:
            with task_errors():
                total = copies.count()
                sample = copies.orderBy("_hoodie_partition_path", "_hoodie_record_key").limit(limit).collect() \
                    if total else []
        finally:
            copies.unpersist()
        return total, [KeyCopies(r["_hoodie_partition_path"], r["_hoodie_record_key"], int(r["copies"]),
                                 tuple(r["file_ids"])) for r in sample]

    def empty(self, avro_schema: str) -> DataFrame:
        """No rows, the table's columns."""
        return self.spark.createDataFrame([], table_spark_schema(avro_schema, with_meta=True))

    def arrow_schema(self, frame_schema: StructType) -> pa.Schema:
        """The Arrow schema Spark uses for a ``StructType`` (timestamps in UTC)."""
        return spark_to_arrow(frame_schema)

    def frame_schema(self, avro_schema: str, *, with_meta: bool) -> StructType:
        """The Spark schema of a table schema."""
        return table_spark_schema(avro_schema, with_meta=with_meta)
