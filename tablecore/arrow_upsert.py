"""Upserts of Arrow tables without Spark: a single-process writer for batches that fit one process's memory.

:func:`plan_upsert` plans an ``upsert`` of a ``pyarrow.Table`` as the Spark writer does (``spark/writer.py``), in
this process:

1. **Keys.** The record keys and partition paths Spark computes (:func:`tablecore.arrow_writer.prepare_arrow_batch`).
2. **Index.** Every row's file group, from the table's index:
   - ``SIMPLE`` reads the record keys of the latest base files of the partitions the batch touches;
   - ``BLOOM`` reads only the files whose footer key range and bloom filter admit some of the batch's keys;
   - ``RECORD_INDEX`` looks the keys up in the metadata table's record index. An update stays in the partition its
     record is in, as with Spark.

   Files are read in a thread pool.
3. **Inserts.** The rows no file group holds are counted exactly, one per distinct key and partition. They fill
   small base files first, then new file groups (:func:`tablecore.write_planning.insert_buckets`). A key given
   twice goes to one group.
4. **Write.** :class:`tablecore.arrow_writer.ArrowPlannedWrite` writes every group in a thread pool:
   - on merge-on-read, a log file of the group's latest slice;
   - otherwise, the merged base file.

   This is the code Spark's executors run.

The transaction around it is a Spark write's (``tablecore.transaction.write_batch``). Why: the batch of a
micro-batch pipeline is small against the table, and in one process the cost is the index lookup and the files
written, without a Spark job per step (``benchmarks/indexes.py`` measures both). Spark stays the engine for batches
larger than memory, for DataFrames, and for the other operations.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.arrow_writer import ArrowPlannedWrite, plan_bulk_insert, prepare_arrow_batch
from tablecore.config import TableConfig
from tablecore.engine import Operation, WritePart
from tablecore.exceptions import InvalidInputError
from tablecore.format.file_integrity import check_bases, check_slices
from tablecore.format.file_view import BaseFile, FileSlice, TableFiles, latest_base_files, latest_file_slices
from tablecore.format.instant import Action
from tablecore.format.record_index import file_group_indexes
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO
from tablecore.metadata_table import record_index_in_use, table_files
from tablecore.read_planning import written_files
from tablecore.record_index import RecordIndexView, index_view, lookup
from tablecore.tasks import mor
from tablecore.tasks import write as ex
from tablecore.tasks.bloom_index import keys_in_base_file
from tablecore.write_planning import insert_buckets, log_plans, lookup_deletes, slice_reads, timeline_position

logger = logging.getLogger(__name__)


def plan_arrow_write(io: FileIO, config: TableConfig, timeline: Timeline, parts: Sequence[WritePart],
                     operation: Operation) -> ArrowPlannedWrite:
    """Plan the write of Arrow ``parts``: :func:`plan_upsert` or :func:`tablecore.arrow_writer.plan_bulk_insert`.

    Raises:
        InvalidInputError: an operation an Arrow table does not take, or a batch the planner refuses.
    """
    if operation is Operation.UPSERT:
        return plan_upsert(io, config, timeline, parts, operation)
    return plan_bulk_insert(io, config, timeline, parts, operation)


def plan_upsert(io: FileIO, config: TableConfig, timeline: Timeline, parts: Sequence[WritePart],
                operation: Operation, *, threads: int | None = None) -> ArrowPlannedWrite:
    """Plan an upsert of Arrow ``parts``: every row assigned to a file group, nothing written.

    Raises:
        InvalidInputError: see :func:`tablecore.arrow_writer.prepare_arrow_batch`; another operation than
            ``UPSERT``.
        SchemaEvolutionError: the batch's schema is not a legal evolution of the table's.
        TableCorruptError: a file group the batch touches is damaged (a missing or cut-short newest file), or an
            index file does not decode.
    """
    if operation is not Operation.UPSERT:
        raise InvalidInputError(f"plan_upsert plans an upsert, not {operation.value.lower()}")
    batch = prepare_arrow_batch(config, timeline, parts, operation)
    threads = threads or os.cpu_count() or 1
    n = batch.rows.num_rows
    # the rows of each partition in one range (a stable sort; a batch read from a partitioned layout already is)
    codes = batch.codes
    if n > 1 and np.any(codes[1:] < codes[:-1]):
        order = np.argsort(codes, kind="stable")
        rows, codes = batch.rows.take(pa.array(order)), codes[order]
    else:
        rows = batch.rows
    keys = rows.column(ex.KEY).cast(pa.string()).combine_chunks()
    paths = pa.array(batch.paths, pa.string())
    row_parts = paths.take(pa.array(codes))
    affected = set(batch.paths)

    view = index_view(io, timeline) if record_index_in_use(config) else None
    located: tuple[pa.Array, pa.Array] | None = None
    if view is not None and config.index_type == "RECORD_INDEX":
        located = _locate(view, keys, threads)
        affected |= set(pc.unique(located[0].drop_null()).to_pylist())  # an update stays in its record's partition
    files = table_files(io, config, timeline, affected) if affected else TableFiles((), ())
    existing = latest_base_files(files.bases, timeline)
    slices = latest_file_slices(files, timeline) if config.table_type == "MERGE_ON_READ" else []
    # never merge into a damaged file group: a missing or cut-short newest file would bring older rows back
    written = written_files(timeline)
    check_bases(existing, written, lambda key: key[0] in affected, timeline.replaced_file_groups(), join=io.base)
    check_slices(slices, written, join=io.base)

    if located is not None:
        live = {(f.partition, f.file_id) for f in existing} | {(s.partition, s.file_id) for s in slices}
        row_parts, fids = _in_live_groups(row_parts, located, live)
    else:
        fids, copies = _tag_by_files(io, config.index_type, existing, keys, batch.paths, codes, threads,
                                     lookup_deletes(io, config, timeline, slices, written))
        if copies is not None:  # keys the table holds in several file groups: a row for each (as Spark writes)
            rows, keys, row_parts = rows.take(copies), keys.take(copies), row_parts.take(copies)
    new = pc.is_null(fids)

    groups = {f.file_id: ex.GroupPlan(f.partition, f.path, f.instant) for f in existing}
    fids = _assign_inserts(config, timeline, existing, {s.file_id for s in slices if s.logs}, keys, row_parts, fids,
                           new, groups)
    if config.table_type == "MERGE_ON_READ":
        groups = log_plans(groups, slices, slice_reads(io, config, timeline, written))
    if view is not None:
        rows = rows.append_column(ex.NEW, new)
    ids = fids.dictionary_encode()
    group_of_row = ids.indices.to_numpy(zero_copy_only=False)
    by_group = np.argsort(group_of_row, kind="stable")
    counts = np.bincount(group_of_row, minlength=len(ids.dictionary))
    offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
    planned = [(fid, int(o), int(c)) for fid, o, c in zip(ids.dictionary.to_pylist(), offsets, counts, strict=True)
               if c]
    base_instant, pending_at_start = timeline_position(timeline)
    logger.info("planned an Arrow upsert of %d rows: %d updates, %d file groups", n, n - pc.sum(new).as_py(),
                len(planned))
    return ArrowPlannedWrite(
        operation=operation, action=Action.DELTA_COMMIT if config.table_type == "MERGE_ON_READ" else Action.COMMIT,
        table_avro=batch.table_avro, target=batch.target, affected=frozenset(affected), plans=groups, replaced=None,
        input_rows=n, base_instant=base_instant, pending_at_start=pending_at_start, io=io, config=config,
        rows=rows.take(pa.array(by_group)), slices=planned, threads=threads,
        index_groups=view.groups if view is not None else None, sort_inserts=False)


def _locate(view: RecordIndexView, keys: pa.Array, threads: int) -> tuple[pa.Array, pa.Array]:
    """The partition and file group the record index holds for each key (nulls for keys it does not hold)."""
    distinct = pc.unique(keys)
    group_of = file_group_indexes(distinct, view.groups)
    wanted: dict[int, list[str]] = {}
    for key, g in zip(distinct.to_pylist(), group_of.tolist(), strict=True):
        wanted.setdefault(g, []).append(key)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakegate-index") as pool:
        found = list(pool.map(lambda g: lookup(view, g, wanted[g]), sorted(wanted)))
    where = {k: loc for f in found for k, loc in f.items()}
    hit = pa.array(list(where), pa.string())
    pos = pc.index_in(keys, value_set=hit)
    return (pa.array([loc.partition for loc in where.values()], pa.string()).take(pos),
            pa.array([loc.file_id for loc in where.values()], pa.string()).take(pos))


def _in_live_groups(row_parts: pa.Array, located: tuple[pa.Array, pa.Array],
                    live: set[tuple[str, str]]) -> tuple[pa.Array, pa.Array]:
    """Each row's partition and file group: where the index places its key, if that file group is live; else the
    row's own partition and no group (an insert)."""
    loc_parts, loc_fids = located
    found = pa.array([(p, f) in live for p, f in zip(loc_parts.to_pylist(), loc_fids.to_pylist(), strict=True)],
                     pa.bool_())
    return (pc.if_else(found, loc_parts, row_parts),
            pc.if_else(found, loc_fids, pa.nulls(len(loc_fids), pa.string())))


