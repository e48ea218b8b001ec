"""Merge-on-read work done in executors: append log files, reduce a slice's logs, compact slices.

Pure pyarrow and the log codec of :mod:`tablecore.format.log_format`. The merge rules (format reference §7, the
way hudi-rs 0.5 merges):

- Only blocks of completed write instants count, minus instants a rollback command block targets; incremental
  reads count only blocks in their range.
- Commit-time ordering: the record of the newest block wins, deletes included.
- Event-time ordering: the highest ordering value wins (ties: the newer record), deletes carry ordering values; a
  delete without one (Java's ``IntWrapper(0)``, "natural order") removes every earlier version of the key.

A slice's log records are reduced to at most one *winning* record per key (:func:`reduce_slice_logs`); the slice is
then ``base rows whose key has no winner`` plus ``winners that are not deletes``. Readers do that last step as a
Spark anti-join (vectorized, column-pruned); compaction does it here with pyarrow.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.exceptions import TableCorruptError
from tablecore.format.avro_columnar import decode_avro_columns, decode_avro_columns_by_schema
from tablecore.format.avro_schema import avro_to_arrow
from tablecore.format.avro_values import datums_to_arrow
from tablecore.format.file_naming import BaseFileName
from tablecore.format.file_view import FileSlice, relative_path
from tablecore.format.log_content import (
    decode_avro_data,
    decode_delete,
    decode_parquet_data,
)
from tablecore.format.log_format import (
    AVRO_DECODE_ERRORS,
    BlockType,
    LogBlock,
    LogFormatError,
)
from tablecore.format.log_integrity import LogExtent, extents_by_name, read_log_checked
from tablecore.io import FileIO
from tablecore.tasks import write as ex

logger = logging.getLogger(__name__)

KEY_COL = "_hoodie_record_key"
PART_COL = "_hoodie_partition_path"
TIME_COL = "_hoodie_commit_time"
DELETE = "_lg_delete"  # a winning log record that is a delete
SEQ = "_lg_seq"
NATURAL = "_lg_natural"

SLICE_DDL = "partition string, file_id string, base_path string, log_paths array<string>"


def slice_descriptors(rows: list[tuple[str, str, str | None, list[str]]]) -> pa.Table:
    """The Arrow table of slice descriptors a slice job runs over (one row per file slice)."""
    parts, fids, bases, logs = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table({
        "partition": pa.array(parts, pa.string()), "file_id": pa.array(fids, pa.string()),
        "base_path": pa.array(bases, pa.string()), "log_paths": pa.array(logs, pa.list_(pa.string())),
    })


# ---- writing log files ---------------------------------------------------------------------------------------------

# ---- reading slices ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SliceJob:
    """What an executor needs to read or compact file slices (pickled into the task closure; no data)."""

    io: FileIO  # the table's storage (picklable)
    table_schema: pa.Schema  # meta columns + data columns, the schema of every output row
    valid_instants: frozenset[str]  # completed write instants (up to the query instant) whose blocks count
    event_time: bool
    ordering_field: str | None
    start: str | None = None  # incremental reads: blocks and base rows must be newer than this
    in_range: frozenset[str] | None = None  # ... or, with completion times, of one of these instants
    # what completed instants wrote into each log file, by file name (file_integrity.WrittenFiles.extents)
    log_extents: Mapping[str, tuple[LogExtent, ...]] = field(default_factory=dict)

    def filesystem(self) -> FileIO:
        """The storage to read from."""
        return self.io


def _read_log_blocks(fs: FileIO, log_paths: list[str], job: SliceJob) -> list[tuple[str, LogBlock]]:
    """The intact blocks of the slice's log files with the path of each, checked against what completed instants
    wrote (:func:`tablecore.format.log_integrity.read_log_checked`)."""
    blocks: list[tuple[str, LogBlock]] = []
    for path in log_paths:
        try:
            with fs.open_input(path) as f:
                data = f.read()
        except FileNotFoundError:
            extents = extents_by_name(job.log_extents, path)
            if not extents:
                continue  # removed since the listing by a rollback of an uncommitted write: nothing committed
            raise TableCorruptError("log file is missing", path=path, instant=extents[0].instant) from None
        blocks.extend((path, b) for b in read_log_checked(data, path, extents_by_name(job.log_extents, path)))
    return blocks


def block_records(block: LogBlock, schema: pa.Schema) -> pa.Table:
    """The records of a data block, conformed to the table schema."""
    if block.block_type is BlockType.PARQUET_DATA:
        table = decode_parquet_data(block.content)
    else:
        writer = block.schema
        if writer is None:
            raise ValueError(f"log block of instant {block.instant} has no schema header")
        parsed = json.loads(writer)
        # flat records of primitive fields decode column-wise (only the schema's columns are built); anything else
        # (or bad bytes) record by record
        decoded = decode_avro_columns(block.content, parsed, columns=set(schema.names))
        table = decoded if decoded is not None else datums_to_arrow(decode_avro_data(block.content, writer),
                                                                    avro_to_arrow(parsed))
    return ex.conform(table, schema)


def _delete_records(block: LogBlock, schema: pa.Schema, ordering_field: str | None) -> pa.Table:
    """The deletes of a delete block as rows of the table schema: key, partition and ordering value set."""
    recs = decode_delete(block.content)
    n = len(recs)
    cols: dict[str, pa.Array] = {}
    cols[KEY_COL] = pa.array([r.record_key for r in recs], pa.string())
    cols[PART_COL] = pa.array([r.partition_path for r in recs], pa.string())
    cols[TIME_COL] = pa.array([block.instant] * n, pa.string())
    if ordering_field is not None and ordering_field in schema.names:
        typ = schema.field(ordering_field).type
        values = [None if r.natural_order else r.ordering_value for r in recs]
        try:
            cols[ordering_field] = pa.array(values).cast(typ) if any(v is not None for v in values) \
                else pa.nulls(n, typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            cols[ordering_field] = pa.nulls(n, typ)
    table = ex.conform(pa.table(cols), schema)
    return table.append_column(NATURAL, pa.array([r.natural_order for r in recs], pa.bool_()))


def _counting_blocks(fs: FileIO, log_paths: list[str], job: SliceJob) -> list[tuple[str, LogBlock]]:
    """The data and delete blocks of a slice's log files that count for ``job``, in log order."""
    blocks = _read_log_blocks(fs, log_paths, job)
    rolled_back = {b.target_instant for _, b in blocks
                   if b.block_type is BlockType.COMMAND and b.target_instant is not None}
    counting = []
    for path, b in blocks:
        if b.block_type not in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE):
            continue
        inst = b.instant
        if inst is None or inst not in job.valid_instants or inst in rolled_back:
            continue
        if in_commit_range(inst, job.start, None, job.in_range):
            counting.append((path, b))
    return counting


