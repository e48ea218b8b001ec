"""What runs in Spark executors: merge one file group with its incoming records and write the new base file.

Pure pyarrow. A write task receives its rows sorted by file group (``mapInArrow``); :func:`iter_groups` cuts them
into one table per file group and :func:`merge_and_write` handles each. Only a one-row write stat per file group goes
back to the driver.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablecore.exceptions import TableCorruptError
from tablecore.format.avro_schema import META_FIELDS
from tablecore.format.bloom_filter import BLOOM_FILTER_KEY, TYPE_CODE_KEY, key_footer
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_naming import BaseFileName
from tablecore.format.file_view import relative_path
from tablecore.io import FileIO
from tablecore.tasks.cdc_log import write_cdc_log

if TYPE_CHECKING:
    from tablecore.tasks.mor import SliceJob

logger = logging.getLogger(__name__)

KEY = "_lg_key"
PART = "_lg_part"
OP = "_lg_op"
FID = "_lg_fid"
ORD = "_lg_ord"
NEW = "_lg_new"  # with a record index: the row was not located (an insert), so the index gets an entry for it
INTERNAL_COLUMNS = frozenset((KEY, PART, OP, FID, ORD, NEW))
"""The writer's own columns next to the data columns in the rows of a write job."""
IS_DELETED = "_hoodie_is_deleted"

STAT_SCHEMA = pa.schema([
    ("file_id", pa.string()), ("path", pa.string()), ("partition_path", pa.string()), ("prev_commit", pa.string()),
    ("num_writes", pa.int64()), ("num_deletes", pa.int64()), ("num_update_writes", pa.int64()),
    ("num_inserts", pa.int64()), ("total_write_bytes", pa.int64()), ("upsert_ms", pa.int64()),
    ("create_ms", pa.int64()), ("log_version", pa.int64()), ("base_file", pa.string()), ("crc32", pa.int64()),
    ("cdc_path", pa.string()), ("cdc_size", pa.int64()),
])
STAT_DDL = ("file_id string, path string, partition_path string, prev_commit string, num_writes long, "
            "num_deletes long, num_update_writes long, num_inserts long, total_write_bytes long, upsert_ms long, "
            "create_ms long, log_version long, base_file string, crc32 long, cdc_path string, cdc_size long")


@dataclass(frozen=True)
class GroupPlan:
    """Where a file group lives and which base file it currently has."""

    partition: str
    old_base_path: str | None  # full path in the file system
    prev_commit: str  # the instant of the group's current base file (its slice), or "null" for a new group
    log_version: int | None = None  # merge-on-read: append a log file of this version instead of rewriting
    rewrite: bool = False  # a small file chosen to take inserts: rewritten even on merge-on-read
    # merge-on-read with event-time ordering, a slice whose logs hold deletes: their paths and how to read them. A
    # key such a delete removed without an ordering value, written again, rewrites the slice instead of taking a log
    # (:func:`tablecore.tasks.slice_write.write_group`)
    slice_logs: tuple[str, ...] = ()
    slice_read: SliceJob | None = None


@dataclass(frozen=True)
class WriteJob:
    """Everything an executor needs, pickled into the task closure (small: no data)."""

    io: FileIO  # the table's storage (picklable)
    base: str
    instant: str
    target_schema: pa.Schema  # data columns, table order
    avro_schema_with_meta: str
    groups: dict[str, GroupPlan]
    event_time: bool
    ordering_field: str | None
    sort_inserts: bool = False
    ordering_avro_type: str | None = None  # Avro type of the ordering field (delete blocks carry its values)
    unique_columns: tuple[str, ...] = ("_hoodie_commit_seqno", "_hoodie_record_key")  # no dictionary encoding
    logs_named_by_instant: bool = False  # table version 8: a log file is named by the delta commit that writes it
    cdc_mode: str | None = None  # the table writes CDC log files (hoodie.table.cdc.supplemental.logging.mode)
    bloom_filters: bool = False  # base files carry Hudi's key bloom filter in their footers

    def filesystem(self) -> FileIO:
        """The storage to write to."""
        return self.io


class StatRow(Protocol):
    """A row of STAT_SCHEMA as Spark returns it (a ``Row``: fields by name)."""

    def __getitem__(self, name: Any) -> Any: ...


