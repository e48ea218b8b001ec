"""The record-level index: the ``record_index`` partition of the metadata table (``.hoodie/metadata``), as Hudi 1.x
lays it out, mapping every record key of the table to its partition and file group.

Layout: ``N`` file groups ``record-index-0000-0`` .. (a key's group is Hudi's hash of it,
:func:`tablecore.format.record_index.file_group_index`). A group's base file is an HFile
``record-index-000k-0_<token>_<T>.hfile`` holding every key of the group as of instant ``T``; a log file
``.record-index-000k-0_<T>.log.1_<token>`` holds what instant ``T`` changed in the group: an HFILE_DATA block of the
keys it wrote (their new location) and a DELETE block of the keys it deleted.

Which files count (:func:`index_view`), as for the ``files`` partition:

- a file of instant ``T`` counts only once ``T`` completed on the data table (or ``T`` is the initialisation,
  fourteen zeros): a write killed before its commit leaves log files nobody applies, and the next writer removes them
  with the instant (:func:`forget_instant_files`);
- a group's latest counting base file is read with the logs whose instants completed after its own, in completion
  order; the newest entry of a key wins, a DELETE entry removes it.

Writers (:mod:`tablecore.spark.writer`, :mod:`tablecore.arrow_writer`) write their instant's log files before the
commit; :class:`tablecore.metadata_table.MetadataTable` records them in the metadata table's delta commit of the same
instant and, under the commit lock, merges a group's logs into a new base file once they hold
:data:`COMPACT_RATIO` of its keys (or :data:`MAX_LOGS` logs): the work of keeping the index is proportional to the
keys written, not to the table.

A location is only a hint: a writer uses it when the file group it names is still live in its partition (a file
group replaced by ``insert_overwrite`` or rolled back drops out by itself). A key an instant only updated keeps its
entry; a key that moved (clustering) gets a new one.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablecore.exceptions import TableCorruptError
from tablecore.format.hfile import HFileError
from tablecore.format.hfile_reader import read_hfile_columns
from tablecore.format.log_content import DeleteRecord, decode_delete, encode_delete
from tablecore.format.log_format import BlockType, HeaderKey, LogFileName, LogFormatError, encode_block, read_blocks
from tablecore.format.record_index import (
    RECORD_INDEX_PARTITION,
    RECORD_INDEX_SCHEMA_JSON,
    Location,
    decode_location,
    encode_location,
    encode_record_index_columns,
    file_group_id,
    file_group_indexes,
    location_codes,
    lookup_hfile,
    parse_file_group_id,
)
from tablecore.format.timeline import HOODIE_DIR, InstantsOrEarlier, Timeline
from tablecore.io import FileInfo, FileIO

__all__ = [
    "COMPACT_RATIO", "LOCATION_COLUMNS", "MAX_LOGS", "RecordIndexView", "by_group", "committed_on", "compact",
    "drop_older", "files_of_instant", "forget_instant_files", "index_view", "list_index", "lookup",
    "needs_compaction", "no_locations", "write_base_files", "write_changes", "write_moved",
]

logger = logging.getLogger(__name__)

INDEX_DIR = f"{HOODIE_DIR}/metadata/{RECORD_INDEX_PARTITION}"
INIT_PREFIX = "00000000000000"
COMPACT_RATIO = 0.1
"""A group's logs are merged into a new base file once they hold this share of its keys."""
MAX_LOGS = int(os.environ.get("LAKEGATE_RECORD_INDEX_MAX_LOGS", "20"))
"""... or once it has this many log files (``LAKEGATE_RECORD_INDEX_MAX_LOGS``)."""
MIN_COMPACT_BYTES = 1 << 20
"""Below this many bytes of logs a group is not compacted for the ratio alone."""
RECORD_KEY_COL = "_hoodie_record_key"
LOCATION_COLUMNS = ("key", "partition", "file_id", "instant")
"""The columns of a table's rows as the index places them (:func:`write_base_files`, a build)."""
_BASE_RE = re.compile(r"^(record-index-\d{4}-0)_(\d+-\d+-\d+)_(\d{17})\.hfile$")


@dataclass(frozen=True)
class GroupSlice:
    """The files of one record index file group a lookup reads: a base file and logs in apply order (names)."""

    index: int
    base: str
    base_instant: str
    logs: tuple[str, ...]
    older: tuple[str, ...] = ()  # older base files and the logs merged into this one (safe to delete later)
    base_bytes: int = 0
    log_bytes: int = 0