def natural_deletes(fs: FileIO, log_paths: list[str], job: SliceJob) -> pa.Array:
    """The keys that deletes without ordering value in the counting blocks of a slice's logs name (data blocks are
    read but not decoded)."""
    keys: list[pa.Array] = []
    for path, b in _counting_blocks(fs, log_paths, job):
        if b.block_type is BlockType.DELETE:
            t = _decoded(path, b, lambda blk: _delete_records(blk, job.table_schema, job.ordering_field))
            keys.append(t.filter(t.column(NATURAL)).column(KEY_COL).combine_chunks())
    return pa.concat_arrays(keys) if keys else pa.array([], pa.string())


def log_records(fs: FileIO, log_paths: list[str], job: SliceJob) -> pa.Table:
    """Every record and delete of the counting blocks of a slice's log files, in log order.

    Columns: the table schema, plus ``_lg_delete``, ``_lg_natural`` (a delete without ordering value) and
    ``_lg_seq`` (position in log order).
    """
    return _records_of(_counting_blocks(fs, log_paths, job), job, {})


READ_CALLS = 64  # calls of ``map_fn`` that read the log files of many slices (each reads a share of them)


def log_records_many(fs: FileIO, log_paths: Sequence[Sequence[str]], job: SliceJob, *,
                     map_fn: Callable[..., Iterable[Any]] = map) -> list[pa.Table]:
    """:func:`log_records` of many slices (one list of log paths each), their Avro data blocks of one writer schema
    decoded in one pass (:func:`~tablecore.format.avro_columnar.decode_avro_columns_by_schema`): a merge-on-read read
    has a few blocks of a few hundred records per slice, where per-block decoding costs more than the records.
    ``map_fn`` reads the slices' log files on a remote store (a thread pool's ``map`` overlaps the requests); on a
    local disk they are read one after the other (~30 µs each: in threads they would mostly wait for the GIL)."""
    if not fs.remote:
        map_fn = map
    # a few slices per call: handing each of hundreds of small reads to a thread pool costs about what reading does
    size = max(1, -(-len(log_paths) // READ_CALLS))
    chunks = [log_paths[i:i + size] for i in range(0, len(log_paths), size)]
    counting: list[list[tuple[str, LogBlock]]] = [
        c for part in map_fn(lambda ps: [_counting_blocks(fs, list(p), job) for p in ps], chunks) for c in part]
    data: list[tuple[LogBlock, str]] = [(b, b.schema) for blocks in counting for _, b in blocks
                                        if b.block_type is BlockType.AVRO_DATA and b.schema is not None]
    decoded: dict[int, pa.Table] = {}
    groups = decode_avro_columns_by_schema([(s, b.content) for b, s in data], columns=set(job.table_schema.names))
    for idx, tables in groups:
        whole = _with_flags(ex.conform(pa.concat_tables(tables), job.table_schema), job)
        at = 0
        for i, t in zip(idx, tables, strict=True):
            decoded[id(data[i][0])] = whole.slice(at, t.num_rows)
            at += t.num_rows
    return [_records_of(blocks, job, decoded) for blocks in counting]


def _with_flags(t: pa.Table, job: SliceJob) -> pa.Table:
    """Decoded data records as :func:`log_records` rows (without ``_lg_seq``): not natural-order deletes, deletes
    where the ``_hoodie_is_deleted`` column says so."""
    t = t.append_column(NATURAL, pa.repeat(pa.scalar(False), t.num_rows))
    if ex.IS_DELETED in t.column_names:
        flag = pc.fill_null(t.column(ex.IS_DELETED).cast(pa.bool_()), False)
    else:
        flag = pa.repeat(pa.scalar(False), t.num_rows)
    schema = _records_schema(job)
    return t.append_column(DELETE, flag).select(schema.names).cast(schema)


def _records_schema(job: SliceJob) -> pa.Schema:
    return pa.schema([*job.table_schema, pa.field(NATURAL, pa.bool_()), pa.field(DELETE, pa.bool_())])


def _records_of(blocks: list[tuple[str, LogBlock]], job: SliceJob, decoded: Mapping[int, pa.Table]) -> pa.Table:
    """The records of a slice's counting blocks (``decoded``: data blocks already decoded into records, by ``id``)."""
    schema = _records_schema(job)
    parts: list[pa.Table] = []
    for path, b in blocks:
        if b.block_type is BlockType.DELETE:
            t = _decoded(path, b, lambda blk: _delete_records(blk, job.table_schema, job.ordering_field))
            t = t.append_column(DELETE, pa.repeat(pa.scalar(True), t.num_rows))
            parts.append(t.select(schema.names).cast(schema))
        elif id(b) in decoded:
            parts.append(decoded[id(b)])
        else:
            parts.append(_with_flags(_decoded(path, b, lambda blk: block_records(blk, job.table_schema)), job))
    if not parts:
        return schema.empty_table().append_column(SEQ, pa.array([], pa.int64()))
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    return table.append_column(SEQ, pa.array(np.arange(table.num_rows, dtype=np.int64)))


def _decoded(path: str, block: LogBlock, decode: Callable[[LogBlock], pa.Table]) -> pa.Table:
    """The rows of a block of a counting instant; content that does not decode is a damaged table, named."""
    try:
        return decode(block)
    except (LogFormatError, pa.ArrowException, *AVRO_DECODE_ERRORS) as exc:
        raise TableCorruptError(f"log block at offset {block.offset} does not decode: {exc}", path=path,
                                instant=block.instant) from None


def _order_values(table: pa.Table, field: str | None) -> list[Any]:
    if field is None or field not in table.column_names:
        return [None] * table.num_rows
    values: list[Any] = table.column(field).to_pylist()
    return values


def reduce_slice_logs(records: pa.Table, job: SliceJob, base: pa.Table | None) -> pa.Table:
    """Reduce log records (:func:`log_records`) to the winning record of each key, dropping log records that lose
    to the base row under event-time ordering.

    ``base`` needs the key, commit-time and ordering columns; it is only consulted for event-time ordering.
    Returns the winners in the table schema plus ``_lg_delete``.
    """
    out_names = [*job.table_schema.names, DELETE]
    if records.num_rows == 0:
        return records.select(out_names)
    if not job.event_time and pc.count_distinct(records.column(KEY_COL)).as_py() == records.num_rows:
        return records.select(out_names)  # one record per key: each wins (the common case of a single block)
    keys = records.column(KEY_COL).to_pylist()
    natural = records.column(NATURAL).to_pylist()
    winners: dict[str, int] = {}
    if not job.event_time:
        for i, k in enumerate(keys):  # log order: the newest record wins
            winners[k] = i
    else:
        orders = _order_values(records, job.ordering_field)
        killed: set[str] = set()  # keys a natural-order delete removed (the base row included)
        for i, k in enumerate(keys):
            if natural[i]:
                winners[k] = i
                killed.add(k)
                continue
            cur = winners.get(k)
            if cur is None or natural[cur] or orders[i] is None or orders[cur] is None or not orders[i] < orders[cur]:
                winners[k] = i
        if base is not None and base.num_rows and job.ordering_field in base.column_names:
            base_order = dict(zip(base.column(KEY_COL).to_pylist(), _order_values(base, job.ordering_field),
                                  strict=True))
            for k in list(winners):
                if k in killed or k not in base_order:
                    continue
                b, mine = base_order[k], orders[winners[k]]
                if b is not None and mine is not None and mine < b:
                    del winners[k]  # the stored row has the higher ordering value: it stays
    idx = pa.array(sorted(winners.values()), pa.int64())
    return records.take(idx).select(out_names)


def _base_for_merge(fs: FileIO, path: str | None, job: SliceJob, *, full: bool) -> pa.Table | None:
    if path is None:
        return None
    if full:
        return ex.read_base_file(fs, path)
    if not job.event_time:
        return None
    cols = [KEY_COL, TIME_COL] + ([job.ordering_field] if job.ordering_field else [])
    table = ex.read_base_file(fs, path, [c for c in cols if c])
    return filter_commit_range(table, job.start, None, job.in_range)


def in_commit_range(instant: str, start: str | None, end: str | None, in_range: frozenset[str] | None) -> bool:
    """Whether rows of ``instant`` belong to a read of ``(start, end]`` (or, with ``in_range``, of those instants)."""
    if in_range is not None:
        return instant in in_range
    return (start is None or instant > start) and (end is None or instant <= end)


def filter_commit_range(table: pa.Table, start: str | None, end: str | None,
                        in_range: frozenset[str] | None) -> pa.Table:
    """The rows of ``table`` whose commit time is in ``(start, end]`` (or, with ``in_range``, one of those); the
    table itself when every row is (a base file's row groups picked by their statistics usually hold only such rows:
    filtering costs a copy of every column, chunk by chunk)."""
    times = table.column(TIME_COL)
    if in_range is not None:
        mask = pc.is_in(times, value_set=pa.array(sorted(in_range), pa.string()))
    elif start is not None and end is not None:
        mask = pc.and_(pc.greater(times, start), pc.less_equal(times, end))
    elif start is not None:
        mask = pc.greater(times, start)
    elif end is not None:
        mask = pc.less_equal(times, end)
    else:
        return table
    if pc.all(mask, skip_nulls=False).as_py():  # a null commit time is not in any range: filtered
        return table
    return table.filter(mask)


def iter_slices(batches: Iterator[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    """The slice descriptors of a task."""
    for batch in batches:
        yield from batch.to_pylist()


SLICE_GROUP = 512  # slices whose logs a task decodes together (bounds the decoded records held at once)


def iter_slice_groups(batches: Iterator[pa.RecordBatch], size: int = SLICE_GROUP) -> Iterator[list[dict[str, Any]]]:
    """The slice descriptors of a task, ``size`` at a time."""
    group: list[dict[str, Any]] = []
    for desc in iter_slices(batches):
        group.append(desc)
        if len(group) >= size:
            yield group
            group = []
    if group:
        yield group


def read_slice_logs(desc: dict[str, Any], job: SliceJob, records: pa.Table | None = None) -> pa.Table:
    """The winning log records of one slice (table schema + ``_lg_delete``), for the reader's anti-join
    (``records``: the slice's :func:`log_records`, when already read)."""
    fs = job.filesystem()
    if records is None:
        records = log_records(fs, list(desc["log_paths"]), job)
    base = _base_for_merge(fs, desc["base_path"], job, full=False) if records.num_rows else None
    return reduce_slice_logs(records, job, base)


def read_slices_logs(descs: Sequence[dict[str, Any]], job: SliceJob) -> Iterator[pa.Table]:
    """:func:`read_slice_logs` of many slices, their logs decoded together (:func:`log_records_many`)."""
    records = log_records_many(job.filesystem(), [list(d["log_paths"]) for d in descs], job)
    for desc, recs in zip(descs, records, strict=True):
        yield read_slice_logs(desc, job, recs)


def deleted_keys(fs: FileIO, base_path: str | None, log_paths: list[str], job: SliceJob, keys: pa.Array) -> pa.Array:
    """Of ``keys``, those the slice's logs delete: their winning log record is a delete (an index lookup that read the
    key in the base file must not place it in this slice while another file group holds it live)."""
    records = log_records(fs, log_paths, job)
    records = records.filter(pc.is_in(records.column(KEY_COL), value_set=keys))
    if records.num_rows == 0:
        return pa.array([], pa.string())
    base = _base_for_merge(fs, base_path, job, full=False)
    if base is not None:
        base = base.filter(pc.is_in(base.column(KEY_COL), value_set=keys))
    winners = reduce_slice_logs(records, job, base)
    return winners.filter(winners.column(DELETE)).column(KEY_COL).combine_chunks()


def slice_paths(slices: Mapping[str, FileSlice]) -> dict[str, tuple[str | None, list[str]]]:
    """File id -> the base file's path (None: none) and log paths of each slice of ``slices`` (by file id)."""
    return {fid: (s.base.path if s.base is not None else None, [lg.path for lg in s.logs]) for fid, s in slices.items()}


def without_deleted_locations(table: pa.Table, descs: Mapping[str, tuple[str | None, list[str]]],
                              job: SliceJob) -> pa.Table:
    """The rows of ``table`` (``ex.KEY``, ``ex.PART``, ``ex.FID``: where an index lookup found each key in a base
    file) but those of keys found more than once in a partition that the logs of their slice delete (``descs``:
    :func:`slice_paths` of the slices whose logs may hold deletes; a key found in several file groups goes to those
    where it is live)."""
    pairs = pc.binary_join_element_wise(table.column(ex.KEY), table.column(ex.PART), "\x00")
    counts = pc.value_counts(pairs)
    twice = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(twice) == 0:
        return table
    drop = np.zeros(table.num_rows, dtype=bool)
    suspect = pc.is_in(pairs, value_set=twice)
    fids = table.column(ex.FID)
    fs = job.filesystem()
    for fid in pc.unique(fids.filter(suspect)).to_pylist():
        if fid not in descs:
            continue  # no log of the group deletes anything: the key is live there
        mine = pc.and_(suspect, pc.equal(fids, fid))
        base_path, log_paths = descs[fid]
        dead = deleted_keys(fs, base_path, log_paths, job, table.column(ex.KEY).filter(mine).combine_chunks())
        if len(dead):
            logger.info("file group %s: %d keys found in several groups are deleted here", fid, len(dead))
            hit = pc.and_(mine, pc.is_in(table.column(ex.KEY), value_set=dead))
            drop |= hit.to_numpy(zero_copy_only=False)
    return table.filter(pa.array(~drop)) if drop.any() else table


def merge_slice(base: pa.Table | None, winners: pa.Table, schema: pa.Schema) -> pa.Table:
    """The rows of a slice: base rows without a winning log record, plus the winners that are not deletes."""
    parts: list[pa.Table] = []
    if base is not None and base.num_rows:
        if winners.num_rows:
            # take, not filter: the same rows, and faster when few rows go (the usual case)
            base = base.take(pc.indices_nonzero(pc.invert(pc.is_in(base.column(KEY_COL),
                                                                    value_set=winners.column(KEY_COL)))))
        parts.append(ex.conform(base, schema))  # after the take: dictionary columns expand the rows kept
    live = winners.filter(pc.invert(winners.column(DELETE))).select(schema.names)
    parts.append(live.cast(schema))
    return pa.concat_tables(parts)


def _base_instant(path: str | None) -> str:
    parsed = BaseFileName.parse(path.rsplit("/", 1)[-1]) if path else None
    return parsed.instant if parsed else "null"


# ---- compaction ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompactionJob:
    """A compaction: merge slices into new base files of the compaction instant."""

    read: SliceJob
    write: ex.WriteJob  # instant, base, schema and footer settings of the new base files


def slice_rows(fs: FileIO, base_path: str | None, log_paths: list[str],
               job: SliceJob, *, base: pa.Table | None = None) -> tuple[pa.Table, pa.Table]:
    """The merged rows of one slice (table schema, meta columns as stored) and its winning log records; ``base`` is
    the base file's rows when the caller has read them already."""
    records = log_records(fs, log_paths, job)
    if base is None:
        base = _base_for_merge(fs, base_path, job, full=True)
    winners = reduce_slice_logs(records, job, base)
    return merge_slice(base, winners, job.table_schema), winners


def compact_slice(desc: dict[str, Any], job: CompactionJob, token: str) -> pa.Table:
    """Merge one slice (base + logs) into a new base file of the same file group; returns its write stat."""
    started = time.monotonic()
    fs = job.read.filesystem()
    merged, winners = slice_rows(fs, desc["base_path"], list(desc["log_paths"]), job.read)
    fid, partition = desc["file_id"], desc["partition"]
    name = f"{fid}_{token}_{job.write.instant}.parquet"
    rel = relative_path(partition, name)
    full = f"{job.write.base}/{rel}"
    merged = merged.set_column(merged.schema.get_field_index("_hoodie_file_name"), "_hoodie_file_name",
                               ex.constant(name, merged.num_rows))
    size = ex.write_base_file(fs, full, merged, job.write)
    stat = {
        "file_id": fid, "path": rel, "partition_path": partition,
        "prev_commit": _base_instant(desc["base_path"]),
        "num_writes": merged.num_rows, "num_deletes": int(pc.sum(winners.column(DELETE)).as_py() or 0),
        "num_update_writes": winners.num_rows, "num_inserts": 0, "total_write_bytes": size,
        "upsert_ms": int((time.monotonic() - started) * 1000), "create_ms": 0, "log_version": None,
        "base_file": None,
    }
    logger.debug("compacted %s (%d log files) into %s", fid, len(desc["log_paths"]), name)
    return pa.Table.from_pylist([stat], schema=ex.STAT_SCHEMA)
