"""Changelog tables: what a pipeline with ``changelog:`` writes, and the fold that merges a key's events.

An upstream table's changelog (a Kafka topic of change events) becomes two lake tables in one run
(:class:`~governance.changelog_writer.ChangelogWriter` writes them):

- the **history table**: every event once, append-only (record key: the event's Kafka coordinates), with its header
  columns and, in ``_merged_<field>`` columns, the partition the key has in the merged table — the history table is
  partitioned by them, so the two tables join on one partition instead of a full scan;
- the **merged snapshot table** (the pipeline's ``target``): the latest merged row per key, every column.

**The merge is exact and independent of how events were batched.** A key's events are ordered by
``(ordering field, topic, partition, offset)``; the events after its last delete are its *live run* (none: the key
is deleted). In partial-row mode (the default) the merged row takes, per column, the last non-null value of the live
run (a changelog cannot set a column to null; Hudi's ``PartialUpdateAvroPayload`` has the same rule); in full-row
mode it is the last event of the run. A key whose partition fields are still null (an update that arrived before
its insert) waits, in the history table, for the event that gives it its partition.

For each batch the keys it touches are folded again from their whole history — the history table's rows of those
keys (read from their partitions only, plus the default partition) and the batch — so out-of-order and duplicate
events resolve by the ordering field whatever batch they arrive in. A key keeps its partition while it exists in the
merged table (a value in another partition is refused).
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from governance.kafka_tasks import COORDINATES
from tablecore import TableConfig

__all__ = ["BATCH_KEY", "ChangelogSpec", "HistorySpec", "fold", "history_config", "merged_partition_columns"]

logger = logging.getLogger(__name__)

BATCH_KEY = "lakegate.changelog.batch"
"""``extraMetadata`` key naming the changelog batch a commit belongs to (the same in both tables' commits)."""

DELETE_FLAG = "_lg_deleted"
"""The boolean column the fold reads deletes from (derived from the changelog's delete field)."""

_SORT = "_lg_sort"


class HistorySpec(BaseModel):
    """The history table of a changelog pipeline.

    Attributes:
        path: its location (relative paths resolve against the pipeline file's folder).
        name: its name (default: the merged table's name with ``_history``).
        table_type: ``COPY_ON_WRITE`` (default) or ``MERGE_ON_READ``.
        subject: its registry subject (default ``<name>-value``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    name: str | None = None
    table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"] = "COPY_ON_WRITE"
    subject: str | None = None


class ChangelogSpec(BaseModel):
    """``changelog:`` of a pipeline: write the history table and the merged snapshot table (the target) from one
    changelog (see the module docstring). The target's ``record_key`` are the key fields and its
    ``ordering_field`` orders a key's events.

    Attributes:
        history: the history table.
        delete_field: the field marking a delete (None: the changelog has no deletes).
        delete_values: values of ``delete_field`` that mean a delete (compared as text, case-insensitively; a boolean
            field is a delete when true).
        partial: partial-row changelogs (events carry only the changed columns; a null means "unchanged").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    history: HistorySpec
    delete_field: str | None = None
    delete_values: list[str] = Field(default_factory=lambda: ["d", "delete", "true"])
    partial: bool = True

    def delete_flag(self, df: DataFrame) -> Column:
        """Whether each row of ``df`` is a delete."""
        if self.delete_field is None:
            return F.lit(False)
        values = [v.lower() for v in self.delete_values]
        return F.coalesce(F.lower(F.col(f"`{self.delete_field}`").cast("string")).isin(values), F.lit(False))


def merged_partition_columns(target: TableConfig) -> list[str]:
    """The history table's columns holding the key's partition in the merged table: ``_merged_<field>``."""
    return [f"_merged_{f}" for f in target.partition_fields]


def history_config(target: TableConfig, spec: HistorySpec) -> TableConfig:
    """The history table's configuration: keyed by the Kafka coordinates, partitioned by the merged partition."""
    return TableConfig(name=spec.name or f"{target.name}_history", record_key=COORDINATES[:3],
                       partition_fields=tuple(merged_partition_columns(target)), table_type=spec.table_type,
                       hive_style_partitioning=target.hive_style_partitioning,
                       url_encode_partitions=target.url_encode_partitions, table_version=target.table_version)


def _sort_key(ordering: str) -> Column:
    """The order of a key's events: (ordering field, topic, partition, offset)."""
    return F.struct(F.col(f"`{ordering}`"), *[F.col(c) for c in COORDINATES[:3]])


def fold(events: DataFrame, *, keys: list[str], ordering: str, columns: list[str], partial: bool) -> DataFrame:
    """The merged row of every key of ``events`` that has a live run (see the module docstring).

    Args:
        events: a key's whole history (no duplicates), with :data:`DELETE_FLAG` and the Kafka coordinates.
        keys: the record key fields.
        ordering: the ordering field.
        columns: the merged columns to fold (not the keys).
        partial: partial-row mode.

    Returns:
        ``keys`` + ``columns`` + ``_lg_max_ordering`` (the key's newest ordering value over all its events, the
        ordering of a delete row) for keys with a live run; keys whose events end with a delete are absent.
    """
    sort = _sort_key(ordering)
    by_key = Window.partitionBy(*[F.col(f"`{k}`") for k in keys])
    ranked = (events.withColumn(_SORT, sort)
              .withColumn("_lg_last_delete", F.max(F.when(F.col(DELETE_FLAG), F.col(_SORT))).over(by_key)))
    live = ranked.where(F.col("_lg_last_delete").isNull() | (F.col(_SORT) > F.col("_lg_last_delete")))

    def last(c: str) -> Column:
        value = F.col(f"`{c}`")
        order = F.when(value.isNotNull(), F.col(_SORT)) if partial else F.col(_SORT)
        return F.max_by(value, order).alias(c)

    return live.groupBy(*[F.col(f"`{k}`") for k in keys]).agg(*[last(c) for c in columns])


def last_values(events: DataFrame, *, keys: list[str], ordering: str, columns: list[str]) -> DataFrame:
    """Per key of ``events``: the last non-null value of each of ``columns`` (by the fold's order) and the newest
    ordering value (``_lg_max_ordering``)."""
    sort = _sort_key(ordering)
    aggs = [F.max_by(F.col(f"`{c}`"), F.when(F.col(f"`{c}`").isNotNull(), sort)).alias(c) for c in columns]
    return events.groupBy(*[F.col(f"`{k}`") for k in keys]).agg(
        *aggs, F.max(F.col(f"`{ordering}`")).alias("_lg_max_ordering"))
