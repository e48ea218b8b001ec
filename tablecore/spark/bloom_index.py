"""The bloom index in a Spark write: which existing file group holds each of the batch's keys.

Two jobs, as Hudi's ``HoodieBloomIndex``:

1. the key range in the footer of each latest base file of the affected partitions (a row per file, collected like
   the driver's file list);
2. each distinct ``(key, partition)`` of the batch is paired with the files of its partition whose range holds it
   (a broadcast range join), the pairs are partitioned by file, and each task checks its files
   (:func:`tablecore.tasks.bloom_index.keys_in_base_file`: the bloom filter, then the key column of the files that
   may hold a key).

The work is the footers of the affected partitions plus the key columns of the files the filters let through: with
keys that cluster (time-ordered ids, late updates of recent records) most files are dropped by their range alone.
Like ``SIMPLE``, the index is partition-scoped: a key is looked up in the partition the batch gives it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from tablecore.io import FileIO
from tablecore.spark.jvm import default_parallelism
from tablecore.spark.task_errors import task_errors
from tablecore.tasks import write as ex
from tablecore.tasks.bloom_index import ProbeCounts, key_range_of_base_file, keys_in_base_file

if TYPE_CHECKING:
    from tablecore.format.file_view import BaseFile

__all__ = ["located_by_bloom"]

logger = logging.getLogger(__name__)

_PATH = "_lg_bloom_path"
_FOUND = StructType([StructField(ex.KEY, StringType()), StructField(ex.PART, StringType()),
                     StructField(ex.FID, StringType())])
_FOUND_ARROW = pa.schema([(ex.KEY, pa.string()), (ex.PART, pa.string()), (ex.FID, pa.string())])
_LOW, _HIGH = "_lg_bloom_min", "_lg_bloom_max"
_RANGES = StructType([StructField(ex.PART, StringType()), StructField(ex.FID, StringType()),
                      StructField(_PATH, StringType()), StructField(_LOW, StringType()),
                      StructField(_HIGH, StringType())])
_RANGES_ARROW = pa.schema([(ex.PART, pa.string()), (ex.FID, pa.string()), (_PATH, pa.string()), (_LOW, pa.string()),
                           (_HIGH, pa.string())])


def file_ranges(spark: SparkSession, io: FileIO, existing: list[BaseFile]) -> DataFrame:
    """One row per base file: partition, file id, path and the key range of its footer (nulls where it has none),
    read by a Spark job and collected (a row per file of the affected partitions, as the driver's file list)."""
    files = spark.createDataFrame(pa.table({
        ex.PART: [f.partition for f in existing], ex.FID: [f.file_id for f in existing],
        _PATH: [f.path for f in existing]}))

    def read_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with task_errors():
            for batch in batches:
                bounds = [key_range_of_base_file(io, path) for path in batch.column(2).to_pylist()]
                yield pa.RecordBatch.from_arrays(
                    [batch.column(0), batch.column(1), batch.column(2), pa.array([b[0] for b in bounds], pa.string()),
                     pa.array([b[1] for b in bounds], pa.string())], schema=_RANGES_ARROW)

    tasks = max(1, min(len(existing) // 64 + 1, default_parallelism(spark) * 2))
    rows = files.repartition(tasks).mapInArrow(read_ranges, _RANGES).collect()
    return spark.createDataFrame([tuple(r) for r in rows], _RANGES)


def located_by_bloom(spark: SparkSession, io: FileIO, prepared: DataFrame, existing: list[BaseFile]) -> DataFrame:
    """``(key, partition, file id)`` of the batch's keys that the base files ``existing`` hold."""
    ranges = file_ranges(spark, io, existing).alias("r")
    keys = prepared.select(ex.KEY, ex.PART).distinct().alias("k")
    key = F.col(f"k.{ex.KEY}")
    in_range = (F.col(f"k.{ex.PART}") == F.col(f"r.{ex.PART}")) \
        & (F.col(f"r.{_LOW}").isNull() | (key >= F.col(f"r.{_LOW}"))) \
        & (F.col(f"r.{_HIGH}").isNull() | (key <= F.col(f"r.{_HIGH}")))
    pairs = keys.join(F.broadcast(ranges), in_range) \
        .select(F.col(f"r.{_PATH}").alias(_PATH), F.col(f"k.{ex.PART}").alias(ex.PART),
                F.col(f"r.{ex.FID}").alias(ex.FID), key.alias(ex.KEY))
    tasks = max(1, min(len(existing), default_parallelism(spark) * 2))
    pairs = pairs.repartition(tasks, _PATH)

    def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with task_errors():
            got = [b for b in batches if b.num_rows]
            if not got:
                return
            table = pa.Table.from_batches(got)
            table = table.take(pc.sort_indices(table, [(_PATH, "ascending")]))
            paths = table.column(_PATH)
            counts = ProbeCounts()
            start = 0
            ends = pc.run_end_encode(paths.combine_chunks())
            for end, path in zip(ends.run_ends.to_pylist(), ends.values.to_pylist(), strict=True):
                group = table.slice(start, end - start)
                start = end
                found = keys_in_base_file(io, path, group.column(ex.KEY).combine_chunks(), counts)
                if len(found):
                    n = len(found)
                    yield pa.RecordBatch.from_arrays(
                        [found, pa.repeat(group.column(ex.PART)[0], n).cast(pa.string()),
                         pa.repeat(group.column(ex.FID)[0], n).cast(pa.string())], schema=_FOUND_ARROW)
            logger.info("bloom index: %d files, %d key checks, %d in range, %d past the filters, %d found, "
                        "%d files read", counts.files, counts.keys, counts.in_range, counts.maybe, counts.found,
                        counts.files_read)

    return pairs.mapInArrow(check, _FOUND)