def write_stats(rows: Iterable[StatRow]) -> list[WriteStat]:
    """Write stats from the STAT_SCHEMA rows a write or compaction job returned, ordered by partition and file."""
    return [
            WriteStat(file_id=r["file_id"], path=r["path"], partition_path=r["partition_path"],
                      prev_commit=r["prev_commit"], num_writes=r["num_writes"], num_deletes=r["num_deletes"],
                      num_update_writes=r["num_update_writes"], num_inserts=r["num_inserts"],
                      total_write_bytes=r["total_write_bytes"], file_size_in_bytes=r["total_write_bytes"],
                      total_upsert_time_ms=r["upsert_ms"], total_create_time_ms=r["create_ms"],
                      log_version=r["log_version"], base_file=r["base_file"],
                      log_files=(r["path"].rsplit("/", 1)[-1],) if r["log_version"] is not None else (),
                      log_offset=0 if r["log_version"] is not None else None, crc32=r["crc32"],
                      cdc_stats={r["cdc_path"]: r["cdc_size"]} if r["cdc_path"] else None)
            for r in sorted(rows, key=lambda r: (r["partition_path"], r["file_id"]))
    ]


# meta columns with one value or a few in a base file (the commit times, the partition path, the file name): read as
# dictionaries and then expanded, which is faster than decoding each row's string from the file
DICTIONARY_META = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"]


def _expanded(table: pa.Table) -> pa.Table:
    """``table`` with the :data:`DICTIONARY_META` columns read as dictionaries back to their value type."""
    for name in DICTIONARY_META:
        i = table.schema.get_field_index(name)
        field = table.schema.field(i) if i >= 0 else None
        if field is not None and pa.types.is_dictionary(field.type):
            value_type = field.type.value_type
            table = table.set_column(i, field.with_type(value_type), table.column(i).cast(value_type))
    return table


def read_base_file(fs: FileIO, path: str, columns: list[str] | None = None, *, present_only: bool = False,
                   use_threads: bool = True, expand: bool = True,
                   row_groups: Callable[[pq.FileMetaData], list[int] | None] | None = None) -> pa.Table:
    """The rows of a base file (``columns`` only, if given; with ``present_only``, those of them the file has: an
    older file lacks columns added later, which :func:`conform` fills with nulls). ``expand=False`` leaves the
    :data:`DICTIONARY_META` columns as dictionaries. ``row_groups`` picks the row groups to read from the file's
    footer (None from it: all).

    Raises:
        TableCorruptError: the file is missing or is not a readable Parquet file (cut short, overwritten).
    """
    name = path.rsplit("/", 1)[-1]
    parsed = BaseFileName.parse(name)
    instant = parsed.instant if parsed else None
    try:
        with fs.open_input(path) as f:
            parquet = pq.ParquetFile(f, read_dictionary=DICTIONARY_META)
            if present_only and columns is not None:
                present = set(parquet.schema_arrow.names)
                columns = [c for c in columns if c in present]
            picked = row_groups(parquet.metadata) if row_groups is not None else None
            if picked is None or len(picked) == parquet.metadata.num_row_groups:
                table = parquet.read(columns=columns, use_threads=use_threads)
            elif picked:
                table = parquet.read_row_groups(picked, columns=columns, use_threads=use_threads)
            else:
                table = parquet.schema_arrow.empty_table()
                table = table.select(columns) if columns is not None else table
            return _expanded(table) if expand else table
    except FileNotFoundError:
        raise TableCorruptError("base file is missing", path=path, instant=instant) from None
    except pa.ArrowInvalid as exc:
        raise TableCorruptError(f"base file does not open as Parquet: {exc}", path=path, instant=instant) from None


def conform(table: pa.Table, schema: pa.Schema, *, dictionaries: bool = False) -> pa.Table:
    """Select and cast ``table`` to ``schema``: missing columns become nulls, types are promoted. With
    ``dictionaries``, a dictionary column of the right value type stays a dictionary (a later :func:`conform`
    expands it: after a merge has dropped rows, there are fewer to expand)."""
    cols = []
    fields = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            kept = dictionaries and pa.types.is_dictionary(col.type) and col.type.value_type.equals(f.type)
            if not kept and not col.type.equals(f.type):
                col = col.cast(f.type)
            cols.append(col)
            fields.append(f.with_type(col.type) if kept else f)
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
            fields.append(f)
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def constant(value: str, n: int) -> pa.Array:
    """A string column holding one value ``n`` times."""
    return pa.repeat(pa.scalar(value, pa.string()), n)


def iter_groups(batches: Iterator[pa.RecordBatch], key: str) -> Iterator[pa.Table]:
    """Yield one table per run of equal ``key`` values from batches sorted by ``key`` (runs may span batches)."""
    pending: list[pa.RecordBatch] = []
    current: Any = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        keys = batch.column(key)
        starts = [0]
        if batch.num_rows > 1:
            changes = pc.not_equal(keys.slice(1), keys.slice(0, batch.num_rows - 1))
            starts += [i + 1 for i in pc.indices_nonzero(changes).to_pylist()]
        starts.append(batch.num_rows)
        for lo, hi in itertools.pairwise(starts):
            value = keys[lo].as_py()
            if pending and value != current:
                yield pa.Table.from_batches(pending)
                pending = []
            current = value
            pending.append(batch.slice(lo, hi - lo))
    if pending:
        yield pa.Table.from_batches(pending)


