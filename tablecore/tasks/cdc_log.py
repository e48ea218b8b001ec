"""Writing CDC log files the way Apache Hudi's ``HoodieMergeHandleWithChangeLog`` does (docs/cdc.md has the layout and
the Java sources it was checked against).

A merge into an existing base file of a table with ``hoodie.table.cdc.enabled`` leaves, beside the new base file,
``.<fileId>_<instant>.log.1_<writeToken>.cdc``: a Hudi log file with one ``CDC_DATA`` block (type 6; headers
``INSTANT_TIME`` and ``SCHEMA``; content an Avro data block) holding one record per insert (``i``), update (``u``)
and delete (``d``) of the merge. Rows the merge only copied are not logged. A new file group (only inserts) gets no
CDC file: readers infer its inserts from the base file (``BASE_FILE_INSERT``).

The record schema depends on ``hoodie.table.cdc.supplemental.logging.mode``; the images are the table's records
without the ``_hoodie_*`` meta fields:

- ``DATA_BEFORE_AFTER``: ``CDC {op, ts_ms (the commit instant), before, after}``
- ``DATA_BEFORE``: ``CDC {op, record_key, before}``
- ``OP_KEY_ONLY``: ``Record {op, record_key}``
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tablecore.format.avro_schema import META_FIELDS
from tablecore.format.avro_values import arrow_to_datums
from tablecore.format.file_view import relative_path
from tablecore.format.log_content import encode_avro_data
from tablecore.format.log_format import BlockType, HeaderKey, LogFileName, encode_block
from tablecore.io import FileIO

CDC_MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")
_OP_KEY_ONLY_SCHEMA = ('{"type":"record","name":"Record","fields":[{"name":"op","type":["string","null"]},'
                       '{"name":"record_key","type":["string","null"]}]}')


def data_schema(avro_with_meta: str) -> dict[str, Any]:
    """The table's record schema without the meta fields (what CDC images hold)."""
    schema: dict[str, Any] = copy.deepcopy(json.loads(avro_with_meta))
    schema["fields"] = [f for f in schema["fields"] if f["name"] not in META_FIELDS]
    return schema


def cdc_schema(mode: str, record: dict[str, Any]) -> str:
    """The Avro schema text of CDC records (Hudi's ``HoodieCDCUtils.schemaBySupplementalLoggingMode``)."""
    if mode == "OP_KEY_ONLY":
        return _OP_KEY_ONLY_SCHEMA
    namespace = record.get("namespace")
    image = {k: v for k, v in record.items() if not (k == "namespace" and v == namespace)}
    full = f"{namespace}.{record['name']}" if namespace else record["name"]

    def opt(name: str, typ: Any) -> dict[str, Any]:
        return {"name": name, "type": ["null", typ], "doc": "", "default": None}

    if mode == "DATA_BEFORE":
        fields = [opt("op", "string"), opt("record_key", "string"), opt("before", image)]
    elif mode == "DATA_BEFORE_AFTER":
        fields = [opt("op", "string"), opt("ts_ms", "string"), opt("before", image), opt("after", full)]
    else:
        raise ValueError(f"unknown CDC supplemental logging mode {mode!r}: expected one of {', '.join(CDC_MODES)}")
    out: dict[str, Any] = {"type": "record", "name": "CDC"}
    if namespace:
        out["namespace"] = namespace
    out["fields"] = fields
    return json.dumps(out, separators=(",", ":"))


def cdc_records(mode: str, instant: str, ops: list[str], keys: list[str], before: list[Any],
                after: list[Any]) -> list[dict[str, Any]]:
    """The CDC records of one merge, in the order given."""
    if mode == "OP_KEY_ONLY":
        return [{"op": o, "record_key": k} for o, k in zip(ops, keys, strict=True)]
    if mode == "DATA_BEFORE":
        return [{"op": o, "record_key": k, "before": b} for o, k, b in zip(ops, keys, before, strict=True)]
    return [{"op": o, "ts_ms": instant, "before": b, "after": a} for o, b, a in zip(ops, before, after, strict=True)]


def write_cdc_log(fs: FileIO, base: str, mode: str, instant: str, partition: str, file_id: str, token: str,
                  avro_with_meta: str, old: pa.Table, old_keys: pa.Array, upserts: pa.Table, upsert_keys: pa.Array,
                  delete_keys: pa.Array) -> tuple[str, int] | None:
    """Write the CDC log file of one merge into an existing base file; returns (relative path, size), or None when
    the merge changed nothing.

    ``old`` is the old base file's rows in the table's data columns (``old_keys`` their keys); ``upserts`` the new
    rows in the same columns (``upsert_keys``); ``delete_keys`` the keys the merge deletes (absent ones are
    ignored). Updates and deletes are logged in the old file's row order, then inserts, as Hudi's merge handle
    emits them.
    """
    pos_u = pc.index_in(upsert_keys, value_set=old_keys)
    pos_d = pc.index_in(delete_keys, value_set=old_keys)
    n_del = int(pc.sum(pc.is_valid(pos_d)).as_py() or 0)
    if upserts.num_rows == 0 and n_del == 0:
        return None
    record = data_schema(avro_with_meta)
    schema = cdc_schema(mode, record)
    with_data = mode != "OP_KEY_ONLY"
    after_all = arrow_to_datums(upserts, record) if with_data else [None] * upserts.num_rows
    changed: list[tuple[int, str, str, int | None, int | None]] = []  # (old position, op, key, old pos, new row)
    inserts: list[tuple[str, int]] = []
    for i, (key, pos) in enumerate(zip(upsert_keys.to_pylist(), pos_u.to_pylist(), strict=True)):
        if pos is None:
            inserts.append((key, i))
        else:
            changed.append((pos, "u", key, pos, i))
    for key, pos in zip(delete_keys.to_pylist(), pos_d.to_pylist(), strict=True):
        if pos is not None:
            changed.append((pos, "d", key, pos, None))
    changed.sort(key=lambda c: c[0])
    befores = [c[3] for c in changed]
    before_rows = (arrow_to_datums(old.take(pa.array(befores, pa.int64())), record) if with_data and befores
                   else [None] * len(befores))
    ops = [c[1] for c in changed] + ["i"] * len(inserts)
    keys = [c[2] for c in changed] + [k for k, _ in inserts]
    before = list(before_rows) + [None] * len(inserts)
    after = [after_all[c[4]] if c[4] is not None else None for c in changed] + [after_all[i] for _, i in inserts]
    content = encode_avro_data(cdc_records(mode, instant, ops, keys, before, after), schema)
    block = encode_block(BlockType.CDC_DATA, [(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema)],
                         content)
    rel = relative_path(partition, LogFileName(file_id, instant, 1, token).cdc_name)
    fs.write_bytes(f"{base}/{rel}", block)
    return rel, len(block)
