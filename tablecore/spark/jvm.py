"""The one module that reaches into a classic SparkSession's JVM (``sparkContext``, ``_jdf``). Everything here has
an answer for Spark Connect sessions too, where there is no JVM in this process: a Connect client only changes
what these functions fall back to."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

# Physical operators of a plan that is cheap to run again and reads the same rows each time: a scan of files or of
# local rows, with projections and filters (Python UDFs, joins, aggregates, exchanges, samples... are not listed).
_RECOMPUTABLE_OPERATORS = frozenset({
    "FileSourceScanExec", "LocalTableScanExec", "ProjectExec", "FilterExec", "ColumnarToRowExec",
    "WholeStageCodegenExec", "InputAdapter",
})
_FALLBACK_PARALLELISM = 2


def _jvm_context(spark: SparkSession) -> Any | None:
    """The session's SparkContext, or None on a Spark Connect session."""
    try:
        return spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext in the client
        return None


def default_parallelism(spark: SparkSession) -> int:
    """The cores Spark schedules tasks on (``spark.default.parallelism`` where the JVM is not reachable)."""
    sc = _jvm_context(spark)
    if sc is not None:
        return int(sc.defaultParallelism)
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value else _FALLBACK_PARALLELISM


def recompute_is_cheap(df: DataFrame) -> bool:
    """True when ``df`` is a deterministic scan of files or local rows with projections and filters only: reading it
    again costs less than caching it (a columnar Parquet scan beats writing and reading back serialized rows).
    False when the plan cannot be inspected (a Spark Connect DataFrame): caching is the safe choice."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return False
    try:
        qe = jdf.queryExecution()
        if not qe.optimizedPlan().deterministic():
            return False
        stack = [qe.executedPlan()]
        while stack:
            node = stack.pop()
            if node.getClass().getSimpleName() not in _RECOMPUTABLE_OPERATORS:
                return False
            children = node.children()
            stack.extend(children.apply(i) for i in range(children.size()))
        return True
    except Exception:  # an unexpected plan shape (or API): cache, the safe choice
        logger.debug("could not inspect the input plan; caching it", exc_info=True)
        return False


def release_local_checkpoint(df: DataFrame) -> None:
    """Drop the blocks of a DataFrame made by ``localCheckpoint`` (its plan: one scan of the checkpointed RDD) now,
    not when the JVM collects it: ``DataFrame.unpersist`` does not touch them. On a Spark Connect session the server
    owns them, and pyspark's client releases them when its DataFrame is garbage-collected; nothing is done
    here."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    try:
        plan = jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # an unexpected plan shape (or API): the JVM's cleaner drops the blocks later
        logger.debug("could not release a local checkpoint", exc_info=True)
