"""The two-table write of a changelog pipeline: each batch of events goes through the gates of the history table and
of the merged snapshot table, and both publish or neither does (see :mod:`governance.changelog` for the tables and
the fold).

One batch:

1. each event gets the partition its key has in the merged table (the stored row's, else the batch's);
2. the **history gate** audits the events (the quarantine split holds back failing events, with their Kafka
   coordinates, before either table sees them) and stages them (insert);
3. the keys the passing events touch are folded again from their whole history — their rows in the history table
   (their partitions only) and the batch — and the **merged gate** audits and stages the merged rows (upsert; a key
   whose events end with a delete is deleted);
4. if either audit blocks, both staged instants are aborted (``on_block: skip`` parks the events in the history
   table's quarantine and commits only the checkpoint to both tables); otherwise history publishes, then merged.

Both commits carry the source checkpoint and the batch's id (:data:`~governance.changelog.BATCH_KEY`). A run killed
between the two publishes leaves the history table one batch ahead: :meth:`ChangelogWriter.recover` aborts staged
instants and folds the history commits the merged table lacks into it before the next batch, so a rerun never
duplicates or loses an event.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import operator
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructType

from governance.audit import AuditRecord, Decision
from governance.changelog import (
    BATCH_KEY,
    DELETE_FLAG,
    ChangelogSpec,
    fold,
    history_config,
    last_values,
    merged_partition_columns,
)
from governance.checkpoint import read_checkpoint
from governance.errors import GovernanceError
from governance.gate import AuditedWrite, Gate
from governance.kafka_tasks import COORDINATES
from governance.schema_gate import CONTROL_COLUMNS
from governance.source_batch import PartitionLag, without_meta
from schema_registry.errors import SubjectNotFoundError
from tablecore import Operation, Table, TableConfig, TableNotFoundError
from tablecore.format.avro_schema import arrow_to_avro
from tablecore.spark.keys import partition_path_column
from tablecore.spark.schema import spark_to_arrow

if TYPE_CHECKING:
    from schema_registry import RegistryClient

logger = logging.getLogger(__name__)

_DELETED = CONTROL_COLUMNS[0]


@dataclass(frozen=True)
class ChangelogRecords:
    """The gate records of one changelog batch: ``history`` and ``merged`` (the merged one is None when the history
    gate stopped the batch before the merged rows were staged)."""

    history: AuditRecord
    merged: AuditRecord | None

    @property
    def primary(self) -> AuditRecord:
        """The record that tells the batch's outcome: the history record when its gate held events back or stopped
        the batch, else the merged record."""
        if self.merged is None or self.history.decision != Decision.PUBLISHED:
            return self.history
        return self.merged

    @property
    def decision(self) -> Decision:
        """The batch's outcome (:attr:`primary`'s decision)."""
        return self.primary.decision


class ChangelogWriter:
    """Writes changelog batches into a history table and a merged snapshot table (see the module docstring).

    Args:
        spec: the pipeline's ``changelog:``.
        pipeline: the pipeline's name (checkpoints, recovery).
        merged_gate: the gate of the merged table (the pipeline's target).
        history_gate: builds the gate of the history table, given the table.
        history_path: the history table's location (created on first use).
    """

    def __init__(self, spec: ChangelogSpec, pipeline: str, merged_gate: Gate,
                 history_gate: Callable[[Table], Gate], history_path: str) -> None:
        self.spec = spec
        self.pipeline = pipeline
        self.merged_gate = merged_gate
        self.merged = merged_gate.table
        config = self.merged.config
        if not config.ordering_field:
            raise GovernanceError(f"changelog pipeline {pipeline}: the target needs an ordering_field (the event's "
                                  "version or timestamp)")
        self.keys = list(config.record_key)
        self.ordering = config.ordering_field
        self.partition_fields = list(config.partition_fields)
        self.merged_parts = merged_partition_columns(config)
        self.history_cfg = history_config(config, spec.history)
        try:
            self.history = Table.open(history_path, spark=self.merged.spark)
        except TableNotFoundError:
            self.history = Table.create(history_path, self.history_cfg, spark=self.merged.spark)
            logger.info("created changelog history table %s at %s", self.history.name, history_path)
        self.history_gate = history_gate(self.history)

    # --- subjects ---------------------------------------------------------------------------------------------------
    def seed_subjects(self, registry: RegistryClient | None, source_schema: Mapping[str, Any] | None,
                      events: StructType) -> None:
        """Register the first schema of each table's subject, when it has none, from the changelog's schema: its
        fields keep their attributes (``semanticType``, ``doc``), so the registry's checks of both gates apply the
        changelog's semantic types; the columns the tables add (headers, coordinates) are nullable."""
        if registry is None or source_schema is None:
            return
        history_cols = StructType([*events.fields, *self._part_fields(events)])
        merged_cols = StructType([f for f in events.fields if f.name in self._merged_columns(events.fieldNames())])
        for gate, columns in ((self.history_gate, history_cols), (self.merged_gate, merged_cols)):
            if gate.subject is None:
                continue
            try:
                registry.latest(gate.subject)
                continue
            except SubjectNotFoundError:
                pass
            derived = arrow_to_avro(spark_to_arrow(columns), gate.table.name)
            given = {f["name"]: f for f in source_schema.get("fields", [])}
            fields = [given[f["name"]] if f["name"] in given and _nullable_match(given[f["name"]], f) else f
                      for f in derived["fields"]]
            schema = {**derived, "fields": fields}
            registered = registry.register(gate.subject, json.dumps(schema))
            logger.info("registered the first schema of %s from the changelog's schema (id %d)", gate.subject,
                        registered.id)

    def _part_fields(self, events: StructType) -> list[Any]:
        from pyspark.sql.types import StructField

        return [StructField(m, events[f].dataType, True) for f, m in zip(self.partition_fields, self.merged_parts,
                                                                          strict=True)]

    def _merged_columns(self, columns: list[str]) -> list[str]:
        """The merged table's columns of an event frame: all but the delete field, the coordinates and the
        history's own columns."""
        drop = {*COORDINATES, *self.merged_parts, DELETE_FLAG, _DELETED}
        if self.spec.delete_field:
            drop.add(self.spec.delete_field)
        return [c for c in columns if c not in drop and not c.startswith("_hoodie_")]

    # --- one batch --------------------------------------------------------------------------------------------------
    def write_batch(self, events: DataFrame, *, checkpoint: Any, batch_id: str,
                    lag: tuple[PartitionLag, ...] | None = None, dedupe: bool = False) -> ChangelogRecords:
        """Write one batch of events into both tables (see the module docstring).

        Args:
            events: the events: the changelog's columns, header columns and the Kafka coordinates.
            checkpoint: the source position both commits carry (None: a replay, which moves no checkpoint).
            batch_id: the batch's id (both commits carry it).
            lag: the source's lag, recorded with both audits.
            dedupe: drop events the history table already holds (a replay run again after a crash).
        """
        needed = (*self.keys, self.ordering, *self.partition_fields, *COORDINATES[:3],
                  *([self.spec.delete_field] if self.spec.delete_field else []))
        missing = [c for c in needed if c not in events.columns]
        if missing:
            raise GovernanceError(f"changelog pipeline {self.pipeline}: the events lack column(s) "
                                  f"{', '.join(missing)}")
        # the events are read once (from Kafka, for a pipeline): the split, both tables and the fold use them
        events = events.drop(*[c for c in self.merged_parts if c in events.columns]) \
            .persist(StorageLevel.MEMORY_AND_DISK)
        keys = events.select(*self.keys).distinct()
        # the merged table's rows of the batch's keys, read once for the batch (placing keys, folding, deleting)
        stored = self._stored(keys)
        try:
            return self._write(events, keys, stored, checkpoint=checkpoint, batch_id=batch_id, lag=lag,
                               dedupe=dedupe)
        finally:
            if stored is not None:
                stored.unpersist()
            events.unpersist()

    def _write(self, events: DataFrame, keys: DataFrame, stored: DataFrame | None, *, checkpoint: Any,
               batch_id: str, lag: tuple[PartitionLag, ...] | None, dedupe: bool) -> ChangelogRecords:
        key_parts = self._key_partitions(events, keys, stored)
        rows = events.join(key_parts, on=self.keys, how="left")
        if dedupe and self.history.latest_instant() is not None:
            held = self.history.read().select(*COORDINATES[:3])
            rows = rows.join(held, on=list(COORDINATES[:3]), how="left_anti")
        extra = {BATCH_KEY: batch_id}
        h = self.history_gate.audit(rows, operation=Operation.INSERT, checkpoint=checkpoint, batch_id=batch_id,
                                    extra_metadata=extra, lag=lag)
        if isinstance(h, AuditRecord):  # the schema was refused: nothing was staged
            return ChangelogRecords(h, self._checkpoint_only(h, checkpoint, extra, events))
        if h.blocked:
            record = h.block()
            return ChangelogRecords(record, self._checkpoint_only(record, checkpoint, extra, events))
        try:
            merged_rows = self._merged_rows(h.passing, keys, key_parts, stored)
            m = self.merged_gate.audit(merged_rows, operation=Operation.UPSERT, checkpoint=checkpoint,
                                       batch_id=batch_id, extra_metadata=extra, lag=lag, split=False)
        except BaseException:
            h.staged.abort()
            raise
        if isinstance(m, AuditRecord) or m.blocked:
            merged_record = m if isinstance(m, AuditRecord) else m.block(park=False)
            return ChangelogRecords(h.block(), merged_record)
        return self._publish(h, m)

    def _publish(self, h: AuditedWrite, m: AuditedWrite) -> ChangelogRecords:
        try:
            history_record = h.publish()
        except BaseException:
            m.staged.abort()
            raise
        return ChangelogRecords(history_record, m.publish())

    def _checkpoint_only(self, history_record: AuditRecord, checkpoint: Any, extra: dict[str, str],
                         events: DataFrame) -> AuditRecord | None:
        """After the history gate skipped a batch (its checkpoint committed without data), the merged table
        commits the same checkpoint without data, so both resume after it."""
        if history_record.decision != Decision.SKIPPED or checkpoint is None:
            return None
        from governance.checkpoint import checkpoint_metadata

        columns = self._merged_columns(events.columns)
        empty = events.select(*[F.col(f"`{c}`") for c in columns]).limit(0)
        done = self.merged.upsert(empty, extra_metadata={**extra, **checkpoint_metadata(self.pipeline, checkpoint)})
        return history_record.model_copy(update={"table": self.merged.name, "table_path": self.merged.uri,
                                                 "instant": done.instant})

    # --- the fold ---------------------------------------------------------------------------------------------------
    def _stored(self, keys: DataFrame) -> DataFrame | None:
        """The merged table's rows of ``keys``: the keys with ``_lg_exists`` and their partition values
        ``_lg_s_<field>``, persisted for the batch (None before the table's first write)."""
        if self.merged.latest_instant() is None or self.merged.schema() is None:
            return None
        rows = self.merged.read().select(*self.keys, F.lit(True).alias("_lg_exists"),
                                         *[F.col(f).alias(f"_lg_s_{f}") for f in self.partition_fields])
        return rows.join(keys, on=self.keys, how="left_semi").persist()

    def _key_partitions(self, events: DataFrame, keys: DataFrame, stored: DataFrame | None) -> DataFrame:
        """Per key of ``events``: ``_merged_<field>`` = the partition the key has in the merged table (the stored
        row's), else the newest non-null one of the batch."""
        batch = last_values(events, keys=self.keys, ordering=self.ordering, columns=self.partition_fields)
        joined = keys.join(batch, on=self.keys, how="left")
        if stored is None:
            return joined.select(*self.keys, *[F.col(f).alias(m) for f, m in zip(self.partition_fields,
                                                                                 self.merged_parts, strict=True)])
        joined = joined.join(stored, on=self.keys, how="left")
        return joined.select(*self.keys, *[F.coalesce(F.col(f"_lg_s_{f}"), F.col(f)).alias(m)
                                           for f, m in zip(self.partition_fields, self.merged_parts, strict=True)])

    def _history_of(self, keys: DataFrame, key_parts: DataFrame) -> DataFrame | None:
        """The history table's events of ``keys`` (None before its first write): only the partitions the keys have
        and the default partition, unless a key's partition is unknown (then every partition)."""
        if self.history.latest_instant() is None:
            return None
        partitions: list[str] | None = None
        if self.merged_parts:
            unknown = functools.reduce(operator.or_, [F.col(m).isNull() for m in self.merged_parts])
            paths = key_parts.select(partition_path_column(self.history_cfg).alias("p"), unknown.alias("unknown")) \
                .distinct().collect()  # partition names, not table data
            if not any(r["unknown"] for r in paths):
                partitions = sorted({r["p"] for r in paths} | {_default_path(self.history_cfg)})
        held = without_meta(self.history.read(partitions=partitions))
        return held.join(keys, on=self.keys, how="left_semi")

    def _merged_rows(self, passing: DataFrame, keys: DataFrame, key_parts: DataFrame,
                     stored: DataFrame | None) -> DataFrame:
        """The merged table's upserts and deletes for ``keys``, folded from their history and ``passing``."""
        batch = passing.drop(*[c for c in passing.columns if c.startswith("_hoodie_")])
        held = self._history_of(keys, key_parts)
        every = batch if held is None else held.unionByName(batch, allowMissingColumns=True)
        every = every.dropDuplicates(list(COORDINATES[:3]))
        every = every.withColumn(DELETE_FLAG, self.spec.delete_flag(every))
        columns = [c for c in self._merged_columns(every.columns) if c not in self.keys]
        folded = fold(every, keys=self.keys, ordering=self.ordering, columns=columns, partial=self.spec.partial)
        newest = every.groupBy(*self.keys).agg(F.max(F.col(f"`{self.ordering}`")).alias("_lg_newest"))
        out = keys.join(folded.withColumn("_lg_live", F.lit(True)), on=self.keys, how="left") \
            .join(newest, on=self.keys, how="left")
        if stored is not None:
            out = out.join(stored, on=self.keys, how="left")
        placed = F.lit(True)
        for f in self.partition_fields:
            placed = placed & F.col(f).isNotNull()
        live = F.coalesce(F.col("_lg_live"), F.lit(False)) & placed
        exists = F.lit(False) if stored is None else F.coalesce(F.col("_lg_exists"), F.lit(False))
        moved = F.lit(False)
        if stored is not None:
            for f in self.partition_fields:
                moved = moved | (F.col(f"_lg_s_{f}").isNotNull() & (F.col(f"_lg_s_{f}") != F.col(f)))
        key_text = F.concat_ws(",", *[F.col(k).cast("string") for k in self.keys])
        guard = F.when(live & moved, F.raise_error(F.concat(
            F.lit(f"changelog pipeline {self.pipeline}: key "), key_text,
            F.lit(" would move to another partition of the merged table; a key keeps its partition while it exists")))
        ).otherwise(F.lit(False)).cast(BooleanType())
        upserts = out.where(live).select(*self.keys, *[F.col(c) for c in columns], guard.alias(_DELETED))
        if stored is None:
            return upserts
        deletes = out.where(~live & exists).select(
            *self.keys, *[(F.col(f"_lg_s_{c}") if c in self.partition_fields else
                           F.col("_lg_newest") if c == self.ordering else F.lit(None)).cast(
                folded.schema[c].dataType).alias(c) for c in columns], F.lit(True).alias(_DELETED))
        return upserts.unionByName(deletes)

    # --- recovery ---------------------------------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Abort staged instants of this pipeline in both tables and fold the history commits the merged table
        lacks into it (a run killed between the two publishes). Returns what it did, one line each."""
        done = []
        for table in (self.history, self.merged):
            for staged in table.staged():
                meta = staged.metadata.extra_metadata
                found = read_checkpoint(meta, f"staged instant {staged.instant}")
                if meta.get(BATCH_KEY) is not None or (found is not None and found[0] == self.pipeline):
                    staged.abort()
                    done.append(f"aborted staged instant {staged.instant} of {table.name}")
        missing = self._missing_batches()
        if missing:
            done.append(self._catch_up(missing))
        for line in done:
            logger.warning("changelog pipeline %s: %s", self.pipeline, line)
        return done

    def _missing_batches(self) -> list[tuple[str, str, Any]]:
        """(instant, batch id, checkpoint) of the history commits newer than the merged table's newest batch,
        oldest first."""
        newest = next((meta.extra_metadata[BATCH_KEY] for _, meta in self.merged.commit_history()
                       if meta.extra_metadata.get(BATCH_KEY)), None)
        missing = []
        for instant, meta in self.history.commit_history():
            batch = meta.extra_metadata.get(BATCH_KEY)
            if batch is None:
                continue
            if batch == newest:
                break
            found = read_checkpoint(meta.extra_metadata, f"commit {instant} of {self.history.name}")
            missing.append((instant, batch, found[1] if found is not None and found[0] == self.pipeline else None))
        return missing[::-1]

    def _catch_up(self, missing: list[tuple[str, str, Any]]) -> str:
        """Fold the events of the history commits ``missing`` into the merged table, in one write."""
        wanted = {instant for instant, _, _ in missing}
        events = without_meta(self.history.read().where(F.col("_hoodie_commit_time").isin(*sorted(wanted))))
        keys = events.select(*self.keys).distinct()
        stored = self._stored(keys)
        try:
            merged_rows = self._merged_rows(events, keys, self._key_partitions(events, keys, stored), stored)
            checkpoint = next((c for _, _, c in reversed(missing) if c is not None), None)
            record = self.merged_gate.write(merged_rows, operation=Operation.UPSERT, checkpoint=checkpoint,
                                            batch_id=missing[-1][1], extra_metadata={BATCH_KEY: missing[-1][1]})
        finally:
            if stored is not None:
                stored.unpersist()
        if record.decision not in (Decision.PUBLISHED, Decision.QUARANTINED):
            raise GovernanceError(f"changelog pipeline {self.pipeline}: catching the merged table up with history "
                                  f"commit(s) {', '.join(sorted(wanted))} was {record.decision.value}; see "
                                  f"{record.report}")
        return f"folded history commit(s) {', '.join(sorted(wanted))} into {self.merged.name} ({record.instant})"

    # --- replay -----------------------------------------------------------------------------------------------------
    def replay(self, *, where: str | None = None, assignments: Mapping[str, str] | None = None) \
            -> tuple[int, ChangelogRecords | None]:
        """Re-submit the history table's open quarantine records (optionally those matching the SQL ``where``, with
        ``assignments`` applied per column) through both gates as one batch; marks them ``replayed``. Events the
        history table already holds are not written again (a replay killed after its publish). Returns (records
        picked, the batch's records)."""
        quarantine = self.history_gate.quarantine
        picked = quarantine.pick(self.history.name, where)
        try:
            n = picked.count()
            if n == 0:
                return 0, None
            schema = self.history.schema()
            if schema is None:
                raise GovernanceError(f"history table {self.history.name} has no schema yet: nothing to replay into")
            events = picked.select(F.from_json("row_json", schema).alias("_lg_row")).select("_lg_row.*")
            for column, expression in (assignments or {}).items():
                if column not in schema.fieldNames():
                    raise GovernanceError(f"cannot set {column!r}: the events have no such column")
                events = events.withColumn(column, F.expr(expression).cast(schema[column].dataType))
            run = f"replay-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
            records = self.write_batch(events, checkpoint=None, batch_id=run, dedupe=True)
            if records.decision in (Decision.PUBLISHED, Decision.QUARANTINED):
                quarantine.mark(picked, replay_run=run, outcome=F.lit(records.decision.value))
            return n, records
        finally:
            picked.unpersist()


def _default_path(config: TableConfig) -> str:
    from tablecore.format.record_keys import DEFAULT_PARTITION

    segments = [f"{f}={DEFAULT_PARTITION}" if config.hive_style_partitioning else DEFAULT_PARTITION
                for f in config.partition_fields]
    return "/".join(segments)


def _nullable_match(given: Mapping[str, Any], derived: Mapping[str, Any]) -> bool:
    """Whether the changelog's field definition can stand for the derived one (same type, nullable or not)."""
    def core(t: Any) -> Any:
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            return rest[0] if len(rest) == 1 else rest
        return t
    return json.dumps(core(given.get("type")), sort_keys=True) == json.dumps(core(derived.get("type")),
                                                                               sort_keys=True)