def _tag_by_files(io: FileIO, index_type: str, existing: Sequence[BaseFile], keys: pa.Array, paths: Sequence[str],
                  codes: np.ndarray, threads: int,
                  deleting: tuple[dict[str, FileSlice], mor.SliceJob] | None = None,
                  ) -> tuple[pa.Array, pa.Array | None]:
    """The file group of the base file (of ``existing``) that holds each row's key in the row's partition, null for
    new keys: ``SIMPLE`` reads every key of those files, ``BLOOM`` only the files their footers admit. The rows are
    in one range per partition code. ``deleting``: merge-on-read slices whose logs may delete base rows, and how to
    read them: a key found in several groups goes to those where it is live (``spark/key_liveness.py``).

    A key live in several file groups (an ``insert`` wrote it again) is updated in each, as Spark's join and Apache
    Hudi's index do: then the second array gives the row of every returned file id (rows repeat), else it is None.
    """
    starts = np.searchsorted(codes, np.arange(len(paths)), side="left")
    ends = np.searchsorted(codes, np.arange(len(paths)), side="right")
    wanted = {paths[c]: pc.unique(keys.slice(int(s), int(e - s))) for c, (s, e) in enumerate(zip(starts, ends,
                                                                                                 strict=True))}

    def found_in(f: BaseFile) -> tuple[str, pa.Array]:
        probe = wanted[f.partition]
        if index_type == "BLOOM":
            return f.partition, keys_in_base_file(io, f.path, probe)
        stored = ex.read_base_file(io, f.path, [mor.KEY_COL]).column(0).cast(pa.string())
        return f.partition, stored.filter(pc.is_in(stored, value_set=probe)).combine_chunks()

    files = [f for f in existing if f.partition in wanted]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakegate-index") as pool:
        hits = list(pool.map(found_in, files))
    by_part: dict[str, tuple[list[pa.Array], list[pa.Array]]] = {}
    for f, (part, found) in zip(files, hits, strict=True):
        if len(found):
            ks, fs = by_part.setdefault(part, ([], []))
            ks.append(found)
            fs.append(ex.constant(f.file_id, len(found)))
    if deleting is not None:
        descs, job = mor.slice_paths(deleting[0]), deleting[1]
        by_part = {part: _live(part, ks, fs, descs, job) for part, (ks, fs) in by_part.items()}
    out: list[pa.Array] = []
    copies: list[np.ndarray] = []
    repeated = False
    for c, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        if s == e:
            continue
        if paths[c] not in by_part:
            out.append(pa.nulls(e - s, pa.string()))
            copies.append(np.arange(s, e))
            continue
        ks, fs = by_part[paths[c]]
        found, found_fids = pa.concat_arrays(ks), pa.concat_arrays(fs)
        if pc.count_distinct(found).as_py() == len(found):
            out.append(found_fids.take(pc.index_in(keys.slice(s, e - s), value_set=found)))
            copies.append(np.arange(s, e))
            continue
        repeated = True
        pairs = pa.table({ex.KEY: found, ex.FID: found_fids}).group_by([ex.KEY, ex.FID]).aggregate([])  # a row each
        joined = pa.table({"row": np.arange(s, e), ex.KEY: keys.slice(s, e - s)}).join(
            pairs, ex.KEY, join_type="left outer").sort_by("row")
        out.append(joined.column(ex.FID).combine_chunks())
        copies.append(joined.column("row").to_numpy())
    fids = pa.concat_arrays(out) if out else pa.array([], pa.string())
    return fids, pa.array(np.concatenate(copies)) if repeated else None