@dataclass(frozen=True)
class RecordIndexView:
    """Which files of the record index count (picklable: shipped to Spark tasks).

    Attributes:
        io: a FileIO on the ``record_index`` partition folder.
        groups: the number of file groups.
        slices: each group's slice, by group index.
    """

    io: FileIO
    groups: int
    slices: tuple[GroupSlice, ...]


def committed_on(timeline: Timeline) -> InstantsOrEarlier:
    """The instants of the data table whose files count: completed (any action), or older than the active timeline
    (archived)."""
    return InstantsOrEarlier((i.time for i in timeline.files if i.is_completed), before=timeline.first_instant_time())


def list_index(io: FileIO) -> list[FileInfo]:
    """The files of the record index partition (one listing)."""
    rio = io.rebased(INDEX_DIR)
    return rio.list(rio.base)


def index_view(io: FileIO, timeline: Timeline, listed: list[FileInfo] | None = None) -> RecordIndexView:
    """The record index files that count for the data table's ``timeline``, from ``listed`` (default: one listing
    of the partition).

    Raises:
        TableCorruptError: a file group without a base file that counts, or the groups are not numbered 0..N-1.
    """
    rio = io.rebased(INDEX_DIR)
    committed = committed_on(timeline)

    def valid(instant: str) -> bool:
        return instant.startswith(INIT_PREFIX) or instant in committed

    def order(instant: str) -> str:
        return "" if instant.startswith(INIT_PREFIX) else (timeline.completion_of(instant) or instant)

    bases: dict[int, tuple[str, str]] = {}
    all_bases: dict[int, list[tuple[str, str]]] = {}
    logs: dict[int, list[tuple[str, str]]] = {}
    listed = list_index(io) if listed is None else listed
    sizes = {f.name: f.size for f in listed}
    for f in listed:
        if (m := _BASE_RE.match(f.name)) is not None:
            group = parse_file_group_id(m.group(1))
            if group is not None and valid(m.group(3)):
                all_bases.setdefault(group, []).append((m.group(3), f.name))
                if group not in bases or bases[group][1] < m.group(3):
                    bases[group] = (f.name, m.group(3))
        elif (parsed := LogFileName.parse(f.name)) is not None:
            group = parse_file_group_id(parsed.file_id)
            if group is not None and valid(parsed.base_instant):
                logs.setdefault(group, []).append((order(parsed.base_instant), f.name))
    groups = len(bases)
    if sorted(bases) != list(range(groups)) or any(g >= groups for g in logs):
        raise TableCorruptError(f"the record index's file groups are not numbered 0..N-1 with a base file each "
                                f"(base files for {sorted(bases)}, logs for {sorted(logs)})", path=rio.uri)
    slices = []
    for g in range(groups):
        name, instant = bases[g]
        after = order(instant)
        mine = tuple(n for o, n in sorted(logs.get(g, [])) if o > after)
        older = tuple([n for t, n in all_bases[g] if t < instant] + [n for o, n in logs.get(g, []) if o <= after])
        slices.append(GroupSlice(g, name, instant, mine, older, sizes.get(name, 0),
                                 sum(sizes.get(n, 0) for n in mine)))
    return RecordIndexView(rio, groups, tuple(slices))


# ---- reading -------------------------------------------------------------------------------------------------------


def lookup(view: RecordIndexView, group: int, keys: Sequence[str]) -> dict[str, Location]:
    """The locations of those of ``keys`` (all in file group ``group``) the index holds.

    Raises:
        TableCorruptError: a file of the group does not decode.
    """
    sl = view.slices[group]
    wanted = set(keys)
    probe = pa.array(sorted(wanted), pa.large_string())
    newest: dict[str, Location | None] = {}
    for found, values in _layers(view, sl.logs):  # only the wanted keys' values are decoded
        mask = pc.is_in(found.cast(pa.large_string()), value_set=probe)
        hits = found.filter(mask).to_pylist()
        if values is None:
            newest.update(dict.fromkeys(hits))
        else:
            for key, value in zip(hits, values.filter(mask).to_pylist(), strict=True):
                newest[key] = decode_location(value, RECORD_INDEX_SCHEMA_JSON)
    rest = sorted(k for k in wanted if k not in newest)
    out = {k: loc for k, loc in newest.items() if loc is not None}
    if rest:
        path = view.io.join(sl.base)
        try:
            with view.io.open_input(path) as f:  # only the blocks the keys fall in are read
                out.update(lookup_hfile(f, rest))
        except HFileError as e:
            raise TableCorruptError(f"a record index base file does not decode: {e}", path=path) from e
    return out


