"""Bulk inserts from Arrow, without Spark: a single-process writer for loads that fit one process's memory.

:func:`plan_bulk_insert` plans a ``bulk_insert`` of a ``pyarrow.Table`` the way the Spark writer does (the same
record keys and partition paths, the same schema evolution, new file groups sized by the table's record-size
estimate) and its :meth:`ArrowPlannedWrite.write` writes the file groups in a thread pool with
:func:`tablecore.tasks.write.merge_and_write`, the code Spark's executors run. The transaction around it is the
same as for a Spark write (``tablecore.transaction.write_batch``): requested / inflight / completed instants, the
metadata table, crash recovery, commit metadata.

Why: a bulk load through Spark moves every row through a shuffle and into Python workers before the files are
written; here the rows are already Arrow in this process, so the cost is the files themselves
(``benchmarks/lake_read.py``). Spark stays the engine for loads larger than memory and for every other operation.

Limits: record key and partition fields must be strings, integers, booleans or dates (whose text Arrow and Spark
write alike; others raise :class:`InvalidInputError` naming the field); the whole batch is in memory.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tablecore.config import TableConfig
from tablecore.engine import Operation, WritePart
from tablecore.exceptions import InvalidInputError
from tablecore.format.avro_schema import META_FIELDS
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_naming import new_file_id, write_token
from tablecore.format.instant import Action
from tablecore.format.record_keys import partition_paths, record_keys
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO
from tablecore.metadata_table import record_index_in_use
from tablecore.record_index import index_view, write_changes
from tablecore.tasks import log_write
from tablecore.tasks import write as ex
from tablecore.tasks.slice_write import write_group
from tablecore.write_planning import (
    PlannedFiles,
    check_columns,
    record_size_estimate,
    refuse_invalid_keys,
    target_schema,
    timeline_position,
    write_job,
)

logger = logging.getLogger(__name__)


def is_arrow_write(parts: Sequence[WritePart]) -> bool:
    """Whether a transaction holds an Arrow table (planned by this module, which refuses a mix with engine frames)."""
    return any(isinstance(p.frame, pa.Table) for p in parts)


@dataclass
class ArrowPlannedWrite(PlannedFiles):
    """A planned Arrow write (:class:`tablecore.engine.PlannedWrite`): the batch's rows in one range per file group.

    Each group is written by :func:`tablecore.tasks.slice_write.write_group`: a group whose plan names a log version
    gets a log file (unless a returning deleted key makes it rewrite the slice); any other is merged with its base
    file, if it has one, into a new base file.
    """

    io: FileIO
    config: TableConfig
    rows: pa.Table  # the batch with its record keys and ordering values (and ``NEW`` for an upsert with an index)
    slices: list[tuple[str, int, int]]  # (file id, offset and length of its rows in ``rows``)
    threads: int
    index_groups: int | None = None  # the record index's file groups, when the table has one to keep
    sort_inserts: bool = True  # new base files sorted by key (a bulk insert)

    def write(self, instant: str) -> list[WriteStat]:
        """Write every file group as ``instant``, ``threads`` at a time; their write stats."""
        job = write_job(self.io, self.config, instant, self.table_avro, self.target, self.plans,
                        sort_inserts=self.sort_inserts)
        started = time.monotonic()

        def one(i: int) -> pa.Table:
            fid, offset, length = self.slices[i]
            plan = self.plans[fid]
            rows = self.rows.slice(offset, length).append_column(ex.PART, ex.constant(plan.partition, length))
            rows = rows.append_column(ex.OP, ex.constant("U", length)).append_column(ex.FID, ex.constant(fid, length))
            return write_group(rows, job, write_token(i, 0, 0), i)

        # merge-on-read groups taking a log file: encoded together (one columnar pass), else one by one (as those
        # whose slice a returning deleted key may make a rewrite)
        logs = [i for i, (fid, _, _) in enumerate(self.slices)
                if self.plans[fid].log_version is not None and not self.plans[fid].slice_logs]
        stats = self._append_logs(job, logs) if len(logs) > 1 else None
        logged = set(logs) if stats is not None else set()
        rest = [i for i in range(len(self.slices)) if i not in logged]
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="lakegate-write") as pool:
            tables = list(pool.map(one, rest))
        stats = (stats or []) + (pa.concat_tables(tables).to_pylist() if tables else [])
        logger.info("wrote %d file groups of %s from Arrow in %.1fs (%d threads)", len(stats), instant,
                    time.monotonic() - started, self.threads)
        if self.index_groups is not None and self.slices:
            self._write_index(instant, self.index_groups)
        return ex.write_stats(stats)

    def _append_logs(self, job: ex.WriteJob, which: list[int]) -> list[dict[str, Any]] | None:
        """The log files of the groups ``which`` (indexes into ``slices``) from one encoding of their rows
        (:func:`tablecore.tasks.log_write.append_logs`); None if their rows need the per-group path."""
        groups, offset = [], 0
        for i in which:
            fid, _, n = self.slices[i]
            groups.append((fid, offset, n))
            offset += n
        rows = pa.concat_tables([self.rows.slice(self.slices[i][1], self.slices[i][2]) for i in which])
        return log_write.append_logs(rows, groups, job, [write_token(i, 0, 0) for i in which], which,
                                     threads=self.threads)

    def _write_index(self, instant: str, index_groups: int) -> None:
        """The record index's log files of ``instant`` (of ``index_groups`` file groups): an entry for every new
        row (all of a bulk insert's)."""
        new = self.rows.column(ex.NEW) if ex.NEW in self.rows.column_names else None
        keys, parts, fids = [], [], []
        for fid, offset, length in self.slices:
            k = self.rows.column(ex.KEY).slice(offset, length).cast(pa.string()).combine_chunks()
            if new is not None:  # an upsert: its inserts
                k = k.filter(new.slice(offset, length).combine_chunks())
            keys.append(k)
            parts.append(ex.constant(self.plans[fid].partition, len(k)))
            fids.append(ex.constant(fid, len(k)))
        write_changes(self.io, index_groups, instant, "0-0-0", pa.chunked_array(keys, pa.string()),
                      pa.chunked_array(parts, pa.string()), pa.chunked_array(fids, pa.string()),
                      pa.array([], pa.string()))

    def close(self) -> None:
        """Drop the planned rows."""
        self.slices = []
        self.rows = self.rows.slice(0, 0)


ARROW_OPERATIONS = (Operation.BULK_INSERT, Operation.UPSERT)
"""The writes an Arrow table takes (every other one needs a Spark DataFrame)."""


@dataclass(frozen=True)
class ArrowBatch:
    """An Arrow write's batch, checked: its rows with the record key (``KEY``) and ordering value (``ORD``) of each,
    the table schema after it, and each row's partition path (``paths[codes[i]]``)."""

    rows: pa.Table
    table_avro: dict[str, Any]
    target: pa.Schema
    paths: list[str]
    codes: np.ndarray


def prepare_arrow_batch(config: TableConfig, timeline: Timeline, parts: Sequence[WritePart],
                        operation: Operation) -> ArrowBatch:
    """Check an Arrow write (one part of an operation of :data:`ARROW_OPERATIONS`) and key its rows.

    Raises:
        InvalidInputError: another operation, several writes, a row observer, a bucket-index table, a missing key /
            partition / ordering column, a key or partition field of a type Arrow and Spark format differently, null
            or empty keys, or a schema the table cannot take.
        SchemaEvolutionError: the batch's schema is not a legal evolution of the table's.
    """
    if operation not in ARROW_OPERATIONS or parts[0].operation is not operation:
        raise InvalidInputError("an Arrow table is written by bulk_insert or upsert; use a Spark DataFrame for "
                                f"{parts[0].operation.value.lower()}")
    if len(parts) != 1:
        raise InvalidInputError(f"a transaction with an Arrow table holds that one write, not {len(parts)}: commit "
                                "the others in their own transactions")
    what = "an Arrow " + operation.value.lower().replace("_", " ")
    if parts[0].observer is not None:
        raise InvalidInputError(f"{what} takes no row observer (it runs no Spark job)")
    if config.index_type == "BUCKET":
        raise InvalidInputError(f"{what} does not write bucket-index tables; use a Spark DataFrame")
    data: pa.Table = parts[0].frame
    data = data.drop_columns([c for c in data.column_names if c in META_FIELDS])
    check_columns(data.column_names, config, operation)
    table_avro, target = target_schema(data.schema, timeline.latest_schema() or config.create_schema, config.name)

    keys, bad = record_keys(data, config.record_key, complex_keys=config.complex_keys)
    refuse_invalid_keys(bad, config)
    paths, codes = partition_paths(data, config.partition_fields, hive_style=config.hive_style_partitioning,
                                   url_encode=config.url_encode_partitions)
    rows = data.append_column(ex.KEY, keys) \
        .append_column(ex.ORD, data.column(config.ordering_field) if config.ordering_field else pa.nulls(len(data)))
    return ArrowBatch(rows, table_avro, target, paths, codes)


def plan_bulk_insert(io: FileIO, config: TableConfig, timeline: Timeline, parts: Sequence[WritePart],
                     operation: Operation, *, threads: int | None = None) -> ArrowPlannedWrite:
    """Plan a bulk insert of Arrow ``parts`` (nothing is written).

    Raises:
        InvalidInputError: see :func:`prepare_arrow_batch`; another operation than ``BULK_INSERT``.
        SchemaEvolutionError: the batch's schema is not a legal evolution of the table's.
    """
    batch = prepare_arrow_batch(config, timeline, parts, operation)
    if operation is not Operation.BULK_INSERT:
        raise InvalidInputError(f"plan_bulk_insert plans a bulk insert, not {operation.value.lower()}")
    rows, paths, codes, n = batch.rows, batch.paths, batch.codes, batch.rows.num_rows
    table_avro, target = batch.table_avro, batch.target

    # the rows of each partition in one range: input read from a partitioned layout already is (no copy); anything
    # else is reordered once by a stable sort of the partition codes
    counts = np.bincount(codes, minlength=len(paths))
    if n > 1 and np.count_nonzero(codes[1:] != codes[:-1]) != len(paths) - 1:
        order = np.argsort(codes, kind="stable")
        rows, codes = rows.take(pa.array(order)), codes[order]
    starts = np.zeros(len(paths), dtype=np.int64)
    if n:
        first = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
        starts[codes[first]] = first
    per_file = max(1, config.target_file_size // record_size_estimate(timeline))
    plans: dict[str, ex.GroupPlan] = {}
    slices: list[tuple[str, int, int]] = []
    for part, start, count in zip(paths, starts.tolist(), counts.tolist(), strict=True):
        files = math.ceil(count / per_file)
        for k in range(files):
            lo = start + k * count // files
            hi = start + (k + 1) * count // files
            fid = new_file_id()
            plans[fid] = ex.GroupPlan(part, None, "null")
            slices.append((fid, lo, hi - lo))
    base_instant, pending_at_start = timeline_position(timeline)
    return ArrowPlannedWrite(
        operation=operation, action=Action.DELTA_COMMIT if config.table_type == "MERGE_ON_READ" else Action.COMMIT,
        table_avro=table_avro, target=target, affected=frozenset(paths), plans=plans, replaced=None, input_rows=n,
        base_instant=base_instant, pending_at_start=pending_at_start, io=io, config=config, rows=rows,
        slices=slices, threads=threads or os.cpu_count() or 1,
        index_groups=index_view(io, timeline).groups if record_index_in_use(config) else None)
