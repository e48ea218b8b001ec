"""The bloom index in a Spark write: which existing file group holds each of the batch's keys.

One job. Each distinct ``(key, partition)`` of the batch is paired with the base files of its partition (a join with
the driver's list of the affected partitions' latest base files), the pairs are partitioned by file, and each task
checks its files (:func:`tablecore.tasks.bloom_index.keys_in_base_file`: key range, bloom filter, then the key column
of the files that may hold a key). The work is the batch's keys times the files of their partitions, plus the key
columns of the files the filters let through: with keys that cluster (time-ordered ids, late updates of recent
records) most files are dropped by their footer alone. Like ``SIMPLE``, the index is partition-scoped: a key is
looked up in the partition the batch gives it.
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
from tablecore.tasks.bloom_index import ProbeCounts, keys_in_base_file

if TYPE_CHECKING:
    from tablecore.format.file_view import BaseFile

__all__ = ["tag_bloom"]

logger = logging.getLogger(__name__)

_PATH = "_lg_bloom_path"
_FOUND = StructType([StructField(ex.KEY, StringType()), StructField(ex.PART, StringType()),
                     StructField(ex.FID, StringType())])
_FOUND_ARROW = pa.schema([(ex.KEY, pa.string()), (ex.PART, pa.string()), (ex.FID, pa.string())])


def located_by_bloom(spark: SparkSession, io: FileIO, prepared: DataFrame, existing: list[BaseFile]) -> DataFrame:
    """``(key, partition, file id)`` of the batch's keys that the base files ``existing`` hold."""
    files = spark.createDataFrame(pa.table({
        ex.PART: [f.partition for f in existing], _PATH: [f.path for f in existing],
        ex.FID: [f.file_id for f in existing]}))
    pairs = prepared.select(ex.KEY, ex.PART).distinct().join(files, [ex.PART])
    tasks = max(1, min(len(existing), default_parallelism(spark) * 2))
    pairs = pairs.repartition(tasks, _PATH).select(_PATH, ex.PART, ex.FID, ex.KEY)

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


def tag_bloom(spark: SparkSession, io: FileIO, prepared: DataFrame, existing: list[BaseFile], *,
              broadcast: bool) -> DataFrame:
    """``prepared`` with the file id (``ex.FID``) of the group holding each row's key, null for new keys."""
    if not existing:
        return prepared.withColumn(ex.FID, F.lit(None).cast(StringType()))
    located = located_by_bloom(spark, io, prepared, existing)
    return prepared.join(F.broadcast(located) if broadcast else located, [ex.KEY, ex.PART], "left")
