"""The quarantine table: rows a gate held back, with why, where they came from and whether they were replayed.

It is a tablecore table itself (copy-on-write, Hudi v6), so it is read, time-travelled and cleaned like any table.
One record per held-back row:

================  =================================================================================================
``qkey``          record key: ``<batch_id>:<hash of the row>:<occurrence>`` — the same row of the same batch always
                  gets the same key, so a rerun after a crash rewrites instead of duplicating.
``target``        the table the row was meant for; ``pipeline``: the pipeline, if any.
``batch_id``      the source position of the batch (or the gate run id for writes without a checkpoint).
``status``        ``quarantined`` (failed a quarantine-policy check), ``blocked`` (its whole batch was blocked and
                  parked so the pipeline could go on), ``replayed`` (re-submitted through the gate).
``check_name``    the first check the row failed; ``reason``: its reason; ``violations``: every failure (JSON).
``row_json``      the original row as JSON (the quarantine table's schema does not follow the target's).
``source_checkpoint``  the checkpoint of the batch (JSON), ``run_id``: the gate run.
``updated_at``    ordering field (ms since the epoch); ``replay_run`` / ``replay_outcome``: set by a replay.
================  =================================================================================================
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tablecore import Table, TableConfig, TableNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

OPEN_STATUSES = ("quarantined", "blocked")
"""Statuses a replay picks up."""

_COLUMNS = "qkey string, target string, pipeline string, batch_id string, status string, check_name string, " \
           "reason string, violations string, row_json string, source_checkpoint string, run_id string, " \
           "updated_at long, replay_run string, replay_outcome string"


def _column_names() -> list[str]:
    return [c.split()[0] for c in _COLUMNS.split(", ")]


def default_quarantine_path(target_path: str) -> str:
    """Where a table's quarantine table lives unless configured: a sibling folder ``<target>_quarantine``."""
    return target_path.rstrip("/") + "_quarantine"


class QuarantineTable:
    """A quarantine table at ``path`` (created on first use).

    Args:
        path: the table's location.
        spark: the session.
    """

    def __init__(self, path: str, spark: SparkSession) -> None:
        self.path = path
        self.spark = spark
        self._table: Table | None = None

    @property
    def table(self) -> Table:
        """The tablecore table (created, copy-on-write and non-partitioned, when it does not exist yet)."""
        if self._table is None:
            try:
                self._table = Table.open(self.path, spark=self.spark)
            except TableNotFoundError:
                name = Path(self.path.rstrip("/")).name.replace("-", "_").replace(".", "_") or "quarantine"
                self._table = Table.create(self.path, TableConfig(name=name, record_key=["qkey"],
                                                                  ordering_field="updated_at"), spark=self.spark)
                logger.info("created quarantine table %s", self.path)
        return self._table

    def exists(self) -> bool:
        """Whether the table exists on storage."""
        if self._table is not None:
            return True
        try:
            self._table = Table.open(self.path, spark=self.spark)
        except TableNotFoundError:
            return False
        return True

    def records(self, frame: DataFrame, *, original_columns: list[str], target: str, pipeline: str | None,
                batch_id: str, status: str, checkpoint: dict[str, Any] | None, run_id: str,
                check: Column | None = None, reason: Column | None = None,
                violations: Column | None = None) -> DataFrame:
        """Quarantine records for the rows of ``frame`` (lazy). ``check``/``reason``/``violations`` default to the
        columns ``check``, ``reason``, ``violations`` that :meth:`validators.Suite.split` adds."""
        row_json = F.to_json(F.struct(*[F.col(f"`{c}`") for c in original_columns]))
        with_json = frame.select(
            (check if check is not None else F.col("check")).cast("string").alias("check_name"),
            (reason if reason is not None else F.col("reason")).cast("string").alias("reason"),
            (violations if violations is not None else F.to_json(F.col("violations"))).alias("violations"),
            row_json.alias("row_json"))
        digest = F.sha2(F.col("row_json"), 256).substr(1, 24)
        occurrence = F.row_number().over(Window.partitionBy("_lg_digest").orderBy("check_name", "reason"))
        keyed = with_json.withColumn("_lg_digest", digest).withColumn("_lg_occ", occurrence)
        return keyed.select(
            F.concat_ws(":", F.lit(batch_id), F.col("_lg_digest"), F.col("_lg_occ").cast("string")).alias("qkey"),
            F.lit(target).alias("target"), F.lit(pipeline).cast("string").alias("pipeline"),
            F.lit(batch_id).alias("batch_id"), F.lit(status).alias("status"), "check_name", "reason", "violations",
            "row_json", F.lit(json.dumps(checkpoint, sort_keys=True) if checkpoint else None).cast("string")
            .alias("source_checkpoint"), F.lit(run_id).alias("run_id"),
            F.lit(int(time.time() * 1000)).cast("long").alias("updated_at"),
            F.lit(None).cast("string").alias("replay_run"), F.lit(None).cast("string").alias("replay_outcome"))

    def write(self, records: DataFrame) -> tuple[str, int]:
        """Upsert quarantine records (idempotent by ``qkey``); returns (instant, records written)."""
        result = self.table.upsert(records)
        return result.instant, result.inserted + result.updated

    def read(self, *, target: str | None = None, statuses: tuple[str, ...] | None = None) -> DataFrame:
        """The quarantine records (lazy), optionally of one target and some statuses; empty before the first write."""
        if not self.exists():
            return self.spark.createDataFrame([], _COLUMNS)
        df = self.table.read().select(*_column_names())
        if target is not None:
            df = df.where(F.col("target") == target)
        if statuses is not None:
            df = df.where(F.col("status").isin(*statuses))
        return df

    def pick(self, target: str, where: str | None = None) -> DataFrame:
        """The open records of ``target`` (``quarantined`` or ``blocked``), optionally those matching the SQL
        condition ``where`` over the quarantine columns, persisted: the caller unpersists them."""
        picked = self.read(target=target, statuses=OPEN_STATUSES)
        if where:
            picked = picked.where(F.expr(where))
        return picked.persist()

    def mark(self, records: DataFrame, *, replay_run: str, outcome: Column) -> int:
        """Set ``status = replayed`` with ``replay_run`` and ``replay_outcome`` on ``records`` (quarantine rows with
        every column); returns how many were updated."""
        if records.isEmpty():
            return 0
        marked = records.withColumn("status", F.lit("replayed")) \
            .withColumn("replay_run", F.lit(replay_run)) \
            .withColumn("replay_outcome", outcome.cast("string")) \
            .withColumn("updated_at", F.lit(int(time.time() * 1000)).cast("long")) \
            .select(*_column_names())
        result = self.table.upsert(marked)
        return result.updated + result.inserted
