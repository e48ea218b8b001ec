"""CDC reads as Spark DataFrames: the descriptors of a :class:`~tablecore.cdc_planning.CdcPlan` (one per commit and
partition) run as one ``mapInArrow`` job whose tasks read the touched file groups before and after each commit and
diff them (:mod:`tablecore.tasks.cdc`). Nothing but the plan's descriptors passes through the driver.

The rows come in commit order without a sort: the descriptors are in commit order (then partition), they are cut
into contiguous runs of about equal weight (the bytes each reads, from the write stats: the newest days' CDC files of
a change feed can outweigh hundreds of old days' together), one run per task, and each task emits its descriptors'
rows in turn, each sorted by key. A global ``orderBy`` (a sampling job and a shuffle) would double the cost of a small
read; after a transformation that shuffles, ``orderBy("completion_time", "commit_time", "partition_path",
"record_key")`` restores the order."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tablecore.cdc_planning import CdcPlan
from tablecore.io import FileIO
from tablecore.spark.jvm import default_parallelism
from tablecore.spark.schema import arrow_to_spark
from tablecore.tasks import cdc

RUN = "run"  # the column of a task's descriptors


def contiguous_runs(weights: Sequence[int], n: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges that cut ``weights`` into at most ``n`` contiguous, non-empty runs of about equal sum:
    each cut falls at the boundary closest to its share of the total."""
    if not weights:
        return []
    n = max(1, min(n, len(weights)))
    total = sum(weights)
    cuts = [0]
    acc = 0
    k = 1
    for i, w in enumerate(weights):
        if k >= n:
            break
        before, acc = acc, acc + w
        target = total * k / n
        if acc >= target:
            # cut before this descriptor or after it, whichever lands nearer the target
            cut = i if target - before < acc - target and i > cuts[-1] else i + 1
            if cut < len(weights) and cut > cuts[-1]:
                cuts.append(cut)
                k += 1
    cuts.append(len(weights))
    return list(itertools.pairwise(cuts))


def _runs_table(descriptors: pa.Table, n: int) -> pa.Table:
    """One row per run of descriptors: a list of the descriptors' structs."""
    runs = contiguous_runs(descriptors.column("weight").to_pylist(), n)
    offsets = pa.array([start for start, _ in runs] + [runs[-1][1]], pa.int32())
    return pa.table({RUN: pa.ListArray.from_arrays(offsets, descriptors.to_struct_array().combine_chunks())})


def read_cdc_plan(spark: SparkSession, io: FileIO, plan: CdcPlan, *, flatten: bool = False) -> DataFrame:
    """The CDC rows of ``plan`` in commit order: ``op``, ``commit_time``, ``completion_time``, ``record_key``,
    ``partition_path`` and the ``before`` / ``after`` images (of the plan's ``image_schema``) as structs, or with
    ``flatten`` as ``before_<column>`` and ``after_<column>`` columns."""
    schema = arrow_to_spark(cdc.cdc_schema(plan.image_schema))
    if plan.descriptors.num_rows == 0:
        df = spark.createDataFrame([], schema)
    else:
        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            descriptors = (pa.RecordBatch.from_struct_array(r.column(0).flatten()) for r in batches)
            return cdc.iter_cdc_rows(descriptors, plan, io)

        # as many runs as Spark has cores: a local relation of that many rows is one row per task
        runs = _runs_table(plan.descriptors, default_parallelism(spark))
        df = spark.createDataFrame(runs).mapInArrow(run, schema)
    if not flatten:
        return df
    heads = [cdc.OP, cdc.COMMIT_TIME, cdc.COMPLETION_TIME, cdc.RECORD_KEY, cdc.PARTITION]
    return df.select(*heads, *[F.col(f"{side}.{name}").alias(f"{side}_{name}")
                               for side in (cdc.BEFORE, cdc.AFTER) for name in plan.image_schema.names])