# ---- writing -------------------------------------------------------------------------------------------------------


def _by_group(keys: pa.Array | pa.ChunkedArray, locations: tuple[np.ndarray, pa.Array], groups: int,
              ) -> dict[int, Callable[[], tuple[pa.Array, pa.Array]]]:
    """Each touched group's (keys, values), built when asked for (one group's values in memory at a time)."""
    keys = (keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).cast(pa.string())
    codes, distinct = locations
    fg = file_group_indexes(keys, groups)

    def part(g: int) -> Callable[[], tuple[pa.Array, pa.Array]]:
        def build() -> tuple[pa.Array, pa.Array]:
            mask = fg == g
            return keys.filter(pa.array(mask)), distinct.take(pa.array(codes[mask]))
        return build
    return {int(g): part(int(g)) for g in np.unique(fg).tolist()}


def write_changes(io: FileIO, groups: int, instant: str, token: str, keys: pa.Array | pa.ChunkedArray,
                  partitions: pa.Array | pa.ChunkedArray, file_ids: pa.Array | pa.ChunkedArray,
                  deleted: pa.Array | pa.ChunkedArray) -> list[tuple[str, int]]:
    """Write what ``instant`` changed in the index: ``keys`` now at (``partitions``, ``file_ids``), and the
    ``deleted`` keys; one log file per file group touched. Returns (file name, size) of each file written.

    A key given twice (a batch's rows of one key share its location) gets one entry: an HFile holds a key once."""
    rio = io.rebased(INDEX_DIR)
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    distinct = pc.unique(keys)
    if len(distinct) < len(keys):
        first = pc.index_in(distinct, value_set=keys)
        keys, partitions, file_ids = keys.take(first), partitions.take(first), file_ids.take(first)
    deleted = pc.unique(deleted.combine_chunks() if isinstance(deleted, pa.ChunkedArray) else deleted)
    instants = pa.repeat(pa.scalar(instant, pa.string()), len(keys))
    written = _by_group(keys, location_codes(partitions, file_ids, instants), groups) if len(keys) else {}
    removed: dict[int, list[str]] = {}
    if len(deleted):
        fg = file_group_indexes(deleted, groups)
        for key, g in zip(deleted.to_pylist(), fg.tolist(), strict=True):
            removed.setdefault(int(g), []).append(key)
    def one(g: int) -> tuple[str, int]:
        content = b""
        if g in written:
            content += encode_block(BlockType.HFILE_DATA, [(HeaderKey.SCHEMA, RECORD_INDEX_SCHEMA_JSON),
                                                           (HeaderKey.INSTANT_TIME, instant)],
                                    encode_record_index_columns(*written[g]()))
        if g in removed:
            deletes = [DeleteRecord(key, RECORD_INDEX_PARTITION) for key in removed[g]]
            content += encode_block(BlockType.DELETE, [(HeaderKey.INSTANT_TIME, instant)],
                                    encode_delete(deletes, None))
        name = LogFileName(file_group_id(g), instant, 1, token).name
        rio.write_bytes(rio.join(name), content)
        return name, len(content)

    return _in_threads(one, sorted(set(written) | set(removed)))


def write_moved(io: FileIO, groups: int, instant: str, written: Iterable[tuple[str, str, str]],
                ) -> list[tuple[str, int]]:
    """Write the index's log files of a rewrite that moved keys to new file groups (clustering): the keys of each
    written base file (``(partition, file id, path relative to the table)``), read from the file. Returns (file name,
    size) of each log file written."""
    keys, partitions, file_ids = [], [], []
    for partition, file_id, path in written:
        with io.open_input(io.join(path)) as f:
            found = pq.read_table(f, columns=[RECORD_KEY_COL]).column(RECORD_KEY_COL)
        keys.append(found.cast(pa.string()))
        partitions.append(pa.array([partition] * len(found), pa.string()))
        file_ids.append(pa.array([file_id] * len(found), pa.string()))
    if not keys:
        return []
    return write_changes(io, groups, instant, "0-0-0", pa.chunked_array([c for k in keys for c in k.chunks],
                                                                        pa.string()),
                         pa.chunked_array(partitions, pa.string()), pa.chunked_array(file_ids, pa.string()),
                         pa.array([], pa.string()))


