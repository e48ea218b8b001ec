"""The Spark write path (DESIGN §2.3): prepare -> tag (index) -> plan -> write (executors); the commit (driver) is
the transaction's (:func:`tablecore.transaction.write_batch`).

Spark jobs per write: one aggregate over the batch (validation and per-partition counts), one index join (simple
index, affected partitions only), a count of inserts per partition when the batch's size does not settle where they
go (see :meth:`SparkWriter._plan_untagged`; never for a delete), and the write itself, grouped by file group with
``mapInArrow`` over rows hash-partitioned and sorted by file group. Only counts and write stats reach the driver.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel, TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from pyspark.sql.window import Window

from tablecore.config import TableConfig
from tablecore.engine import Operation, RowObserver, WritePart
from tablecore.exceptions import InvalidInputError
from tablecore.format.avro_schema import META_FIELDS
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_integrity import check_bases, check_slices
from tablecore.format.file_naming import bucket_of_file_id, new_file_id, write_token
from tablecore.format.file_view import (
    BaseFile,
    FileSlice,
    TableFiles,
    latest_base_files,
    latest_file_slices,
)
from tablecore.format.instant import Action
from tablecore.format.table_schema import table_arrow_schema
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO
from tablecore.metadata_table import record_index_in_use, table_files
from tablecore.read_planning import written_files
from tablecore.record_index import index_view
from tablecore.spark.bloom_index import located_by_bloom
from tablecore.spark.jvm import default_parallelism, recompute_is_cheap
from tablecore.spark.key_liveness import live_locations
from tablecore.spark.keys import bucket_ids, invalid_key_condition, partition_path_column, record_key_column
from tablecore.spark.reader import scan_keys
from tablecore.spark.record_index import NEW, locate, located_partitions, tag_located, write_index
from tablecore.spark.schema import spark_to_arrow
from tablecore.spark.task_errors import task_errors
from tablecore.tasks import write as ex
from tablecore.tasks.slice_write import write_group
from tablecore.write_planning import (
    PlannedFiles,
    check_columns,
    insert_buckets,
    log_plans,
    lookup_deletes,
    refuse_invalid_keys,
    slice_reads,
    target_schema,
    timeline_position,
    write_job,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tablecore.tasks.mor import SliceJob

logger = logging.getLogger(__name__)

BROADCAST_MAX_ROWS = 2_000_000
WRITE_TASKS_PER_CORE = 4
BATCH_CACHE = StorageLevel.DISK_ONLY


@dataclass
class SparkPlannedWrite(PlannedFiles):
    """A batch planned by :class:`SparkWriter` (see :class:`tablecore.engine.PlannedWrite`): every row assigned to a
    file group, nothing written yet."""

    writer: SparkWriter
    assigned: DataFrame
    observer: RowObserver | None
    cached: list[DataFrame]
    index_groups: int | None = None  # the record index's file groups, when the table has one to keep

    def write(self, instant: str) -> list[WriteStat]:
        """Run the write job: the files of every planned group, as ``instant``; then the record index's log files
        of the instant, if the table has the index."""
        with task_errors():
            stats = self.writer._run_write_job(self.assigned, self.plans, instant, self.table_avro, self.target,
                                               sort_inserts=self.operation is Operation.BULK_INSERT,
                                               observer=self.observer)
        if self.index_groups is not None and stats:
            write_index(self.writer.spark, self.writer.io, self.assigned, instant, self.index_groups)
        return stats

    def close(self) -> None:
        """Unpersist the cached batch."""
        for c in self.cached:
            c.unpersist()
        self.cached.clear()


class SparkWriter:
    """Plans and writes one batch into a table (the instant is the transaction's)."""

    def __init__(self, spark: SparkSession, io: FileIO, config: TableConfig) -> None:
        self.spark = spark
        self.io = io
        self.config = config
        self.mor = config.table_type == "MERGE_ON_READ"
        self._log_groups: set[str] = set()  # merge-on-read groups whose latest slice has logs (no small files)

    # ---- step 1: prepare ----------------------------------------------------------------------------------------
    def _target_schema(self, df: DataFrame, current_s: str | None) -> tuple[dict[str, Any], pa.Schema]:
        data_cols = [c for c in df.columns if c not in META_FIELDS]
        incoming_arrow = spark_to_arrow(df.select(*[F.col(f"`{c}`") for c in data_cols]).schema)
        return target_schema(incoming_arrow, current_s, self.config.name)

    def _prepare(self, df: DataFrame, operation: Operation) -> DataFrame:
        cfg = self.config
        data_cols = [F.col(f"`{c}`") for c in df.columns if c not in META_FIELDS]
        op = F.lit("D" if operation is Operation.DELETE else "U")
        ordering = F.col(f"`{cfg.ordering_field}`") if cfg.ordering_field and cfg.ordering_field in df.columns \
            else F.lit(None)
        out = df.select(
            *data_cols,
            record_key_column(cfg).alias(ex.KEY),
            partition_path_column(cfg).alias(ex.PART),
            op.alias(ex.OP),
            ordering.alias(ex.ORD),
            invalid_key_condition(cfg).alias("_lg_bad_key"),
        )
        return out

    def _prepare_parts(self, parts: Sequence[WritePart]) -> DataFrame:
        """One prepared frame of every part; with several parts, only the rows of the last part that holds a key
        stay (a transaction's later call wins: ``upsert`` then ``delete`` deletes)."""
        if len(parts) == 1:
            return self._prepare(parts[0].frame, parts[0].operation)
        frames = [self._prepare(p.frame, p.operation).withColumn("_lg_call", F.lit(i)) for i, p in enumerate(parts)]
        united = frames[0]
        for f in frames[1:]:
            united = united.unionByName(f, allowMissingColumns=True)
        latest = F.max("_lg_call").over(Window.partitionBy(ex.KEY, ex.PART))
        return united.withColumn("_lg_last", latest).where(F.col("_lg_call") == F.col("_lg_last")) \
            .drop("_lg_call", "_lg_last")

    # ---- steps 1-3: the plan ------------------------------------------------------------------------------------
    def plan(self, timeline: Timeline, parts: Sequence[WritePart], operation: Operation) -> SparkPlannedWrite:
        """Validate, deduplicate, tag and plan ``parts`` as one write of ``operation``; nothing is written."""
        cfg = self.config
        for p in parts:
            check_columns(p.frame.columns, self.config, p.operation)
        current_s = timeline.latest_schema() or cfg.create_schema
        writes = [p.frame for p in parts if p.operation is not Operation.DELETE]
        if not writes:
            if current_s is None:
                raise InvalidInputError("cannot delete from a table that has no data yet")
            table_avro = json.loads(current_s)
            target = table_arrow_schema(table_avro, with_meta=False)
        else:
            schema_df = writes[0]
            for w in writes[1:]:
                schema_df = schema_df.unionByName(w, allowMissingColumns=True)
            table_avro, target = self._target_schema(schema_df, current_s)

        # The batch is read by several jobs (validation, index, write) and must be the same rows each time: unless it
        # is a plain deterministic scan (files, local rows), it is cached — on local disk, not in memory: a large
        # batch (a 5M-row bulk insert) must not need a large executor heap.
        prepared = self._prepare_parts(parts)
        if not recompute_is_cheap(prepared):
            prepared = prepared.persist(BATCH_CACHE)
        cached = [prepared]  # every DataFrame persisted for this write, unpersisted by close()
        observers = [p.observer for p in parts if p.observer is not None and p.operation is not Operation.DELETE]
        observer = observers[0] if len(observers) == 1 else None
        if len(observers) > 1:
            raise InvalidInputError("a transaction takes one row observer")
        try:
            return self._plan_prepared(prepared, operation, timeline, table_avro, target, cached, observer,
                                       mixed=len(parts) > 1)
        except BaseException:
            for c in cached:
                c.unpersist()
            raise

    def _plan_prepared(self, prepared: DataFrame, operation: Operation, timeline: Timeline,
                       table_avro: dict[str, Any], target: pa.Schema, cached: list[DataFrame],
                       observer: RowObserver | None, *, mixed: bool) -> SparkPlannedWrite:
        cfg = self.config
        # job 1: validation and per-partition counts
        stats_rows = (prepared.groupBy(ex.PART)
                      .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("_lg_bad_key").cast("long")).alias("bad"))
                      .collect())
        refuse_invalid_keys(sum(int(r["bad"] or 0) for r in stats_rows), cfg)
        rows_by_part = {r[ex.PART]: int(r["n"]) for r in stats_rows}
        total_rows = sum(rows_by_part.values())
        prepared = prepared.drop("_lg_bad_key")

        base_instant, pending_at_start = timeline_position(timeline)
        affected = set(rows_by_part)
        view = index_view(self.io, timeline) if record_index_in_use(cfg) else None
        located = None
        if view is not None and cfg.index_type == "RECORD_INDEX" and not operation.is_replace and \
                operation not in (Operation.INSERT, Operation.BULK_INSERT):
            located = locate(self.spark, prepared, view)
            cached.append(located)
            affected |= located_partitions(located)  # an update stays in the partition its record is in
        if operation is Operation.INSERT_OVERWRITE_TABLE:
            files = table_files(self.io, cfg, timeline)
        else:
            files = table_files(self.io, cfg, timeline, affected) if affected else TableFiles((), ())
        existing = latest_base_files(files.bases, timeline)
        slices = latest_file_slices(files, timeline) if self.mor else []
        written = None
        if operation not in (Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE):
            # never merge into a damaged file group: a missing or cut-short newest file would bring older rows back
            # (an overwrite replaces the groups instead: it is a way to repair them)
            written = written_files(timeline)
            check_bases(existing, written, lambda key: key[0] in affected, timeline.replaced_file_groups(),
                        join=self.io.base)
            check_slices(slices, written, join=self.io.base)
        self._log_groups = {s.file_id for s in slices if s.logs}

        # steps 2+3: tag and plan
        replaced: dict[str, tuple[str, ...]] | None = None
        if operation.is_replace:
            replaced_groups: dict[str, list[str]] = {}
            for f in existing:
                replaced_groups.setdefault(f.partition, []).append(f.file_id)
            replaced = {p: tuple(sorted(ids)) for p, ids in replaced_groups.items()}
            if cfg.index_type == "BUCKET":
                assigned, groups = self._plan_buckets(prepared, affected, [])
            else:
                assigned, groups = self._plan_inserts(prepared, rows_by_part, [], timeline, fill_small=False)
        elif cfg.index_type == "BUCKET":
            assigned, groups = self._plan_buckets(prepared, affected, existing)
        elif operation in (Operation.INSERT, Operation.BULK_INSERT):
            assigned, groups = self._plan_inserts(prepared, rows_by_part, existing, timeline,
                                                  fill_small=operation is Operation.INSERT)
        else:
            if located is not None:
                tagged = tag_located(self.spark, prepared, located, existing, slices,
                                     broadcast=total_rows <= BROADCAST_MAX_ROWS)
            else:
                assert written is not None  # read for every operation but the overwrites
                tagged = self._tag_by_files(prepared, existing, total_rows,
                                            lookup_deletes(self.io, cfg, timeline, slices, written))
                if view is not None:
                    tagged = tagged.withColumn(NEW, F.col(ex.FID).isNull())
            if operation is Operation.DELETE:
                tagged = tagged.where(F.col(ex.FID).isNotNull())
            elif mixed:  # deletes of keys the table does not hold have nothing to do
                tagged = tagged.where(F.col(ex.FID).isNotNull() | (F.col(ex.OP) != "D"))
            assigned, groups = self._plan_untagged(tagged, existing, timeline, cached,
                                                   upper={} if operation is Operation.DELETE else rows_by_part)
        if self.mor and not operation.is_replace:
            groups = log_plans(groups, slices, slice_reads(self.io, cfg, timeline, written) if written else None)
        if view is not None and NEW not in assigned.columns:  # inserts, overwrites, buckets: every row gets an entry
            assigned = assigned.withColumn(NEW, F.lit(True))

        action = Action.COMMIT
        if operation.is_replace:
            action = Action.REPLACE_COMMIT
        elif self.mor:
            action = Action.DELTA_COMMIT
        return SparkPlannedWrite(
            operation=operation, action=action, table_avro=table_avro, target=target, affected=frozenset(affected),
            plans=groups, replaced=replaced, input_rows=total_rows, base_instant=base_instant,
            pending_at_start=pending_at_start, writer=self, assigned=assigned, observer=observer, cached=cached,
            index_groups=view.groups if view is not None else None)

    # ---- index: simple and bloom --------------------------------------------------------------------------------
    def _tag_by_files(self, prepared: DataFrame, existing: list[BaseFile], total_rows: int,
                      deleting: tuple[dict[str, FileSlice], SliceJob] | None) -> DataFrame:
        """``prepared`` with the file id of the base file (of ``existing``) holding each row's key, null for new
        keys: ``SIMPLE`` joins with every key of those files, ``BLOOM`` reads only the files their footers admit.
        ``deleting``: merge-on-read slices whose logs may delete base rows, and how to read them; a key found in
        several groups goes to those where it is live (:func:`tablecore.spark.key_liveness.live_locations`)."""
        if not existing:
            return prepared.withColumn(ex.FID, F.lit(None).cast(StringType()))
        small = total_rows <= BROADCAST_MAX_ROWS
        if self.config.index_type == "BLOOM":
            located = located_by_bloom(self.spark, self.io, prepared, existing)
        else:
            stored = scan_keys(self.spark, self.io, [f.path for f in existing], ex.KEY, ex.PART, ex.FID)
            keys = prepared.select(ex.KEY, ex.PART).distinct()
            located = stored.join(F.broadcast(keys) if small else keys, [ex.KEY, ex.PART], "inner")
        if deleting is not None:
            located = live_locations(self.spark, located, *deleting)
        return prepared.join(F.broadcast(located) if small else located, [ex.KEY, ex.PART], "left")

    # ---- planning -----------------------------------------------------------------------------------------------
    def _plan_untagged(self, tagged: DataFrame, existing: list[BaseFile], timeline: Timeline,
                       cached: list[DataFrame], *, upper: dict[str, int],
                       ) -> tuple[DataFrame, dict[str, ex.GroupPlan]]:
        """Plan the rows the index left without a file group (the inserts). ``upper`` bounds each partition's inserts
        (its rows in the batch; empty: none can be an insert).

        The inserts are counted (one Spark job) only when the bound does not settle the plan: when every partition's
        bound fits one file group, that group takes whatever inserts there are, as it would with the exact count.
        On merge-on-read, a small base file chosen to take inserts is rewritten rather than given a log, so there
        the bound settles the plan only if it picks new file groups (an update-only batch keeps writing logs)."""
        groups = {f.file_id: ex.GroupPlan(f.partition, f.path, f.instant) for f in existing}
        if not upper:
            return tagged, groups
        plan_rows, new_groups = insert_buckets(self.config, upper, existing, timeline, fill_small=True,
                                              log_groups=self._log_groups)
        one_each = len({part for part, *_ in plan_rows}) == len(plan_rows)
        if not one_each or (self.mor and any(p.rewrite for p in new_groups.values())):
            tagged = tagged.persist(BATCH_CACHE)  # read by the count and by the write
            cached.append(tagged)
            counts = (tagged.where(F.col(ex.FID).isNull()).groupBy(ex.PART).count().collect())
            inserts = {r[ex.PART]: int(r["count"]) for r in counts}
            plan_rows, new_groups = insert_buckets(self.config, inserts, existing, timeline, fill_small=True,
                                                  log_groups=self._log_groups)
        groups.update(new_groups)
        return self._assign_inserts(tagged, plan_rows), groups

    def _plan_inserts(self, prepared: DataFrame, rows_by_part: dict[str, int], existing: list[BaseFile],
                      timeline: Timeline, *, fill_small: bool) -> tuple[DataFrame, dict[str, ex.GroupPlan]]:
        plan_rows, groups = insert_buckets(self.config, rows_by_part, existing, timeline, fill_small=fill_small,
                                            log_groups=self._log_groups)
        untagged = prepared.withColumn(ex.FID, F.lit(None).cast(StringType()))
        return self._assign_inserts(untagged, plan_rows), groups

    def _assign_inserts(self, tagged: DataFrame, plan_rows: list[tuple[str, int, int, str]]) -> DataFrame:
        if not plan_rows:
            return tagged
        totals: dict[str, int] = {}
        for part, _lo, hi, _fid in plan_rows:
            totals[part] = max(totals.get(part, 0), hi)
        # from Arrow: decoded in the JVM, no Python worker job (a Python list costs a job of its own)
        parts, los, his, fids = zip(*plan_rows, strict=True)
        ranges = self.spark.createDataFrame(pa.table({
            "_p": pa.array(parts, pa.string()), "_lo": pa.array(los, pa.int32()), "_hi": pa.array(his, pa.int32()),
            "_tot": pa.array([totals[p] for p in parts], pa.int32()), "_nfid": pa.array(fids, pa.string())}))
        # one broadcast join: rows the index located keep their file group; the others hash into their partition's
        # ranges (the hash is taken modulo the partition's insert total, which every range row of it carries)
        slot = F.pmod(F.xxhash64(F.col(ex.KEY)), F.col("_tot")).cast("int")
        cond = (F.col(ex.FID).isNull() & (F.col(ex.PART) == F.col("_p")) & (slot >= F.col("_lo"))
                & (slot < F.col("_hi")))
        joined = tagged.join(F.broadcast(ranges), cond, "left")
        return joined.select(*[F.coalesce(F.col(ex.FID), F.col("_nfid")).alias(ex.FID) if c == ex.FID
                               else F.col(f"`{c}`") for c in tagged.columns])

    # ---- index: bucket ------------------------------------------------------------------------------------------
    def _plan_buckets(self, prepared: DataFrame, affected: set[str], existing: list[BaseFile],
                      ) -> tuple[DataFrame, dict[str, ex.GroupPlan]]:
        n = self.config.bucket_count or 1
        complex_keys = self.config.complex_keys
        groups: dict[str, ex.GroupPlan] = {}
        mapping: dict[tuple[str, int], str] = {}
        for f in existing:
            b = bucket_of_file_id(f.file_id)
            if b is not None:
                mapping[(f.partition, b)] = f.file_id
                groups[f.file_id] = ex.GroupPlan(f.partition, f.path, f.instant)
        for p in affected:
            for b in range(n):
                if (p, b) not in mapping:
                    fid = new_file_id(bucket=b)
                    mapping[(p, b)] = fid
                    groups[fid] = ex.GroupPlan(p, None, "null")
        if n == 1:
            # one bucket per partition: the partition alone names the file group (a broadcast join in the JVM, no
            # Python stage); built from Arrow, so no Spark job either
            fids_df = self.spark.createDataFrame(pa.table({
                "_lg_bp": pa.array([p for p, _ in mapping], pa.string()),
                "_lg_bfid": pa.array(list(mapping.values()), pa.string())}))
            assigned = (prepared.join(F.broadcast(fids_df), F.col(ex.PART) == F.col("_lg_bp"), "left")
                        .withColumn(ex.FID, F.col("_lg_bfid")).drop("_lg_bp", "_lg_bfid"))
            return assigned, groups
        slots = pa.array([f"{p}\x00{b}" for p, b in mapping], pa.string())
        slot_fids = pa.array(list(mapping.values()), pa.string())

        def add_fid(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                buckets = pa.array(bucket_ids(batch.column(ex.KEY), complex_keys, n)).cast(pa.string())
                slot = pc.binary_join_element_wise(batch.column(ex.PART), buckets, "\x00")
                fids = slot_fids.take(pc.index_in(slot, value_set=slots))
                yield batch.append_column(ex.FID, fids)

        out_schema = StructType([*prepared.schema.fields, StructField(ex.FID, StringType())])
        return prepared.mapInArrow(add_fid, out_schema), groups

    # ---- step 4: write ------------------------------------------------------------------------------------------
    def _run_write_job(self, assigned: DataFrame, groups: dict[str, ex.GroupPlan], instant: str,
                       table_avro: dict[str, Any], target: pa.Schema, *, sort_inserts: bool,
                       observer: RowObserver | None = None) -> list[WriteStat]:
        if not groups:
            return []
        job = write_job(self.io, self.config, instant, table_avro, target, groups, sort_inserts=sort_inserts)

        def write_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            ctx = TaskContext.get()
            if ctx is None:  # pragma: no cover - always set inside Spark tasks
                token, part = "0-0-0", 0
            else:
                token, part = write_token(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId()), ctx.partitionId()
            stats = []  # one small table per file group, handed to the JVM in one batch per task
            for group in ex.iter_groups(batches, ex.FID):
                stats.append(write_group(group, job, token, part))
            if stats:
                yield from pa.concat_tables(stats).combine_chunks().to_batches()

        started = time.monotonic()
        # The work is per file group, not per incoming row: spread the groups over a fixed number of tasks that is a
        # multiple of the cores (AQE would coalesce the small shuffle into a few unbalanced tasks). Sorted by file
        # group, each task streams its groups through one Python call (applyInArrow pays a call per group).
        tasks = max(1, min(len(groups), default_parallelism(self.spark) * WRITE_TASKS_PER_CORE))
        spread = assigned.repartition(tasks, ex.FID).sortWithinPartitions(ex.FID)
        if observer is not None:  # after the shuffle: the observer's work is spread over the write's tasks too
            spread = _observed(spread, observer)
        rows = spread.mapInArrow(write_groups, ex.STAT_DDL).collect()
        logger.info("wrote %d file groups of %s in %.1fs", len(rows), instant, time.monotonic() - started)
        return ex.write_stats(rows)


def _observed(assigned: DataFrame, observer: RowObserver) -> DataFrame:
    """``assigned`` with ``observer`` applied; the observer must keep the rows and the columns."""
    data_columns = [c for c in assigned.columns if c not in ex.INTERNAL_COLUMNS]
    observed: DataFrame = observer(assigned, data_columns)
    if observed.columns != assigned.columns:
        raise InvalidInputError(f"the row observer changed the written columns ({observed.columns} instead of "
                                f"{assigned.columns})")
    return observed