def _live(part: str, keys: list[pa.Array], fids: list[pa.Array], descs: dict[str, tuple[str | None, list[str]]],
          job: mor.SliceJob) -> tuple[list[pa.Array], list[pa.Array]]:
    """The keys found in one partition's base files (one array per file, and its file ids) without those found in
    several files whose slice's logs delete them (:func:`tablecore.tasks.mor.without_deleted_locations`)."""
    found = pa.table({ex.KEY: pa.concat_arrays(keys), ex.PART: ex.constant(part, sum(len(k) for k in keys)),
                      ex.FID: pa.concat_arrays(fids)})
    live = mor.without_deleted_locations(found, descs, job)
    if live.num_rows == found.num_rows:
        return keys, fids
    return [live.column(ex.KEY).combine_chunks()], [live.column(ex.FID).combine_chunks()]


def _assign_inserts(config: TableConfig, timeline: Timeline, existing: Sequence[BaseFile], log_groups: set[str],
                    keys: pa.Array, row_parts: pa.Array, fids: pa.Array, new: pa.Array,
                    groups: dict[str, ex.GroupPlan]) -> pa.Array:
    """``fids`` with a file group for every new row: each partition's distinct new keys counted and spread over
    small base files and new groups (whose plans are added to ``groups``); the rows of one key go to one group."""
    if not pc.any(new).as_py():
        return fids
    new_at = np.flatnonzero(new.to_numpy(zero_copy_only=False))
    new_keys, new_parts = keys.take(pa.array(new_at)), row_parts.take(pa.array(new_at))
    by_part: dict[str, tuple[np.ndarray, pa.Array]] = {}
    part_codes = new_parts.dictionary_encode()
    code_of = part_codes.indices.to_numpy(zero_copy_only=False)
    for c, part in enumerate(part_codes.dictionary.to_pylist()):
        at = np.flatnonzero(code_of == c)
        by_part[part] = (at, new_keys.take(pa.array(at)))
    inserts = {part: len(pc.unique(k)) for part, (_, k) in by_part.items()}
    plan_rows, new_groups = insert_buckets(config, inserts, existing, timeline, fill_small=True,
                                           log_groups=log_groups)
    groups.update(new_groups)
    out = np.array(fids.to_pylist(), dtype=object)
    ranges: dict[str, list[tuple[int, str]]] = {}
    for part, _lo, hi, fid in plan_rows:
        ranges.setdefault(part, []).append((hi, fid))
    for part, (at, k) in by_part.items():
        rank = pc.index_in(k, value_set=pc.unique(k)).to_numpy(zero_copy_only=False)
        his = np.array([hi for hi, _ in ranges[part]])
        targets = np.array([fid for _, fid in ranges[part]], dtype=object)
        out[new_at[at]] = targets[np.searchsorted(his, rank, side="right")]
    return pa.array(out, pa.string())