def no_locations() -> pa.Table:
    """An empty table of :data:`LOCATION_COLUMNS` (the index of an empty table)."""
    return pa.table({c: pa.array([], pa.string()) for c in LOCATION_COLUMNS})


def write_base_files(io: FileIO, groups: int, instant: str, keys: pa.Array | pa.ChunkedArray,
                     partitions: pa.Array | pa.ChunkedArray, file_ids: pa.Array | pa.ChunkedArray,
                     instants: pa.Array | pa.ChunkedArray) -> list[tuple[str, int]]:
    """Write a base file for each of ``groups`` file groups as of ``instant``, holding the given keys (a build from
    the table's rows). Returns (file name, size) of each file."""
    rio = io.rebased(INDEX_DIR)
    by_group = _by_group(keys, location_codes(partitions, file_ids, instants), groups) if len(keys) else {}

    def one(g: int) -> tuple[str, int]:
        data = encode_record_index_columns(*(by_group[g]() if g in by_group else
                                             (pa.array([], pa.string()), pa.array([], pa.binary()))))
        name = f"{file_group_id(g)}_0-0-0_{instant}.hfile"
        rio.write_bytes(rio.join(name), data)
        return name, len(data)

    return _in_threads(one, list(range(groups)))


def _in_threads(fn: Callable[[int], tuple[str, int]], groups: list[int]) -> list[tuple[str, int]]:
    """``fn`` of each group, by a few threads when there are many keys' worth (gzip and numpy release the GIL)."""
    if len(groups) <= 1:
        return [fn(g) for g in groups]
    with ThreadPoolExecutor(min(len(groups), os.cpu_count() or 1), thread_name_prefix="lakegate-ri") as pool:
        return list(pool.map(fn, groups))


def files_of_instant(listed: Iterable[FileInfo], instant: str) -> list[tuple[str, int]]:
    """(name, size) of the record index files instant ``instant`` wrote, among ``listed`` (:func:`list_index`)."""
    return [(f.name, f.size) for f in listed if _of_instant(f.name, instant)]


def _of_instant(name: str, instant: str) -> bool:
    if (m := _BASE_RE.match(name)) is not None:
        return m.group(3) == instant
    parsed = LogFileName.parse(name)
    return parsed is not None and parsed.base_instant == instant and parse_file_group_id(parsed.file_id) is not None


def forget_instant_files(io: FileIO, instant: str, *, logs: bool = True) -> int:
    """Delete the record index files of ``instant`` (an instant that never completed; ``logs=False``: its base files
    only); returns how many."""
    rio = io.rebased(INDEX_DIR)
    gone = 0
    for f in rio.list(rio.base):
        if _of_instant(f.name, instant) and (logs or not f.name.startswith(".")):
            rio.delete(f.path)
            gone += 1
    return gone


def needs_compaction(sl: GroupSlice, own_bytes: int) -> bool:
    """Whether a group's logs, with ``own_bytes`` more of the instant being committed, should be merged into a new
    base file: once they reach :data:`COMPACT_RATIO` of its base file's bytes (at least :data:`MIN_COMPACT_BYTES`),
    or :data:`MAX_LOGS` files. The merge costs the group's size; the ratio makes it cost a share of the keys written,
    whatever the table's size."""
    if len(sl.logs) + 1 >= MAX_LOGS:
        return True
    return sl.log_bytes + own_bytes >= max(COMPACT_RATIO * sl.base_bytes, MIN_COMPACT_BYTES)


def _ours(values: pa.Array, schema: str | None) -> pa.Array:
    """Values written with another writer schema than lakegate's, encoded again with it (a base file holds one)."""
    if schema is None or schema == RECORD_INDEX_SCHEMA_JSON:
        return values
    return pa.array([encode_location(decode_location(v, schema)) for v in values.to_pylist()], pa.binary())


