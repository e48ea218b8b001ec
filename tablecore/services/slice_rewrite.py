"""What compaction and clustering share: the jobs that read file slices (base merged with logs) and write new base
files, and running one rewrite per descriptor row in Spark tasks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark import TaskContext

from tablecore.format.avro_schema import canonical_json, with_meta_fields
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_naming import write_token
from tablecore.format.timeline import InstantsOrEarlier, Timeline
from tablecore.spark import executor as ex
from tablecore.spark import mor
from tablecore.spark.reader import table_schema
from tablecore.spark.schema import table_arrow_schema

if TYPE_CHECKING:
    from tablecore.table import Table


def rewrite_jobs(table: Table, timeline: Timeline, instant: str) -> tuple[str, mor.SliceJob, ex.WriteJob]:
    """The table's Avro schema (no meta fields), how to read its slices as of ``timeline`` (every completed write
    counts, and whatever is older than the active timeline), and how to write base files of ``instant``."""
    avro = timeline.latest_schema() or table.config.create_schema
    assert avro is not None
    io = table.io
    read_job = mor.SliceJob(fs_uri="" if io.is_local else io.uri,
                            table_schema=table_schema(timeline, table.config.create_schema),
                            valid_instants=InstantsOrEarlier((i.time for i in timeline.completed_writes()),
                                                             before=timeline.first_instant_time()),
                            event_time=table.config.merge_mode == "EVENT_TIME_ORDERING",
                            ordering_field=table.config.ordering_field)
    write_job = ex.WriteJob(fs_uri=read_job.fs_uri, base=io.base, instant=instant,
                            target_schema=table_arrow_schema(avro, with_meta=False),
                            avro_schema_with_meta=canonical_json(with_meta_fields(json.loads(avro))),
                            groups={}, event_time=read_job.event_time, ordering_field=read_job.ordering_field)
    return avro, read_job, write_job


def run_rewrite(table: Table, desc: pa.Table, rewrite: Callable[[dict[str, Any], str], pa.Table]) -> list[WriteStat]:
    """Run ``rewrite(row, write_token)`` for every row of ``desc`` in Spark tasks (a multiple of the cores) and
    return the write stats (rows of ``STAT_SCHEMA``) it produced."""

    def rewrite_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        token = write_token(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId()) if ctx else "0-0-0"
        for d in mor.iter_slices(batches):
            yield from rewrite(d, token).to_batches()

    spark = table.spark
    tasks = max(1, min(desc.num_rows, spark.sparkContext.defaultParallelism * 4))
    rows = spark.createDataFrame(desc).repartition(tasks).mapInArrow(rewrite_rows, ex.STAT_DDL).collect()
    return ex.write_stats(rows)
