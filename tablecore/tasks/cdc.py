"""Change-data-capture rows, computed in executors: the touched file groups of one partition read as they stood
before a commit and after it (:mod:`tablecore.cdc_planning`), diffed by key.

Per file group and key:

- a row after the commit whose ``_hoodie_commit_time`` is the commit, with no row before: ``i`` (insert);
- the same with a row before: ``u`` (update), the before image being that row;
- a row before with none after: ``d`` (delete);
- a row the commit did not write (its commit time is older) is unchanged, even where its file was rewritten.

A replacecommit (``insert_overwrite``) moves keys from the file groups it replaces into new ones: a delete and an
insert of one key in one commit become one update. Output rows carry ``op``, the commit's instant and completion
time, the key and partition, and ``before`` / ``after`` images (the table's columns, meta columns included; null
where there is none).

File groups whose changes a copy-on-write merge logged in a CDC log file (``DATA_BEFORE_AFTER``) are read from it
as is: its records give ``op`` and both images, the key is built from the images' key fields. Those files hold the
images without meta columns; the images get ``_hoodie_record_key`` and ``_hoodie_partition_path``, the after image
also ``_hoodie_commit_time`` (the commit) and ``_hoodie_file_name`` (the merge's new base file), and the rest
(``_hoodie_commit_seqno``, the before image's commit time and file name) are null.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.cdc_planning import CdcPlan
from tablecore.exceptions import TableCorruptError
from tablecore.format.avro_columnar import decode_avro_columns, decode_avro_columns_by_schema
from tablecore.format.avro_schema import META_FIELDS
from tablecore.format.avro_values import datums_to_arrow
from tablecore.format.log_content import decode_avro_data
from tablecore.format.log_format import BlockType, read_blocks
from tablecore.format.record_keys import record_keys
from tablecore.tasks import mor
from tablecore.tasks.write import conform, read_base_file

OP = "op"
COMMIT_TIME = "commit_time"
COMPLETION_TIME = "completion_time"
RECORD_KEY = "record_key"
PARTITION = "partition_path"
BEFORE = "before"
AFTER = "after"
INSERT, UPDATE, DELETE = "i", "u", "d"

DECODE_BYTES = 64 * 1024 * 1024  # CDC log files a task reads and decodes in one pass, at most (what it holds at once)
_FID = "_lg_cdc_fid"
_IDX = "_lg_cdc_idx"


def cdc_schema(table_schema: pa.Schema) -> pa.Schema:
    """The schema of CDC rows for a table schema (meta columns first)."""
    image = pa.struct(list(table_schema))
    return pa.schema([(OP, pa.string()), (COMMIT_TIME, pa.string()), (COMPLETION_TIME, pa.string()),
                      (RECORD_KEY, pa.string()), (PARTITION, pa.string()), (BEFORE, image), (AFTER, image)])


def _side_rows(slices: list[dict[str, Any]], job: mor.SliceJob, bases: dict[str, pa.Table]) -> pa.Table:
    """The rows of the given file slices (table schema + the file id of each row); base files are read once into
    ``bases`` (by path), as the two sides of a merge-on-read log append share theirs."""
    parts = []
    fs = job.filesystem()
    for s in slices:
        base = None
        if s["base_path"] is not None:
            base = bases.get(s["base_path"])
            if base is None:
                base = bases[s["base_path"]] = read_base_file(fs, s["base_path"])
        rows, _ = mor.slice_rows(fs, s["base_path"], list(s["log_paths"] or []), job, base=base)
        parts.append(rows.append_column(_FID, pa.repeat(pa.scalar(s["file_id"], pa.string()), rows.num_rows)))
    schema = pa.schema([*job.table_schema, pa.field(_FID, pa.string())])
    return pa.concat_tables([p.cast(schema) for p in parts]) if parts else schema.empty_table()


def _index(table: pa.Table) -> pa.Table:
    idx = pa.array(np.arange(table.num_rows, dtype=np.int64))
    return pa.table({_FID: table.column(_FID), mor.KEY_COL: table.column(mor.KEY_COL), _IDX: idx})


def _images(table: pa.Table, idx: pa.Array, schema: pa.Schema) -> pa.StructArray:
    """Rows ``idx`` of ``table`` as a struct array (null where ``idx`` is null)."""
    taken = table.select(schema.names).take(idx).combine_chunks()
    arrays = [taken.column(n).chunk(0) if taken.column(n).num_chunks else pa.array([], f.type)
              for n, f in zip(schema.names, schema, strict=True)]
    return pa.StructArray.from_arrays(arrays, fields=list(schema), mask=pc.is_null(idx))


def diff_partition(before: pa.Table, after: pa.Table, instant: str, completion: str, partition: str,
                   schema: pa.Schema, *, replace: bool) -> pa.Table:
    """The CDC rows of one commit in one partition (sorted by key) from the touched groups' rows before and after
    it."""
    written = pc.fill_null(pc.equal(after.column(mor.TIME_COL), instant), False)
    new = _index(after).rename_columns([_FID, mor.KEY_COL, "_a"])
    old = _index(before).rename_columns([_FID, mor.KEY_COL, "_b"])
    upserts = new.filter(written).join(old, keys=[_FID, mor.KEY_COL], join_type="left outer")
    gone = old.join(new, keys=[_FID, mor.KEY_COL], join_type="left anti")
    keys = pa.concat_arrays([upserts.column(mor.KEY_COL).combine_chunks(), gone.column(mor.KEY_COL).combine_chunks()])
    a_idx = pa.concat_arrays([upserts.column("_a").combine_chunks(), pa.nulls(gone.num_rows, pa.int64())])
    b_idx = pa.concat_arrays([upserts.column("_b").combine_chunks(), gone.column("_b").combine_chunks()])
    if replace and gone.num_rows and upserts.num_rows:
        # a key leaving a replaced group and arriving in a new one in the same commit: one update
        inserted = pc.is_null(b_idx)
        deleted = pc.is_null(a_idx)
        pairs = pa.table({mor.KEY_COL: keys, "_pos": pa.array(np.arange(len(keys), dtype=np.int64))})
        ins = pairs.filter(inserted)
        dels = pairs.filter(deleted).rename_columns([mor.KEY_COL, "_dpos"])
        matched = ins.join(dels, keys=mor.KEY_COL, join_type="inner")
        if matched.num_rows:
            b_list = b_idx.to_pylist()
            drop = np.zeros(len(keys), dtype=bool)
            for pos, dpos in zip(matched.column("_pos").to_pylist(), matched.column("_dpos").to_pylist(),
                                 strict=True):
                b_list[pos] = b_list[dpos]
                drop[dpos] = True
            keep = pa.array(~drop)
            b_idx = pa.array(b_list, pa.int64()).filter(keep)
            a_idx = a_idx.filter(keep)
            keys = keys.filter(keep)
    n = len(keys)
    order = pc.sort_indices(keys)  # by key: the index arrays are sorted, not the images
    keys, a_idx, b_idx = keys.take(order), a_idx.take(order), b_idx.take(order)
    ops = pc.if_else(pc.is_null(a_idx), DELETE, pc.if_else(pc.is_null(b_idx), INSERT, UPDATE))
    out = cdc_schema(schema)
    return pa.Table.from_arrays([
        ops.cast(pa.string()), pa.repeat(pa.scalar(instant, pa.string()), n),
        pa.repeat(pa.scalar(completion, pa.string()), n), keys.cast(pa.string()),
        pa.repeat(pa.scalar(partition, pa.string()), n),
        _images(before, b_idx, schema), _images(after, a_idx, schema),
    ], schema=out)


Images = tuple[pa.Table, np.ndarray]  # an image's data columns (table schema types) and where there is one


def _data_schema(plan: CdcPlan) -> pa.Schema:
    """The data columns a read takes from CDC log records: the images' columns and the record key's."""
    wanted = {*plan.image_schema.names, *plan.record_key}
    return pa.schema([f for f in plan.schema if f.name not in META_FIELDS and f.name in wanted])


def _decoded_fields(data_schema: pa.Schema) -> frozenset[str]:
    """The fields of a CDC log record to decode (``op`` and the images' ``data_schema`` fields): the others, such as
    the columns a read did not ask for, are stepped over."""
    return frozenset({"op", *(f"{side}.{name}" for side in (BEFORE, AFTER) for name in data_schema.names)})


def _block_images(block: Any, data_schema: pa.Schema,
                  decoded: Mapping[int, pa.Table]) -> tuple[pa.Array, Images, Images]:
    """``op`` and the before and after images of a CDC_DATA block: decoded column by column where the images' fields
    allow it (:mod:`tablecore.format.avro_columnar`; ``decoded``: blocks decoded already, by ``id``), else record
    by record."""
    table = decoded.get(id(block))
    if table is None:
        table = decode_avro_columns(block.content, json.loads(block.schema), columns=_decoded_fields(data_schema))
    if table is not None:
        images = []
        for side in (BEFORE, AFTER):
            struct = table.column(side).combine_chunks()
            data = pa.Table.from_batches([pa.RecordBatch.from_struct_array(struct)])
            images.append((conform(data, data_schema), np.asarray(struct.is_valid())))
        return table.column("op").combine_chunks(), images[0], images[1]
    records = decode_avro_data(block.content, block.schema)
    out = []
    for side in (BEFORE, AFTER):
        values = [r.get(side) for r in records]
        out.append((datums_to_arrow([v if v is not None else {} for v in values], data_schema),
                    np.array([v is not None for v in values], dtype=bool)))
    return pa.array([r["op"] for r in records], pa.string()), out[0], out[1]


def _image_array(image: Images, schema: pa.Schema, meta: dict[str, pa.Array]) -> pa.StructArray:
    """An image as a struct array of ``schema``: the data columns, the meta columns from ``meta`` or null."""
    data, present = image
    n = data.num_rows
    arrays = [meta[f.name] if f.name in meta else pa.nulls(n, f.type) if f.name in META_FIELDS
              else data.column(f.name).combine_chunks() for f in schema]
    return pa.StructArray.from_arrays(arrays, fields=list(schema), mask=pa.array(~present))


def _cdc_blocks(path: str, instant: str, fs: Any) -> list[Any]:
    """The CDC_DATA blocks of a CDC log file."""
    try:
        with fs.open_input(path) as stream:
            blocks = read_blocks(stream.read(), tolerate_truncated_tail=False)
    except FileNotFoundError:
        raise TableCorruptError("CDC log file is missing", path=path, instant=instant) from None
    for block in blocks:
        if block.block_type is not BlockType.CDC_DATA or block.schema is None:
            raise TableCorruptError(f"CDC log file holds a {block.block_type.name} block", path=path, instant=instant)
    return blocks


def _decoded_together(blocks: list[Any], data_schema: pa.Schema) -> dict[int, pa.Table]:
    """CDC_DATA blocks of one writer schema decoded in one pass (``op``, ``before``, ``after``), by block ``id``: a
    change feed over many days has hundreds of small CDC files, where per-block decoding costs more than the
    records. Blocks that do not decode together are left out (each is then decoded on its own)."""
    groups = decode_avro_columns_by_schema([(b.schema, b.content) for b in blocks],
                                           columns=_decoded_fields(data_schema))
    return {id(blocks[i]): t for idx, tables in groups for i, t in zip(idx, tables, strict=True)}


def logged_rows(cdc_files: list[dict[str, Any]], c: Any, partition: str, plan: CdcPlan, fs: Any, *,
                read: Mapping[str, list[Any]] | None = None,
                decoded: Mapping[int, pa.Table] | None = None) -> pa.Table:
    """The CDC rows of file groups whose merges logged their changes: the CDC log files read as is (``read``: their
    blocks read already, by path; ``decoded``: blocks decoded already, see :func:`_decoded_together`)."""
    image = plan.image_schema
    data_schema = _data_schema(plan)
    ops: list[pa.Array] = []
    sides: dict[str, list[Images]] = {BEFORE: [], AFTER: []}
    names: list[pa.Array] = []
    for f in cdc_files:
        path = f["cdc_path"]
        blocks = read[path] if read is not None and path in read else _cdc_blocks(path, c.instant, fs)
        for block in blocks:
            op, before, after = _block_images(block, data_schema, decoded or {})
            ops.append(op)
            sides[BEFORE].append(before)
            sides[AFTER].append(after)
            names.append(pa.repeat(pa.scalar(f["file_name"], pa.string()), len(op)))
    n = sum(len(o) for o in ops)
    out = cdc_schema(image)
    if not n:
        return out.empty_table()
    joined = {side: (pa.concat_tables([t for t, _ in images]), np.concatenate([m for _, m in images]))
              for side, images in sides.items()}
    (before_data, _), (after_data, has_after) = joined[BEFORE], joined[AFTER]
    keyed = pa.Table.from_arrays(  # the key of a change: from its after image, or the before image of a delete
        [pc.if_else(pa.array(has_after), after_data.column(k), before_data.column(k)) for k in plan.record_key],
        names=list(plan.record_key))
    keys, _ = record_keys(keyed, plan.record_key, complex_keys=plan.complex_keys)
    keys = keys.combine_chunks()
    part = pa.repeat(pa.scalar(partition, pa.string()), n)
    before_meta = {mor.KEY_COL: keys, mor.PART_COL: part}
    after_meta = {**before_meta, mor.TIME_COL: pa.repeat(pa.scalar(c.instant, pa.string()), n),
                  "_hoodie_file_name": pa.concat_arrays(names)}
    table = pa.Table.from_arrays([
        pa.concat_arrays(ops).cast(pa.string()), pa.repeat(pa.scalar(c.instant, pa.string()), n),
        pa.repeat(pa.scalar(c.completion, pa.string()), n), keys, part,
        _image_array(joined[BEFORE], image, before_meta), _image_array(joined[AFTER], image, after_meta),
    ], schema=out)
    return table.take(pc.sort_indices(keys))


def cdc_rows(desc: dict[str, Any], plan: CdcPlan, io: Any, *, read: Mapping[str, list[Any]] | None = None,
             decoded: Mapping[int, pa.Table] | None = None) -> pa.Table:
    """The CDC rows of one descriptor (a commit's touched groups of one partition), sorted by key (``read`` and
    ``decoded``: CDC log files read and decoded already, see :func:`logged_rows`)."""
    c = plan.commits[desc["commit"]]
    logged = list(desc.get("cdc_logs") or [])
    if logged:
        rows = logged_rows(logged, c, desc["partition"], plan, io, read=read, decoded=decoded)
        if not (desc[BEFORE] or desc[AFTER]):
            return rows
        diffed = _diffed_rows(desc, c, plan, io)
        both = pa.concat_tables([rows, diffed])
        return both.take(pc.sort_indices(both.column(RECORD_KEY)))
    return _diffed_rows(desc, c, plan, io)


def _diffed_rows(desc: dict[str, Any], c: Any, plan: CdcPlan, io: Any) -> pa.Table:
    """The CDC rows of the descriptor's file groups read before and after the commit and diffed."""
    jobs = {side: mor.SliceJob(io=io, table_schema=plan.schema,
                               valid_instants=(c.before if side == BEFORE else c.after).valid_instants,
                               event_time=plan.event_time, ordering_field=plan.ordering_field,
                               log_extents=plan.log_extents) for side in (BEFORE, AFTER)}
    bases: dict[str, pa.Table] = {}
    before = _side_rows(list(desc[BEFORE] or []), jobs[BEFORE], bases)
    after = _side_rows(list(desc[AFTER] or []), jobs[AFTER], bases)
    return diff_partition(before, after, c.instant, c.completion, desc["partition"], plan.image_schema,
                          replace=c.replace)


def _by_weight(descs: list[dict[str, Any]], limit: int) -> Iterator[list[dict[str, Any]]]:
    """Consecutive descriptors in runs of at most ``limit`` bytes to read (a heavier descriptor alone)."""
    run: list[dict[str, Any]] = []
    total = 0
    for d in descs:
        w = int(d.get("weight") or 0)
        if run and total + w > limit:
            yield run
            run, total = [], 0
        run.append(d)
        total += w
    if run:
        yield run


def iter_cdc_rows(batches: Iterator[pa.RecordBatch], plan: CdcPlan, io: Any) -> Iterator[pa.RecordBatch]:
    """The CDC rows of a task's descriptors, in order; the CDC log files of up to :data:`DECODE_BYTES` of
    descriptors are read and decoded together."""
    for batch in batches:
        for descs in _by_weight(batch.to_pylist(), DECODE_BYTES):
            read = {f["cdc_path"]: _cdc_blocks(f["cdc_path"], plan.commits[d["commit"]].instant, io)
                    for d in descs for f in d.get("cdc_logs") or []}
            decoded = _decoded_together([b for blocks in read.values() for b in blocks], _data_schema(plan))
            for desc in descs:
                rows = cdc_rows(desc, plan, io, read=read, decoded=decoded)
                if rows.num_rows:
                    yield from rows.to_batches(max_chunksize=65536)


def read_cdc_locally(io: Any, plan: CdcPlan) -> pa.Table:
    """Every CDC row of ``plan``, read in this process, in commit order (then partition and key)."""
    batches = list(iter_cdc_rows(iter(plan.descriptors.to_batches()), plan, io))
    table = pa.Table.from_batches(batches, schema=cdc_schema(plan.image_schema))
    return sort_changes(table)


def sort_changes(table: pa.Table) -> pa.Table:
    """CDC rows in the order they happened: by completion time, instant, partition and key."""
    return table.sort_by([(COMPLETION_TIME, "ascending"), (COMMIT_TIME, "ascending"), (PARTITION, "ascending"),
                          (RECORD_KEY, "ascending")])