_NULLS_PER_SORT_KEY = int(pa.__version__.split(".")[0]) >= 25
"""pyarrow 25 takes the null placement per sort key (and deprecates the one for all keys, which older versions
alone know)."""


def _sort_indices_nulls_first(t: pa.Table, names: list[str]) -> pa.Array:
    """The indices that sort ``t`` by ``names``, ascending, nulls first."""
    if _NULLS_PER_SORT_KEY:
        return pc.sort_indices(t, sort_keys=[(n, "ascending", "at_start") for n in names])
    return pc.sort_indices(t, sort_keys=[(n, "ascending") for n in names], null_placement="at_start")


def dedupe(incoming: pa.Table, ordering: str | None) -> pa.Table:
    """Keep one record per key: the highest ordering value (ties: the later row)."""
    n = incoming.num_rows
    if n <= 1 or pc.count_distinct(incoming.column(KEY)).as_py() == n:  # nothing to dedupe (the common case)
        return incoming
    idx = pa.array(np.arange(n, dtype=np.int64))
    t = incoming.append_column("_lg_idx", idx)
    names = [KEY, *([ORD] if ordering is not None and ORD in t.column_names else []), "_lg_idx"]
    t = t.take(_sort_indices_nulls_first(t, names))
    keys = t.column(KEY)
    if len(keys) > 1:
        differs = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
        last = pa.concat_arrays([*differs.chunks, pa.array([True])])
        t = t.filter(last)
    return t.drop_columns(["_lg_idx"])


def write_base_file(fs: FileIO, full: str, result: pa.Table, job: WriteJob, *, own_rows: int = 0) -> int:
    """Write ``result`` (meta columns first) as a base file with Hudi's footer metadata; returns its size.

    ``own_rows``: the last rows of ``result`` are the writing commit's own and the others older commits' (a merge
    keeps those): the two go in separate row groups, so that the footer's ``_hoodie_commit_time`` statistics let an
    incremental pull of the commit skip the rows it kept (:func:`tablecore.tasks.read.row_groups_in_range`; Spark's
    Parquet reader skips them by the same statistics)."""
    md: dict[str, str] = {"parquet.avro.schema": job.avro_schema_with_meta, "writer.model.name": "avro"}
    footer = key_footer(result.column("_hoodie_record_key"), bloom=job.bloom_filters)
    bloom = {k: footer.pop(k) for k in (BLOOM_FILTER_KEY, TYPE_CODE_KEY) if k in footer}
    result = result.replace_schema_metadata({**md, **footer})
    with fs.open_output(full) as sink:
        dictionary = [c for c in result.column_names if c not in job.unique_columns]
        with pq.ParquetWriter(sink, result.schema, compression="snappy", use_dictionary=dictionary) as writer:
            split = result.num_rows - own_rows
            parts = [result.slice(0, split), result.slice(split)] if 0 < split < result.num_rows else [result]
            for part in parts:
                writer.write_table(part)
            if bloom:  # a Parquet key-value entry only: as schema metadata it would be stored twice (ARROW:schema)
                writer.add_key_value_metadata(bloom)
        return int(sink.tell())


def delete_mask(incoming: pa.Table) -> pa.Array:
    """True for incoming rows that are deletes: of a delete operation, or flagged ``_hoodie_is_deleted``."""
    deleted = pc.equal(incoming.column(OP), "D")
    if IS_DELETED in incoming.column_names:
        deleted = pc.or_kleene(deleted, pc.fill_null(incoming.column(IS_DELETED).cast(pa.bool_()), False))
    return pc.fill_null(deleted, False).combine_chunks() if isinstance(deleted, pa.ChunkedArray) \
        else pc.fill_null(deleted, False)


