"""Targeted column updates: write named columns of rows the target already holds, leaving every other column as it is
(a partial-row upsert, for derived columns that are not computed incrementally).

A pipeline whose target says ``operation: update_columns`` and ``update_columns: [tier, score]`` sends batches of
record keys and those columns. :func:`complete_rows` joins them with the target's stored rows, read from the
partitions the batch names when it carries the partition fields (else the whole table), and gives full rows: the
batch's values for the named columns, the stored values for the others (the ordering field included unless it is
named, so event-time ordering keeps the stored order). Keys the target does not hold are not inserted; they are
counted as rows that wrote no record. The full rows are upserted through the gate; a writer that changed the same
rows meanwhile makes the commit conflict, and the batch is completed again over the new state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from governance.errors import PipelineConfigError
from governance.source_batch import without_meta
from tablecore import Table
from tablecore.spark.keys import partition_path_column

__all__ = ["check_update_columns", "complete_rows"]

logger = logging.getLogger(__name__)


def check_update_columns(columns: Sequence[str], record_key: Sequence[str], partition_fields: Sequence[str]) -> None:
    """Named columns must not be record-key or partition fields (a key or partition cannot move by an update).

    Raises:
        ValueError: the message names the column.
    """
    if not columns:
        raise ValueError("update_columns names no column")
    for c in columns:
        if c in record_key or c in partition_fields:
            raise ValueError(f"update_columns: {c!r} is a record-key or partition field; an update cannot change it")


def complete_rows(table: Table, batch: DataFrame, columns: Sequence[str]) -> tuple[DataFrame, DataFrame]:
    """The batch's rows whose key the target holds, completed with the stored values of the other columns, and the
    batch's rows whose key it does not hold (both lazy).

    Raises:
        PipelineConfigError: the batch lacks a record-key or named column, or the target has no such column.
    """
    config = table.config
    keys = list(config.record_key)
    missing = [c for c in (*keys, *columns) if c not in batch.columns]
    if missing:
        raise PipelineConfigError(f"update_columns into {table.name}: the batch has no column(s) "
                                  f"{', '.join(missing)} (it needs the record key and the named columns)")
    partitions = None
    if config.partition_fields and all(f in batch.columns for f in config.partition_fields):
        named = batch.select(*config.partition_fields).select(partition_path_column(config).alias("p")).distinct()
        partitions = sorted(r["p"] for r in named.collect())
        logger.info("update_columns into %s: %d partition(s)", table.name, len(partitions))
    stored = without_meta(table.read(partitions=partitions))
    unknown = [c for c in columns if c not in stored.columns]
    if unknown and table.latest_instant() is not None:
        raise PipelineConfigError(f"update_columns into {table.name}: the table has no column(s) "
                                  f"{', '.join(unknown)}")
    changes = batch.select(*keys, *[F.col(f"`{c}`").alias(f"__lg_new_{c}") for c in columns])
    joined = stored.join(changes, on=keys, how="inner")
    completed = joined.select(*[F.col(f"`__lg_new_{c}`").cast(stored.schema[c].dataType).alias(c) if c in columns
                                else F.col(f"`{c}`") for c in stored.columns])
    absent = batch.join(stored.select(*keys), on=keys, how="left_anti")
    return completed, absent