def _layers(view: RecordIndexView, names: Sequence[str]) -> list[tuple[pa.Array, pa.Array | None]]:
    """The entries of log files in order, as (keys, values) layers; values None for a DELETE block."""
    out: list[tuple[pa.Array, pa.Array | None]] = []
    for name in names:
        path = view.io.join(name)
        try:
            for block in read_blocks(view.io.read_bytes(path)):
                if block.block_type is BlockType.HFILE_DATA:
                    keys, values, info = read_hfile_columns(block.content)
                    raw = info.get("schema")
                    out.append((keys, _ours(values, block.schema or (raw.decode() if raw else None))))
                elif block.block_type is BlockType.DELETE:
                    out.append((pa.array([d.record_key for d in decode_delete(block.content)], pa.large_string()),
                                None))
        except (LogFormatError, HFileError, ValueError) as e:
            raise TableCorruptError(f"a record index log file does not decode: {e}", path=path) from e
    return out


def _only_block(view: RecordIndexView, name: str) -> bytes | None:
    """The HFile of a log file holding one HFILE_DATA block of lakegate's writer schema and nothing else, or None."""
    path = view.io.join(name)
    try:
        blocks = read_blocks(view.io.read_bytes(path))
    except LogFormatError as e:
        raise TableCorruptError(f"a record index log file does not decode: {e}", path=path) from e
    if len(blocks) != 1 or blocks[0].block_type is not BlockType.HFILE_DATA or \
            blocks[0].schema != RECORD_INDEX_SCHEMA_JSON:
        return None
    return bytes(blocks[0].content)


def compact(view: RecordIndexView, group: int, instant: str, own_logs: Sequence[str] = ()) -> tuple[str, int]:
    """Merge file group ``group``'s base file and logs, then ``own_logs`` (``instant``'s own, not yet counted), into a
    new base file as of ``instant``: the newest entry of each key, deleted keys left out, values copied as they are.
    Columnar throughout (a group holds millions of keys). Returns (file name, size).

    Raises:
        TableCorruptError: a file of the group does not decode.
    """
    sl = view.slices[group]
    path = view.io.join(sl.base)
    try:
        keys, values, info = read_hfile_columns(view.io.read_bytes(path))
    except HFileError as e:
        raise TableCorruptError(f"a record index base file does not decode: {e}", path=path) from e
    raw = info.get("schema")
    name = f"{file_group_id(group)}_0-0-0_{instant}.hfile"
    if not len(keys) and not sl.logs and len(own_logs) == 1:  # a first load: its log block already is the file
        only = _only_block(view, own_logs[0])
        if only is not None:
            view.io.write_bytes(view.io.join(name), only)
            return name, len(only)
    layers = [(keys, _ours(values, raw.decode() if raw else None)), *_layers(view, [*sl.logs, *own_logs])]
    merged = pa.table({
        "key": pa.chunked_array([k.cast(pa.large_string()) for k, _ in layers], pa.large_string()),
        "value": pa.chunked_array([v if v is not None else pa.nulls(len(k), pa.large_binary())
                                   for k, v in layers], pa.large_binary()),
        "seq": pa.chunked_array([pa.repeat(pa.scalar(i, pa.int32()), len(k)) for i, (k, _) in enumerate(layers)],
                                pa.int32()),
    })
    merged = merged.take(pc.sort_indices(merged, [("key", "ascending"), ("seq", "descending")]))
    key_col = merged.column("key").combine_chunks()
    n = len(key_col)
    newest = np.ones(n, dtype=bool)
    if n > 1:
        newest[1:] = pc.not_equal(key_col.slice(1), key_col.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    keep = pa.array(newest) if n else pa.array([], pa.bool_())
    kept = merged.filter(keep)
    kept = kept.filter(pc.is_valid(kept.column("value")))
    data = encode_record_index_columns(kept.column("key"), kept.column("value"))
    view.io.write_bytes(view.io.join(name), data)
    logger.info("compacted record index file group %d at %s: %d keys", group, instant, kept.num_rows)
    return name, len(data)


def drop_older(view: RecordIndexView, group: int) -> int:
    """Delete what group ``group``'s current base file made obsolete: older base files and the logs it merged (called
    once a newer base file exists: readers that listed before it still find the slice they read). Returns how many
    files were deleted."""
    for name in view.slices[group].older:
        view.io.delete(view.io.join(name))
    return len(view.slices[group].older)


def by_group(files: Iterable[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
    """Record index files (name, size) by the file group they belong to."""
    out: dict[int, list[tuple[str, int]]] = {}
    for name, size in files:
        m = _BASE_RE.match(name)
        parsed = LogFileName.parse(name)
        fid = m.group(1) if m is not None else (parsed.file_id if parsed is not None else "")
        g = parse_file_group_id(fid)
        if g is not None:
            out.setdefault(g, []).append((name, size))
    return out