def merge_and_write(batch: pa.Table, job: WriteJob, token: str, task_partition: int, *,
                    current: pa.Table | None = None) -> pa.Table:
    """Merge the incoming records of one file group with its current base file and write the new base file.

    ``current``: the group's current rows when they are not its base file's alone (a merge-on-read slice's base
    merged with its logs, as :func:`tablecore.tasks.mor.slice_rows` returns them)."""
    started = time.monotonic()
    fid = batch.column(FID)[0].as_py()
    plan = job.groups[fid]
    fs = job.filesystem()
    incoming = dedupe(batch, job.ordering_field)
    deleted = delete_mask(incoming)

    old: pa.Table | None = current
    if old is None and plan.old_base_path is not None:
        old = read_base_file(fs, plan.old_base_path)
    old_keys = old.column("_hoodie_record_key") if old is not None else pa.chunked_array([], pa.string())

    # event-time ordering: an incoming record older than the stored one is dropped
    # (a delete batch without ordering values has a null-typed ordering column: its deletes always apply)
    if (job.event_time and old is not None and job.ordering_field and incoming.num_rows
            and not pa.types.is_null(incoming.column(ORD).type)):
        stored = pa.table({KEY: old_keys, "_lg_old_ord": conform(old, job.target_schema).column(job.ordering_field)})
        # only the key, ordering and operation columns take part (Acero joins no nested non-key columns)
        probe = incoming.select([KEY, ORD, OP]).append_column("_lg_i", pa.array(np.arange(incoming.num_rows)))
        joined = probe.join(stored, keys=KEY, join_type="left outer")
        joined = joined.sort_by("_lg_i")
        new_ord = joined.column(ORD)
        old_ord = joined.column("_lg_old_ord").cast(new_ord.type)
        stale = pc.fill_null(pc.less(new_ord, old_ord), False)
        # deletes without an ordering value always apply (natural order)
        stale = pc.and_(stale, pc.invert(pc.and_(pc.equal(joined.column(OP), "D"), pc.is_null(new_ord))))
        keep = pc.invert(stale)
        incoming = incoming.filter(keep)
        deleted = deleted.filter(keep)

    upserts = incoming.filter(pc.invert(deleted))
    deletes = incoming.filter(deleted)
    touched = pa.concat_arrays([upserts.column(KEY).combine_chunks(), deletes.column(KEY).combine_chunks()])
    hit = pc.is_in(old_keys, value_set=touched) if old is not None else pa.array([], pa.bool_())
    num_deletes = 0
    num_updates = 0
    if old is not None and len(touched):
        num_updates = int(pc.sum(pc.is_in(upserts.column(KEY), value_set=old_keys.combine_chunks())).as_py() or 0)
        num_deletes = int(pc.sum(pc.is_in(deletes.column(KEY), value_set=old_keys.combine_chunks())).as_py() or 0)
    num_inserts = upserts.num_rows - num_updates

    if old is None and upserts.num_rows == 0:
        return STAT_SCHEMA.empty_table()  # nothing to write: deletes of unknown keys

    new_name = f"{fid}_{token}_{job.instant}.parquet"
    rel = relative_path(plan.partition, new_name)
    full = f"{job.base}/{rel}"
    meta_type = pa.string()
    parts: list[pa.Table] = []
    out_schema = pa.schema([pa.field(m, meta_type) for m in META_FIELDS] + list(job.target_schema))
    if job.sort_inserts and upserts.num_rows:
        upserts = upserts.sort_by([(PART, "ascending"), (KEY, "ascending")])
    data = conform(upserts, job.target_schema)
    if old is not None:
        kept = old.filter(pc.invert(hit)) if len(touched) else old
        kept_data = conform(kept, job.target_schema)
        meta = [kept.column(m).cast(meta_type) if m in kept.column_names else pa.nulls(kept.num_rows, meta_type)
                for m in META_FIELDS[:4]]
        meta.append(constant(new_name, kept.num_rows))
        parts.append(pa.Table.from_arrays(meta + kept_data.columns, schema=out_schema))
    if upserts.num_rows:
        n = upserts.num_rows
        seq = pc.binary_join_element_wise(
            constant(f"{job.instant}_{task_partition}", n), pa.array(np.arange(n).astype(str)), "_")
        meta = [constant(job.instant, n), seq, upserts.column(KEY).cast(meta_type),
                constant(plan.partition, n), constant(new_name, n)]
        parts.append(pa.Table.from_arrays(meta + data.columns, schema=out_schema))
    result = pa.concat_tables(parts) if parts else out_schema.empty_table()

    cdc = None
    if job.cdc_mode is not None and old is not None:  # a merge into an existing base file: its changes logged
        cdc = write_cdc_log(fs, job.base, job.cdc_mode, job.instant, plan.partition, fid, token,
                            job.avro_schema_with_meta, conform(old, job.target_schema), old_keys.combine_chunks(),
                            data, upserts.column(KEY).combine_chunks().cast(meta_type),
                            deletes.column(KEY).combine_chunks().cast(meta_type))
    size = write_base_file(fs, full, result, job, own_rows=upserts.num_rows)
    elapsed = int((time.monotonic() - started) * 1000)
    stat = {
        "file_id": fid, "path": rel, "partition_path": plan.partition, "prev_commit": plan.prev_commit,
        "num_writes": result.num_rows, "num_deletes": num_deletes, "num_update_writes": num_updates,
        "num_inserts": num_inserts, "total_write_bytes": size,
        "upsert_ms": elapsed if old is not None else 0, "create_ms": 0 if old is not None else elapsed,
        "log_version": None, "base_file": None,
        "cdc_path": cdc[0] if cdc else None, "cdc_size": cdc[1] if cdc else None,
    }
    return pa.Table.from_pylist([stat], schema=STAT_SCHEMA)
