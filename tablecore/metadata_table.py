"""The metadata table's ``files`` partition (``.hoodie/metadata``, Hudi 1.x's layout, table version 8): the list of
the table's data files by partition, which readers use instead of listing directories (one LIST per partition on
object storage).

Layout (as Hudi 1.0 writes it, and as hudi-rs and Hudi's Java readers read it):

- ``.hoodie/metadata`` is a merge-on-read table of its own (``hoodie.properties``, a layout-2 timeline) with one
  partition, ``files``, and one file group, ``files-0000-0``: base files are HFiles (``files-0000-0_0-0-0_<T>.hfile``)
  and log files hold HFILE_DATA blocks (:mod:`tablecore.format.metadata_records` has the records).
- Every instant ``T`` completed on the data table (commits, delta commits, replace commits, compactions, cleans,
  rollbacks, restores) gets a delta commit ``T`` on the metadata table, completed **before** the data instant's own
  completed file, under the commit lock: a new log file ``.files-0000-0_T.log.1_0-0-0`` with the records of the
  partitions it changed (files it wrote, with their sizes; files it deleted, as tombstones). Every
  :data:`LOGS_PER_SLICE` delta commits, ``T`` writes a base file with the whole merged listing instead (a new file
  slice), and the slices older than the previous one are deleted.
- The data table's ``hoodie.properties`` lists ``files`` in ``hoodie.table.metadata.partitions`` only once the
  metadata table is complete: :func:`rebuild_metadata_table` builds it from a listing of storage.
- Readers apply a log block only if its instant completed on the data table (or starts with fourteen zeros: the
  initialisation), so a delta commit whose data instant never completed (a process killed between the two) is
  ignored, and written again when that instant is.

lakegate maintains ``files`` and, where it built one, the record index (:mod:`tablecore.record_index`: its log files
are written by the data write, recorded and merged here); a metadata table lakegate did not build (Hudi's, with its
column statistics...) or of a version-6 table is disabled by the first lakegate write, as before.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from tablecore.config import METADATA_BY_LAKEGATE, TableConfig
from tablecore.exceptions import ConfigError, TableCorruptError
from tablecore.format.commit_avro import commit_metadata_to_avro
from tablecore.format.commit_metadata import CommitMetadata, WriteStat
from tablecore.format.file_naming import PARTITION_METAFILE, partition_metadata_content
from tablecore.format.file_view import TableFiles, files_from_listing, list_table_files
from tablecore.format.hfile import HFileError, read_hfile
from tablecore.format.instant import Action, Instant, State
from tablecore.format.log_format import BlockType, HeaderKey, LogFileName, LogFormatError, encode_block, read_blocks
from tablecore.format.metadata_records import (
    ALL_PARTITIONS,
    FILES_SCHEMA_JSON,
    NON_PARTITIONED,
    FileEntry,
    FilesRecords,
    decode_files_records,
    encode_files_records,
    merge_files_records,
)
from tablecore.format.properties import format_properties, java_date, table_checksum
from tablecore.format.record_index import RECORD_INDEX_PARTITION
from tablecore.format.service_metadata import read_clean_metadata, read_restore_metadata, read_rollback_metadata
from tablecore.format.timeline import HOODIE_DIR, Timeline, timeline_dir
from tablecore.io import FileIO, file_io_for
from tablecore.locks import commit_lock
from tablecore.record_index import (
    by_group,
    committed_on,
    compact,
    drop_older,
    files_of_instant,
    forget_instant_files,
    index_view,
    list_index,
    needs_compaction,
    no_locations,
    write_base_files,
    write_moved,
)
from tablecore.table_properties import read_config, update_properties

__all__ = [
    "FILES_PARTITION", "LOGS_PER_SLICE", "METADATA_DIR", "MetadataTable", "changes_of", "create_metadata_table",
    "forget_delta_commit",
    "metadata_table_in_use", "rebuild", "rebuild_metadata_table", "record_index_in_use", "split_for_create",
    "table_files", "verify", "verify_metadata_table",
]

logger = logging.getLogger(__name__)

METADATA_DIR = f"{HOODIE_DIR}/metadata"
FILES_PARTITION = "files"
FILE_GROUP = "files-0000-0"
INIT_INSTANT = "00000000000000000"
_INIT_PREFIX = "00000000000000"
_TOKEN = "0-0-0"
LOGS_PER_SLICE = 10
"""Delta commits of log files after which the next one writes a whole base file (a new slice)."""
_BASE_RE = re.compile(rf"^{FILE_GROUP}_(\d+-\d+-\d+)_(\d{{17}})\.hfile$")
_PARTITIONS_KEY = "hoodie.table.metadata.partitions"


_MAINTAINED = ({FILES_PARTITION}, {FILES_PARTITION, RECORD_INDEX_PARTITION})


def metadata_table_in_use(config: TableConfig) -> bool:
    """True when lakegate reads this table's file listing from its metadata table and maintains it: version 8 or
    later, ``files`` (and ``record_index``) its only partitions, and built by lakegate (``lakegate.metadata.table=
    true``; a metadata table Hudi built is disabled by lakegate's first write, as it is not known to hold what
    lakegate maintains)."""
    return config.table_version >= 8 and set(config.metadata_partitions) in _MAINTAINED and \
        len(set(config.metadata_partitions)) == len(config.metadata_partitions) and config.metadata_by_lakegate


def record_index_in_use(config: TableConfig) -> bool:
    """True when the metadata table lakegate maintains has the record-level index (:mod:`tablecore.record_index`)."""
    return metadata_table_in_use(config) and RECORD_INDEX_PARTITION in config.metadata_partitions


def split_for_create(config: TableConfig) -> tuple[tuple[str, ...], TableConfig]:
    """A new table's metadata partitions and its config without them (its metadata table is built right after
    ``hoodie.properties``, then listed there).

    Raises:
        ConfigError: other partitions than ``files``, or a table version below 8.
    """
    wanted = config.metadata_partitions
    if config.index_type == "RECORD_INDEX" and RECORD_INDEX_PARTITION not in wanted:
        wanted = tuple(sorted({*wanted, FILES_PARTITION, RECORD_INDEX_PARTITION}))
    if wanted and not metadata_table_in_use(config.model_copy(update={"metadata_by_lakegate": True,
                                                                      "metadata_partitions": wanted})):
        raise ConfigError(f"a new table's metadata table holds the files partition, and optionally record_index, "
                          f"from table version 8 (metadata_partitions=('files',) or ('files', 'record_index')), not "
                          f"{wanted} on version {config.table_version}")
    return wanted, config.model_copy(update={"metadata_partitions": ()})


def _key(partition: str) -> str:
    return partition or NON_PARTITIONED


def _partition(key: str) -> str:
    return "" if key == NON_PARTITIONED else key


@dataclass(frozen=True)
class _Slice:
    base: str | None  # base HFile name
    base_instant: str
    logs: tuple[str, ...]  # log file names, oldest first


class MetadataTable:
    """The ``files`` partition of one table's metadata table.

    Args:
        io: the data table's FileIO.
        config: the data table's configuration (its name, for the metadata table's properties).
    """

    def __init__(self, io: FileIO, config: TableConfig) -> None:
        self.io = io
        self.config = config
        self.mio = io.rebased(METADATA_DIR)

    # ---- reading -------------------------------------------------------------------------------------------------

    def _timeline(self) -> Timeline:
        return Timeline.listed(self.mio, 8)

    def _slices(self, timeline: Timeline) -> list[_Slice]:
        """The file slices of ``files-0000-0``, oldest first (a slice: a base file and the logs completed after it)."""
        done = {i.time for i in timeline.files if i.is_completed}
        names = [f.name for f in self.mio.list(self.mio.join(FILES_PARTITION))]
        bases = sorted((m.group(2), n) for n in names if (m := _BASE_RE.match(n)) and m.group(2) in done)
        logs = []
        for n in names:
            parsed = LogFileName.parse(n)
            if parsed is not None and parsed.file_id == FILE_GROUP and parsed.base_instant in done:
                logs.append((timeline.completion_of(parsed.base_instant) or parsed.base_instant, n))
        slices = []
        for i, (instant, name) in enumerate(bases):
            until = bases[i + 1][0] if i + 1 < len(bases) else None
            mine = tuple(n for c, n in sorted(logs) if c >= instant and (until is None or c < until))
            slices.append(_Slice(name, instant, mine))
        return slices

    def records(self, data_timeline: Timeline) -> FilesRecords:
        """The merged ``files`` records of the latest slice, applying only the log blocks of valid instants.

        Raises:
            TableCorruptError: a file of the metadata table does not decode, or it has no base file.
        """
        slices = self._slices(self._timeline())
        if not slices:
            raise TableCorruptError("the metadata table lists files but has no completed base file",
                                    path=self.mio.uri)
        return self._merged(slices[-1], data_timeline)

    def _merged(self, latest: _Slice, data_timeline: Timeline) -> FilesRecords:
        committed = committed_on(data_timeline)

        def valid(instant: str | None) -> bool:
            return instant is not None and (instant.startswith(_INIT_PREFIX) or instant in committed)

        layers = [self._decode(latest.base, None)] if latest.base else []
        for name in latest.logs:
            path = self.mio.join(FILES_PARTITION, name)
            try:
                blocks = read_blocks(self.mio.read_bytes(path))
            except LogFormatError as e:
                raise TableCorruptError(f"a metadata table log file does not decode: {e}", path=path) from e
            undone = {b.target_instant for b in blocks if b.is_rollback}
            for block in blocks:
                if block.block_type is BlockType.HFILE_DATA and valid(block.instant) and block.instant not in undone:
                    layers.append(self._decode(name, block.content, block.schema))
        return merge_files_records(layers)

    def _decode(self, name: str, content: bytes | None = None, schema: str | None = None) -> FilesRecords:
        path = self.mio.join(FILES_PARTITION, name)
        try:
            return decode_files_records(read_hfile(self.mio.read_bytes(path) if content is None else content), schema)
        except HFileError as e:
            raise TableCorruptError(f"a metadata table HFile does not decode: {e}", path=path) from e

    def listing(self, data_timeline: Timeline, partitions: Iterable[str] | None = None) -> TableFiles:
        """The data files the metadata table lists, of ``partitions`` (default: all), as a directory listing would
        give them."""
        records = self.records(data_timeline)
        wanted = None if partitions is None else {_key(p) for p in partitions}
        listing = [(self.io.join(_partition(key), name), e.size)
                   for key, files in records.items() if key != ALL_PARTITIONS and (wanted is None or key in wanted)
                   for name, e in files.items() if not e.deleted]
        return files_from_listing(self.io.base, listing)

    def partitions(self, data_timeline: Timeline) -> list[str]:
        """The data partitions the metadata table lists."""
        listed = self.records(data_timeline).get(ALL_PARTITIONS, {})
        return sorted(_partition(k) for k, e in listed.items() if not e.deleted)

    # ---- writing -------------------------------------------------------------------------------------------------

    def _write_instant(self, time: str, completion: str, stats: tuple[WriteStat, ...], operation: str, *,
                       action: Action = Action.DELTA_COMMIT) -> None:
        tl = timeline_dir(8)
        meta = CommitMetadata(operation, stats, {"schema": FILES_SCHEMA_JSON})
        for instant, content in ((Instant(time, action, State.REQUESTED), b""),
                                 (Instant(time, action, State.INFLIGHT), b""),
                                 (Instant(time, action, State.COMPLETED, completion), commit_metadata_to_avro(meta))):
            self.mio.write_bytes(self.mio.join(tl, instant.file_name), content)

    def commit(self, time: str, completion: str, changes: FilesRecords, data_timeline: Timeline, *,
               action: Action | None = None, moved: CommitMetadata | None = None) -> None:
        """Record data instant ``time``'s ``changes`` as the metadata table's delta commit ``time``, completed at
        ``completion`` (before the data instant's own). Called under the data table's commit lock.

        With the record index, the delta commit also holds the index's log files the write wrote for ``time``
        (merging a group's logs into a new base file when they have grown, :mod:`tablecore.record_index`), and the
        new places of the keys a clustering (``moved``, its commit metadata) rewrote; a restore turns the record
        index off (``lakegate table metadata rebuild --record-index`` builds it again)."""
        timeline = self._timeline()
        if any(i.time == time for i in timeline.files):  # an earlier attempt of this instant (a retried publish)
            forget_delta_commit(self.io, time, index_logs=False)
            timeline = self._timeline()
        if action is Action.RESTORE and RECORD_INDEX_PARTITION in self.config.metadata_partitions:
            self._drop_record_index("a restore")
        index_stats: tuple[WriteStat, ...] = ()
        if RECORD_INDEX_PARTITION in self.config.metadata_partitions:
            index_stats = self._record_index(time, data_timeline, moved)
        slices = self._slices(timeline)
        if slices and len(slices[-1].logs) < LOGS_PER_SLICE:
            name = f".{FILE_GROUP}_{time}.log.1_{_TOKEN}"
            block = encode_block(BlockType.HFILE_DATA, [(HeaderKey.SCHEMA, FILES_SCHEMA_JSON),
                                                        (HeaderKey.INSTANT_TIME, time)], encode_files_records(changes))
            self.mio.write_bytes(self.mio.join(FILES_PARTITION, name), block)
            stat = WriteStat(FILE_GROUP, f"{FILES_PARTITION}/{name}", FILES_PARTITION, slices[-1].base_instant,
                             num_writes=len(changes), total_write_bytes=len(block), file_size_in_bytes=len(block),
                             base_file=slices[-1].base, log_files=(name,), log_version=1, log_offset=0)
            self._write_instant(time, completion, (stat, *index_stats), "UPSERT_PREPPED")
            return
        current = merge_files_records([self._merged(slices[-1], data_timeline), changes]) if slices else changes
        self._write_base(time, completion, current, index_stats)
        self._drop(slices[:-1], timeline)  # keep the slice readers may still be reading

    def _record_index(self, time: str, data_timeline: Timeline, moved: CommitMetadata | None,
                      ) -> tuple[WriteStat, ...]:
        """The write stats of the record index files of ``time`` (a clustering's, ``moved``, are written here: the
        keys now in the groups it wrote); a group whose logs have grown is compacted."""
        listed = list_index(self.io)  # one listing serves the view and the instant's own files
        own = files_of_instant(listed, time)
        clustered = moved is not None and moved.operation_type == "CLUSTER"
        if not own and not clustered:
            return ()
        view = index_view(self.io, data_timeline, listed)  # ``time`` has not completed: its own logs are not in it
        if moved is not None and clustered:
            own += write_moved(self.io, view.groups, time,
                               [(s.partition_path, s.file_id, s.path) for s in moved.write_stats if s.path])
        plans = [(group, mine, needs_compaction(view.slices[group], sum(size for _, size in mine)))
                 for group, mine in sorted(by_group(own).items())]

        def one(plan: tuple[int, list[tuple[str, int]], bool]) -> list[WriteStat]:
            group, mine, merge = plan
            sl = view.slices[group]
            fid = sl.base.split("_", 1)[0]
            if merge:  # gzip and numpy release the GIL: groups are merged by a few threads
                name, size = compact(view, group, time, [n for n, _ in mine])
                drop_older(view, group)
                return [WriteStat(fid, f"{RECORD_INDEX_PARTITION}/{name}", RECORD_INDEX_PARTITION, "null",
                                  total_write_bytes=size, file_size_in_bytes=size)]
            return [WriteStat(fid, f"{RECORD_INDEX_PARTITION}/{name}", RECORD_INDEX_PARTITION, sl.base_instant,
                              total_write_bytes=size, file_size_in_bytes=size, base_file=sl.base, log_files=(name,),
                              log_version=1, log_offset=0) for name, size in mine]

        merging = sum(merge for *_, merge in plans)
        if merging > 1:
            with ThreadPoolExecutor(min(merging, os.cpu_count() or 1), thread_name_prefix="lakegate-ri") as pool:
                stats = [s for done in pool.map(one, plans) for s in done]
        else:
            stats = [s for plan in plans for s in one(plan)]
        return tuple(stats)

    def _drop_record_index(self, why: str) -> None:
        update_properties(self.io, {_PARTITIONS_KEY: FILES_PARTITION})
        self.config = self.config.model_copy(update={"metadata_partitions": (FILES_PARTITION,)})
        self.mio.delete_dir(self.mio.join(RECORD_INDEX_PARTITION))
        logger.warning("%s turned the record index of %s off: lakegate table metadata rebuild --record-index "
                       "builds it again", why, self.io.uri)

    def _drop(self, slices: list[_Slice], timeline: Timeline) -> None:
        """Delete older slices: their files, then the delta commits that wrote them (the metadata table's timeline
        stays as short as its live slices)."""
        times = set()
        for old in slices:
            times.add(old.base_instant)
            for stale in (old.base, *old.logs):
                if stale:
                    self.mio.delete(self.mio.join(FILES_PARTITION, stale))
            times.update(p.base_instant for p in map(LogFileName.parse, old.logs) if p is not None)
        instants = [i for i in timeline.files if i.time in times]
        for instant in sorted(instants, key=lambda i: not i.is_completed):  # completed files first
            self.mio.delete(self.mio.join(timeline_dir(8), instant.file_name))

    def _write_base(self, time: str, completion: str, records: FilesRecords,
                    index_stats: tuple[WriteStat, ...] = ()) -> None:
        live = {key: {n: e for n, e in files.items() if not e.deleted} for key, files in records.items()}
        data = encode_files_records({k: v for k, v in live.items() if v or k == ALL_PARTITIONS})
        name = f"{FILE_GROUP}_{_TOKEN}_{time}.hfile"
        self.mio.write_bytes(self.mio.join(FILES_PARTITION, name), data)
        stat = WriteStat(FILE_GROUP, f"{FILES_PARTITION}/{name}", FILES_PARTITION, "null", num_writes=len(live),
                         num_inserts=len(live), total_write_bytes=len(data), file_size_in_bytes=len(data))
        self._write_instant(time, completion, (stat, *index_stats), "BULK_INSERT")

    def create(self, records: FilesRecords, completion: str, index: tuple[int, pa.Table] | None = None) -> None:
        """Write a new metadata table holding ``records`` (its folder must be empty) and, with ``index`` (file groups,
        and the table's rows as columns key, partition, file_id, instant), a record index of them."""
        name = f"{self.config.name}_metadata"
        props = {
            "hoodie.table.name": name, "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": "8",
            "hoodie.table.initial.version": "8", "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline", "hoodie.timeline.history.path": "history",
            "hoodie.archivelog.folder": "history", "hoodie.table.base.file.format": "HFILE",
            "hoodie.table.recordkey.fields": "key", "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
            "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
            "hoodie.record.merge.mode": "CUSTOM",
            "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.checksum": str(table_checksum("", name)),
        }
        self.mio.makedirs(self.mio.join(timeline_dir(8), "history"))
        self.mio.write_bytes(self.mio.join(HOODIE_DIR, "hoodie.properties"), format_properties(props).encode())
        self.mio.write_bytes(self.mio.join(FILES_PARTITION, PARTITION_METAFILE),
                             partition_metadata_content(INIT_INSTANT, 1, java_date()))
        index_stats: tuple[WriteStat, ...] = ()
        if index is not None:
            groups, rows = index
            self.mio.write_bytes(self.mio.join(RECORD_INDEX_PARTITION, PARTITION_METAFILE),
                                 partition_metadata_content(INIT_INSTANT, 1, java_date()))
            written = write_base_files(self.io, groups, INIT_INSTANT, rows.column("key"), rows.column("partition"),
                                       rows.column("file_id"), rows.column("instant"))
            index_stats = tuple(WriteStat(n.split("_", 1)[0], f"{RECORD_INDEX_PARTITION}/{n}", RECORD_INDEX_PARTITION,
                                          "null", total_write_bytes=size, file_size_in_bytes=size)
                                for n, size in written)
        self._write_base(INIT_INSTANT, completion, records, index_stats)


def table_files(io: FileIO, config: TableConfig, timeline: Timeline,
                partitions: Iterable[str] | None = None) -> TableFiles:
    """The data files of ``partitions`` (default: all): from the metadata table when readers use it (no directory
    listing), else from one listing per partition (or of the whole table)."""
    if metadata_table_in_use(config):
        try:
            return MetadataTable(io, config).listing(timeline, partitions)
        except TableCorruptError:
            if metadata_table_in_use(read_config(io, io.uri)):
                raise
            logger.info("the metadata table of %s was disabled meanwhile: listing storage", io.uri)
    return list_table_files(io, partitions)


def forget_delta_commit(io: FileIO, time: str, *, index_logs: bool = True) -> None:
    """Remove the metadata table's delta commit ``time`` (its completed file first, then its files, then its pending
    files): what an attempt of data instant ``time`` that never completed left there (a no-op without one). The
    record index files of ``time`` go too (its log files, which the write wrote before its commit, only with
    ``index_logs``: a retried publish keeps them)."""
    mio = io.rebased(METADATA_DIR)
    forget_instant_files(io, time, logs=index_logs)
    mine = [f for f in mio.list(mio.join(timeline_dir(8))) if f.name.startswith((time + ".", time + "_"))]
    if not mine:
        return
    for f in sorted(mine, key=lambda f: "_" not in f.name):  # the completed file (named T_C) first
        mio.delete(f.path)
    for f in mio.list(mio.join(FILES_PARTITION)):
        if f.name.endswith(f"_{time}.hfile") or f.name.startswith(f".{FILE_GROUP}_{time}.log."):
            mio.delete(f.path)
    logger.info("removed the metadata table's delta commit %s of %s", time, io.uri)


# ---- what an instant changes -------------------------------------------------------------------------------------


def changes_of(action: Action, metadata: CommitMetadata | None, content: bytes) -> FilesRecords:
    """The ``files`` records of what one completed data instant changed: the files a write wrote (sizes from its
    write stats, CDC log files included), the files a clean, rollback or restore deleted (tombstones) and the log
    files a rollback wrote. A savepoint changes nothing."""
    out: FilesRecords = {}

    def put(partition: str, name: str, entry: FileEntry) -> None:
        out.setdefault(_key(partition), {})[posixpath.basename(name)] = entry
        out.setdefault(ALL_PARTITIONS, {})[_key(partition)] = FileEntry(0)

    if metadata is None and action.is_write:
        metadata = CommitMetadata.from_bytes(content)
    if metadata is not None:
        for s in metadata.write_stats:
            if s.path:
                put(s.partition_path, s.path, FileEntry(s.file_size_in_bytes))
            for cdc, size in (s.cdc_stats or {}).items():
                put(s.partition_path, cdc, FileEntry(size))
        return out
    rollbacks = []
    if action is Action.CLEAN:
        deleted, gone = read_clean_metadata(content)
        for partition, names in deleted.items():
            for name in names:
                put(partition, name, FileEntry(0, True))
        for partition in gone:
            out.setdefault(ALL_PARTITIONS, {})[_key(partition)] = FileEntry(0, True)
    elif action is Action.ROLLBACK:
        rollbacks = list(read_rollback_metadata(content)[1].items())
    elif action is Action.RESTORE:
        rollbacks = read_restore_metadata(content)[1]
    for partition, done in rollbacks:
        for name in (*done.deleted_files, *done.log_files_from_failed_commit):
            put(partition, name, FileEntry(0, True))
        for name, size in done.rollback_log_files.items():
            put(partition, name, FileEntry(size))
    return out


# ---- rebuild and verify ----------------------------------------------------------------------------------------------


def _storage_records(io: FileIO, timeline: Timeline) -> FilesRecords:
    """The committed data files in storage, as ``files`` records (files of pending or failed instants left out)."""
    committed = committed_on(timeline)
    listed = list_table_files(io)
    out: FilesRecords = {ALL_PARTITIONS: {}}
    found = [(b.partition, b.name, b.size, b.instant) for b in (*listed.bases, *listed.cdc)]
    found += [(lg.partition, lg.name, lg.size, lg.base_instant) for lg in listed.logs]
    for partition, name, size, instant in found:
        if instant in committed:
            out.setdefault(_key(partition), {})[name] = FileEntry(size)
            out[ALL_PARTITIONS][_key(partition)] = FileEntry(0)
    return out


def rebuild_metadata_table(io: FileIO, config: TableConfig, timeline: Timeline, completion: str, *,
                           index: tuple[int, pa.Table] | None = None) -> int:
    """(Re)build the ``files`` partition from a listing of storage and turn it on; returns the files listed. Run
    under the commit lock: first readers are told to stop using any metadata table (``hoodie.properties``), then the
    folder is replaced, then ``files`` is listed in ``hoodie.properties`` again.

    With ``index`` (file groups, and the table's rows: columns key, partition, file_id, instant) the record index is
    built too (:mod:`tablecore.services.record_index_build` reads the rows).

    Raises:
        ConfigError: the table is of version 6 (Hudi 0.x readers would need the version-6 layout).
    """
    if config.table_version < 8:
        raise ConfigError(f"the metadata table is written for table version 8 and later; this table is version "
                          f"{config.table_version} (lakegate table upgrade --to 8 first)")
    update_properties(io, {_PARTITIONS_KEY: None, f"{_PARTITIONS_KEY}.inflight": None, METADATA_BY_LAKEGATE: None})
    io.delete_dir(io.join(METADATA_DIR))
    records = _storage_records(io, timeline)
    MetadataTable(io, config).create(records, completion, index)
    partitions = f"{FILES_PARTITION},{RECORD_INDEX_PARTITION}" if index is not None else FILES_PARTITION
    update_properties(io, {_PARTITIONS_KEY: partitions, f"{_PARTITIONS_KEY}.inflight": "",
                           METADATA_BY_LAKEGATE: "true"})
    n = sum(len(v) for k, v in records.items() if k != ALL_PARTITIONS)
    logger.info("built the metadata table of %s: %d files in %d partitions", io.uri, n, len(records) - 1)
    return n


def create_metadata_table(io: FileIO, config: TableConfig, partitions: tuple[str, ...], completion: str) -> None:
    """The metadata table of a new, empty table: ``files``, and the record index if ``partitions`` has it."""
    index = (config.record_index_file_groups, no_locations()) if RECORD_INDEX_PARTITION in partitions else None
    rebuild_metadata_table(io, config, Timeline.listed(io, config.table_version), completion, index=index)


def verify_metadata_table(io: FileIO, config: TableConfig, timeline: Timeline) -> list[str]:
    """Where the metadata table and storage disagree on the committed data files (empty: they agree)."""
    if not metadata_table_in_use(config):
        return ["the table has no metadata table lakegate maintains (hoodie.table.metadata.partitions="
                f"{','.join(config.metadata_partitions)!s}, table version {config.table_version})"]
    listed = MetadataTable(io, config).records(timeline)
    stored = _storage_records(io, timeline)
    problems = []
    for key in sorted(set(listed) | set(stored)):
        if key == ALL_PARTITIONS:
            continue
        mine = {n: e.size for n, e in listed.get(key, {}).items() if not e.deleted}
        there = {n: e.size for n, e in stored.get(key, {}).items()}
        for name in sorted(set(mine) - set(there)):
            problems.append(f"{_partition(key) or '(table root)'}: {name} is listed but not in storage")
        for name in sorted(set(there) - set(mine)):
            problems.append(f"{_partition(key) or '(table root)'}: {name} is in storage but not listed")
        for name in sorted(n for n in set(mine) & set(there) if mine[n] != there[n]):
            problems.append(f"{_partition(key) or '(table root)'}: {name} is listed with {mine[name]} bytes, "
                            f"storage has {there[name]}")
    return problems


# ---- entry points ----------------------------------------------------------------------------------------------------


def rebuild(uri: str, storage_options: Mapping[str, str] | None = None) -> int:
    """Build (or rebuild) the metadata table of the table at ``uri`` from a listing of storage, under the commit lock
    (writers wait; no Spark needed), and turn it on: from here every publish keeps it, and readers (lakegate,
    hudi-rs, Hudi's Java readers) list files through it. Returns the number of data files it lists.

    Raises:
        TableNotFoundError: no table at ``uri``.
        ConfigError: the table is of version 6.
    """
    io = file_io_for(uri, storage_options)
    config = read_config(io, uri)
    with commit_lock(io):
        timeline = Timeline.listed(io, config.table_version)
        return rebuild_metadata_table(io, config, timeline, timeline.next_completion_time())


def verify(uri: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Where the metadata table of the table at ``uri`` and storage disagree about the committed data files (empty:
    they agree, or - a first line says so - there is no metadata table lakegate maintains)."""
    io = file_io_for(uri, storage_options)
    config = read_config(io, uri)
    return verify_metadata_table(io, config, Timeline.listed(io, config.table_version))
