"""CDC reads as Spark DataFrames: the descriptors of a :class:`~tablecore.cdc_planning.CdcPlan` (one per commit and
partition) run as one ``mapInArrow`` job whose tasks read the touched file groups before and after each commit and
diff them (:mod:`tablecore.tasks.cdc`). Nothing but the plan's descriptors passes through the driver.

The rows come in commit order without a sort: the descriptors are in commit order (then partition), Spark splits
the local relation of descriptors into contiguous runs, one per task, and each task emits its descriptors' rows in
turn, each sorted by key. A global ``orderBy`` (a sampling job and a shuffle) would double the cost of a small
read; after a transformation that shuffles, ``orderBy("completion_time", "commit_time", "partition_path",
"record_key")`` restores the order."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tablecore.cdc_planning import CdcPlan
from tablecore.io import FileIO
from tablecore.spark.schema import arrow_to_spark
from tablecore.tasks import cdc


def read_cdc_plan(spark: SparkSession, io: FileIO, plan: CdcPlan, *, flatten: bool = False) -> DataFrame:
    """The CDC rows of ``plan`` in commit order: ``op``, ``commit_time``, ``completion_time``, ``record_key``,
    ``partition_path`` and the ``before`` / ``after`` images as structs, or with ``flatten`` as ``before_<column>``
    and ``after_<column>`` columns."""
    schema = arrow_to_spark(cdc.cdc_schema(plan.schema))
    if plan.descriptors.num_rows == 0:
        df = spark.createDataFrame([], schema)
    else:
        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return cdc.iter_cdc_rows(batches, plan, io)

        df = spark.createDataFrame(plan.descriptors).mapInArrow(run, schema)
    if not flatten:
        return df
    heads = [cdc.OP, cdc.COMMIT_TIME, cdc.COMPLETION_TIME, cdc.RECORD_KEY, cdc.PARTITION]
    return df.select(*heads, *[F.col(f"{side}.{name}").alias(f"{side}_{name}")
                               for side in (cdc.BEFORE, cdc.AFTER) for name in plan.schema.names])
