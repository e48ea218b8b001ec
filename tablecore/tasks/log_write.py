"""Merge-on-read writes done in executors: a file group's incoming records appended as a new log file of its latest
slice (:func:`append_log`), or many groups' at once from one columnar encoding (:func:`append_logs`).

Upserts go into one AVRO_DATA block and deletes into one DELETE block, both stamped with the write's instant. A log
file appears whole and never over another writer's: on an object store one conditional put; elsewhere it is written
under ``.hoodie/.temp/<instant>/`` and moved into the partition only if the name is free (a hard link on a disk).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.format.avro_columnar import block_content, encode_avro_columns, encode_avro_records
from tablecore.format.avro_schema import META_FIELDS
from tablecore.format.avro_values import arrow_to_datums
from tablecore.format.file_view import relative_path
from tablecore.format.log_content import DeleteRecord, encode_avro_data, encode_delete
from tablecore.format.log_format import BlockType, HeaderKey, LogFileName, encode_block
from tablecore.format.log_integrity import checksum
from tablecore.tasks import write as ex


def _records(upserts: pa.Table, job: ex.WriteJob, partitions: pa.Array, file_ids: pa.Array,
             seqno_prefixes: pa.Array, positions: np.ndarray) -> pa.Table:
    """``upserts`` as log records: the meta columns (the write's instant, ``<prefix>_<position>`` sequence numbers,
    the keys, partition paths and file ids given) and the data columns in the table schema."""
    n = upserts.num_rows
    out_schema = pa.schema([pa.field(m, pa.string()) for m in META_FIELDS] + list(job.target_schema))
    seq = pc.binary_join_element_wise(seqno_prefixes, pa.array(positions.astype(str)), "_")
    meta = [ex.constant(job.instant, n), seq, upserts.column(ex.KEY).cast(pa.string()), partitions, file_ids]
    return pa.Table.from_arrays(meta + ex.conform(upserts, job.target_schema).columns, schema=out_schema)


def _headers(job: ex.WriteJob) -> list[tuple[HeaderKey, str]]:
    return [(HeaderKey.INSTANT_TIME, job.instant), (HeaderKey.SCHEMA, job.avro_schema_with_meta)]


def append_log(batch: pa.Table, job: ex.WriteJob, token: str, task_partition: int) -> pa.Table:
    """Write the incoming records of one file group as a new log file of its latest slice; its write stat."""
    started = time.monotonic()
    fid = batch.column(ex.FID)[0].as_py()
    plan = job.groups[fid]
    assert plan.log_version is not None
    incoming = ex.dedupe(batch, job.ordering_field)
    deleted = ex.delete_mask(incoming)
    upserts = incoming.filter(pc.invert(deleted))
    deletes = incoming.filter(deleted)

    content = b""
    if upserts.num_rows:
        n = upserts.num_rows
        records = _records(upserts, job, ex.constant(plan.partition, n), ex.constant(fid, n),
                           ex.constant(f"{job.instant}_{task_partition}", n), np.arange(n))
        avro_schema = json.loads(job.avro_schema_with_meta)
        # flat records of primitive fields are encoded column-wise; anything else record by record with fastavro
        block = encode_avro_columns(records, avro_schema)
        if block is None:
            block = encode_avro_data(arrow_to_datums(records, avro_schema), job.avro_schema_with_meta)
        content += encode_block(BlockType.AVRO_DATA, _headers(job), block)
    if deletes.num_rows:
        keys = deletes.column(ex.KEY).to_pylist()
        with_order = (job.event_time and job.ordering_avro_type is not None
                      and not pa.types.is_null(deletes.column(ex.ORD).type))
        orders = deletes.column(ex.ORD).to_pylist() if with_order else [None] * len(keys)
        recs = [DeleteRecord(k, plan.partition, o) for k, o in zip(keys, orders, strict=True)]
        content += encode_block(BlockType.DELETE, _headers(job),
                                encode_delete(recs, job.ordering_avro_type if with_order else None))
    if not content:
        return ex.STAT_SCHEMA.empty_table()
    return pa.Table.from_pylist([_publish(job, fid, token, content, upserts.num_rows, deletes.num_rows, started)],
                                schema=ex.STAT_SCHEMA)


def append_logs(rows: pa.Table, groups: Sequence[tuple[str, int, int]], job: ex.WriteJob, tokens: Sequence[str],
                tasks: Sequence[int], *, threads: int = 1) -> list[dict[str, object]] | None:
    """Like :func:`append_log` for many file groups at once: ``rows`` sorted by file group, ``groups`` (file id,
    offset and length of its rows), group ``i`` written as by ``append_log(..., tokens[i], tasks[i])``. The records
    of all groups are encoded in one columnar pass and cut per group; the files are the ones :func:`append_log`
    writes, ``threads`` at a time. Returns the write stats, or None (nothing written) when the batch needs the
    per-group path: a key given twice in a group, a delete, or a schema the columnar encoder does not take."""
    started = time.monotonic()
    if not rows.num_rows or ex.IS_DELETED in rows.column_names or \
            (ex.OP in rows.column_names and pc.any(pc.equal(rows.column(ex.OP), "D")).as_py()):
        return None
    counts = np.array([n for _, _, n in groups], dtype=np.int64)
    which = pa.array(np.repeat(np.arange(len(groups)), counts))
    if pc.count_distinct(pc.binary_join_element_wise(rows.column(ex.KEY).cast(pa.string()),
                                                     which.cast(pa.string()), "\x00")).as_py() != rows.num_rows:
        return None
    fids = pa.array([f for f, _, _ in groups], pa.string())
    partitions = pa.array([job.groups[f].partition for f, _, _ in groups], pa.string())
    prefixes = pa.array([f"{job.instant}_{t}" for t in tasks], pa.string())
    offsets = np.repeat(np.array([o for _, o, _ in groups], dtype=np.int64), counts)  # each row's group start
    records = _records(rows, job, partitions.take(which), fids.take(which), prefixes.take(which),
                       np.arange(rows.num_rows) - offsets)
    encoded = encode_avro_records(records, json.loads(job.avro_schema_with_meta))
    if encoded is None:
        return None
    body, ends = encoded

    def publish(i: int) -> dict[str, object]:
        fid, offset, n = groups[i]
        start = int(ends[offset - 1]) if offset else 0
        content = encode_block(BlockType.AVRO_DATA, _headers(job),
                               block_content(body, start, int(ends[offset + n - 1]), n))
        return _publish(job, fid, tokens[i], content, n, 0, started)

    if threads <= 1:
        return [publish(i) for i in range(len(groups))]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakegate-log") as pool:  # mostly file creation
        return list(pool.map(publish, range(len(groups))))


def _publish(job: ex.WriteJob, fid: str, token: str, content: bytes, upserts: int, deletes: int,
             started: float) -> dict[str, object]:
    """Write ``content`` as the group's new log file, never over another writer's; its write stat.

    Records appended to an existing file group's log count as updates, as in Hudi's write stats: with the bucket
    index, new keys land in logs too, and telling them apart would mean reading every touched group's keys — the
    lookup the bucket index exists to avoid."""
    plan = job.groups[fid]
    assert plan.log_version is not None
    fs = job.filesystem()
    fs.makedirs(f"{job.base}/{plan.partition}" if plan.partition else job.base)
    version = plan.log_version
    log_instant = plan.prev_commit
    if job.logs_named_by_instant:  # version 8: a new log file of this delta commit (its slice: by completion time)
        log_instant, version = job.instant, 1
    while True:
        # create-if-absent (a hard-linked temporary file on a disk, a conditional put on S3): a concurrent writer in
        # another process derives the same name (version, and a write token made of Spark's task ids); overwriting
        # its log would lose its commit, so the next version is taken instead (the two writes touch one file group:
        # at most one of them publishes)
        name = LogFileName(fid, log_instant, version, token).name
        rel = relative_path(plan.partition, name)
        if fs.whole_object_writes:  # one conditional put: whole or nothing, never over another object
            if fs.create_if_absent(f"{job.base}/{rel}", content):
                break
        else:  # complete under .hoodie/.temp/<instant>/ (a rollback clears it), then linked into place
            tmp = f"{job.base}/.hoodie/.temp/{job.instant}/{name}"
            with fs.open_output(tmp) as sink:
                sink.write(content)
            if fs.move_if_absent(tmp, f"{job.base}/{rel}"):
                break
            fs.delete(tmp)
        version += 1
    base_name = plan.old_base_path.rsplit("/", 1)[-1] if plan.old_base_path else ""
    return {
        "file_id": fid, "path": rel, "partition_path": plan.partition, "prev_commit": log_instant,
        "num_writes": upserts + deletes, "num_deletes": deletes, "num_update_writes": upserts,
        "num_inserts": 0, "total_write_bytes": len(content), "upsert_ms": int((time.monotonic() - started) * 1000),
        "create_ms": 0, "log_version": version, "base_file": base_name, "crc32": checksum(content),
        "cdc_path": None, "cdc_size": None,
    }
