"""Incremental, consistent replication of a table to a second location (``lakegate table replicate SRC DST``).

Each run copies what completed in the source since the last run, instant by instant in the order the instants
completed (completion time on layout 2, instant time on layout 1), through the tables' FileIOs (a local disk and S3
alike). For each instant (a *unit*, :mod:`tablecore.services.replicate_units`):

1. its requested and inflight files — from here on the target sees the instant as pending, and a pending instant's
   files are invisible to every reader;
2. the files it wrote, named by its commit metadata's write stats (base, log and CDC log files; of a log file that
   later writes appended to, the bytes this write left), a file already in the target with that size skipped; a
   clean's deletions; a rollback's or restore's undoing of its targets, as the source did it (the target's completed
   file first, then the rollback's command-block log files, then the targets' files and timeline files);
3. its completed file, last: readers of the target see the instant whole or not at all.

Instants the source archived move into the target's archive the same way: the archive files first, then the
instants' files leave the target's active timeline (oldest first, each one's completed file last), so an instant is
never in neither place; instants archived before the target had them are copied from the archive first. The
target's ``hoodie.properties`` is written on the first run, before any instant, and kept equal to the source's (less
a metadata table, which is not replicated).

A run killed at any point leaves the target as the source was as of the target's newest completed instant, plus
invisible files; the next run copies again what a killed one did not finish. The target must not be written to:
a target with instants the source does not have, or another table, is refused (:class:`ReplicationError`). One run
at a time holds the target's replication lock. No engine is needed (no Spark); docs/replication.md has the details.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tablecore.config import METADATA_BY_LAKEGATE, TableConfig
from tablecore.exceptions import ConfigError, ReplicationError, TableCorruptError, TableNotFoundError
from tablecore.format.archived_timeline import ARCHIVED_DIR
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.file_naming import PARTITION_METAFILE
from tablecore.format.file_view import files_from_listing
from tablecore.format.instant import Action, Instant
from tablecore.format.log_format import BlockType, LogFileName, LogFormatError, read_blocks
from tablecore.format.lsm_timeline import HISTORY_DIR, VERSION_FILE
from tablecore.format.properties import format_properties, parse_properties
from tablecore.format.timeline import HOODIE_DIR, timeline_dir
from tablecore.io import FileIO, file_io_for
from tablecore.results import ReplicationResult
from tablecore.services.replicate_copy import ReplicationLock, Source, SourceFileMissing, Target
from tablecore.services.replicate_units import (
    DataFile,
    Removal,
    Unit,
    UnitKey,
    archive_range,
    archived_units,
    clean_removal,
    cleaned_names,
    file_id_of,
    instant_of,
    rollback_removal,
    units_of,
    written_files,
)
from tablecore.table_properties import PROPERTIES, PROPERTIES_BACKUP, damage_of, read_config

__all__ = ["replicate", "replicate_storage"]

logger = logging.getLogger(__name__)

WORKERS = 8
"""Threads copying the data files of one instant (the work waits on storage)."""
VERSIONS = (6, 8)
_METADATA_TABLE_KEYS = ("hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight",
                        METADATA_BY_LAKEGATE)
_SEED_DIRS = (".aux/.bootstrap/.partitions", ".aux/.bootstrap/.fileids", ".temp", ".schema")
_ROLLBACKS = (Action.ROLLBACK, Action.RESTORE)


def replicate(src: str, dst: str, *, src_storage_options: Mapping[str, str] | None = None,
              dst_storage_options: Mapping[str, str] | None = None) -> ReplicationResult:
    """Copy what completed in the table at ``src`` since the last replication into ``dst`` (another directory or
    bucket), so that ``dst`` reads as ``src`` did as of ``dst``'s newest completed instant (see the module
    docstring). The first run into an empty or missing ``dst`` copies the whole table.

    Args:
        src: the source table's base path or URI.
        dst: the target's base path or URI.
        src_storage_options: settings of the source's storage, as for :meth:`tablecore.Table.open`.
        dst_storage_options: settings of the target's storage.

    Raises:
        TableNotFoundError: no table at ``src``.
        ReplicationError: ``dst`` holds another table (or is ``src``), was written to, or another replication into
            it is running.
        TableCorruptError: a file the source's timeline names is damaged or missing (and no clean removed it).
        ConfigError: the source's table version is not one lakegate writes (6 or 8).
        StorageError: bad storage options.
    """
    return replicate_storage(file_io_for(src, src_storage_options), file_io_for(dst, dst_storage_options))


def replicate_storage(src_io: FileIO, dst_io: FileIO) -> ReplicationResult:
    """:func:`replicate` on the two tables' storage."""
    started = time.monotonic()
    if dst_io.table_uri().rstrip("/") == src_io.table_uri().rstrip("/"):
        raise ReplicationError(f"{dst_io.uri} is the source itself: replicate into another location")
    config = read_config(src_io, src_io.uri)
    if config.table_version not in VERSIONS:
        raise ConfigError(f"replication copies tables of version {' or '.join(map(str, VERSIONS))}, and "
                          f"{src_io.uri} is version {config.table_version}")
    properties = _replica_properties(src_io)
    target = _target_config(dst_io, config)
    with ReplicationLock(dst_io) as lock:
        run = _Run(Source(src_io), Target(dst_io), config.table_version, lock)
        if target is None:
            run.seed(properties)
        run.copy_folder(f"{HOODIE_DIR}/.schema")
        waiting = run.execute()
        if waiting is None:
            run.sync_properties(properties)
    dst = run.dst
    result = ReplicationResult(src_io.uri, dst_io.uri, tuple(run.copied), dst.files_copied, dst.bytes_copied,
                               dst.files_deleted, run.archived, run.latest_write(), waiting,
                               time.monotonic() - started)
    logger.info("replicated %s into %s: %d instants, %d files (%d bytes) copied, %d deleted, %d archived; now at %s",
                src_io.uri, dst_io.uri, len(result.instants), result.files_copied, result.bytes_copied,
                result.files_deleted, result.instants_archived, result.replicated_instant)
    return result


# ---- the tables' properties ----------------------------------------------------------------------------------------

def _replica_properties(io: FileIO) -> bytes:
    """The source's ``hoodie.properties`` as the target gets it: byte for byte, unless it names a metadata table (not
    replicated: its keys are dropped, so that readers of the target list its files instead)."""
    for rel in (PROPERTIES, PROPERTIES_BACKUP):
        try:
            data = io.read_bytes(io.join(rel))
        except FileNotFoundError:
            continue
        if damage_of(data) is None:
            break
    else:
        raise TableNotFoundError(f"no table at {io.uri}: {PROPERTIES} not found")
    props = parse_properties(data.decode("utf-8"))
    if not any(props.get(k) for k in _METADATA_TABLE_KEYS):
        return data
    return format_properties({k: v for k, v in props.items() if k not in _METADATA_TABLE_KEYS}).encode()


def _identity(config: TableConfig) -> str:
    """What makes a table the same table: name, record key and type."""
    return f"{config.name}, record key {','.join(config.record_key)}, {config.table_type}"


def _target_config(io: FileIO, source: TableConfig) -> TableConfig | None:
    """The target's configuration (None: no table there yet), checked to be the source's table.

    Raises:
        ReplicationError: the target is another table, another version, or a timeline without properties.
    """
    try:
        target = read_config(io, io.uri)
    except TableNotFoundError:
        if any(Instant.parse(f.name) for f in io.list(io.join(timeline_dir(source.table_version)))):
            raise ReplicationError(f"{io.uri} holds a timeline but no {PROPERTIES}: it is no replica of "
                                   f"{source.name}; replicate into a new location") from None
        return None
    if _identity(target) != _identity(source):
        raise ReplicationError(f"{io.uri} holds another table ({_identity(target)}; the source is "
                               f"{_identity(source)}): replicate into a new location")
    if target.table_version != source.table_version:
        raise ReplicationError(f"{io.uri} is a table of version {target.table_version} and the source of version "
                               f"{source.table_version} (upgraded since?): replicate into a new location")
    return target


# ---- one run -------------------------------------------------------------------------------------------------------

@dataclass
class _Run:
    src: Source
    dst: Target
    version: int
    lock: ReplicationLock
    copied: list[tuple[str, str]] = field(default_factory=list)
    archived: int = 0
    dst_units: dict[UnitKey, Unit] = field(default_factory=dict)
    _markers: set[str] = field(default_factory=set)
    _gone: tuple[set[str], set[tuple[str, str]]] | None = None
    _archived: list[Unit] = field(default_factory=list)

    @property
    def tl(self) -> str:
        """The timeline folder."""
        return timeline_dir(self.version)

    @property
    def archive_dirs(self) -> tuple[str, ...]:
        """The archive folders (a version-8 table upgraded from 6 keeps lakegate's older archive too)."""
        return (ARCHIVED_DIR, HISTORY_DIR) if self.version >= 8 else (ARCHIVED_DIR,)

    def seed(self, properties: bytes) -> None:
        """First run: the folders a table has, then ``hoodie.properties`` (the target is an empty table from here)."""
        io = self.dst.io
        for d in (*_SEED_DIRS, *(("timeline/history",) if self.version >= 8 else ("archived",))):
            io.makedirs(io.join(HOODIE_DIR, d))
        if not io.create_if_absent(io.join(PROPERTIES), properties):
            raise ReplicationError(f"a table was created at {io.uri} while the replication started")
        self.dst.files_copied += 1
        self.dst.bytes_copied += len(properties)
        logger.info("replicating into the new table %s", io.uri)

    def copy_folder(self, rel_dir: str) -> None:
        """Copy the files of a folder the target lacks or has with another size."""
        have = self.dst.folder(rel_dir)
        for name, size in sorted(self.src.folder(rel_dir).items()):
            if have.get(name) != size:
                self.dst.put(f"{rel_dir}/{name}", self.src.read_all(f"{rel_dir}/{name}"))

    def sync_properties(self, properties: bytes) -> None:
        """Keep the target's ``hoodie.properties`` equal to the source's (the schema recorded by the first write,
        a metadata table disabled...)."""
        try:
            current = self.dst.io.read_bytes(self.dst.io.join(PROPERTIES))
        except FileNotFoundError:
            current = b""
        if parse_properties(current.decode("utf-8", "replace")) != parse_properties(properties.decode("utf-8")):
            self.dst.write(PROPERTIES, properties)

    def latest_write(self) -> str | None:
        """The target's newest completed write."""
        return max((u.time for u in self.dst_units.values() if u.done and u.action.is_write), default=None)

    # ---- the plan ----------------------------------------------------------------------------------------------

    def _units(self, folders: Target | Source) -> dict[UnitKey, Unit]:
        names = folders.folder(self.tl)
        return units_of(i for i in (Instant.parse(n) for n in names) if i is not None)

    def execute(self) -> str | None:
        """Copy every unit completed in the source and not in the target, then the archive; returns why it stopped
        early (None: it did not)."""
        src_units = self._units(self.src)
        self.dst_units = self._units(self.dst)
        archived = self._new_archived()
        todo = [u for k, u in archived.items() if k not in src_units and not self._done(k)]
        todo += [u for k, u in src_units.items() if u.done and not self._done(k)]
        waiting = self._check(src_units, archived, todo)
        if waiting is not None:
            logger.warning("replication of %s waits: %s", self.src.io.uri, waiting)
            return waiting
        self._archived = list(archived.values())
        self._unreadable_archive(min((k[0] for k in src_units), default=None))
        for unit in sorted(todo, key=lambda u: u.order):
            self._unit(unit)
        self._sync_archives()
        self._drop(src_units)
        return None

    def _done(self, key: UnitKey) -> bool:
        unit = self.dst_units.get(key)
        return unit is not None and unit.done is not None

    def _new_archived(self) -> dict[UnitKey, Unit]:
        """The units of the source's archive files the target does not have yet (instants of ranges the target's
        archive already covers left out)."""
        out: dict[UnitKey, Unit] = {}
        for d in self.archive_dirs:
            have = self.dst.folder(d)
            covered = [r for n in have if (r := archive_range(n)) is not None]
            for name, size in sorted(self.src.folder(d).items()):
                if have.get(name) == size or archive_range(name) is None:
                    continue
                try:
                    units = archived_units(name, self.src.read_all(f"{d}/{name}"))
                except SourceFileMissing:
                    continue
                except (ValueError, OSError, KeyError) as e:
                    logger.warning("cannot read the archive file %s of %s (%s): its instants are not replicated",
                                   name, self.src.io.uri, e)
                    continue
                for u in units:
                    if not any(first <= u.time <= last for first, last in covered):
                        out.setdefault(u.key, u)
        return out

    def _unreadable_archive(self, first: str | None) -> None:
        """Java's archive logs (``.commits_.archive.*``) are not read: when the source has new ones, the data files
        of instants older than its active timeline (which every reader shows as archived) are found by one listing
        of the source, the only one of the whole table a run makes, and copied before any instant."""
        have = self.dst.folder(ARCHIVED_DIR)
        if first is None or not any(archive_range(n) is None and have.get(n) != size
                                    for n, size in self.src.folder(ARCHIVED_DIR).items()):
            return
        io = self.src.io
        files = files_from_listing(io.base, [(f.path, f.size) for f in io.list(io.base, recursive=True)])
        old = [(f.relative_path, f.size, False) for f in (*files.bases, *files.cdc) if f.instant < first]
        old += [(f.relative_path, f.size, True) for f in files.logs if f.base_instant < first]
        for rel, size, log in sorted(old):
            self._partition_marker(posixpath.dirname(rel))
            self.dst.copy(self.src, rel, size, prefix=log, instant=None)
        logger.info("copied %d data files of instants the source archived into Java's archive logs", len(old))

    def _content(self, unit: Unit, name: str) -> bytes:
        if unit.contents is not None:
            return unit.contents[name]
        return self.src.read_all(f"{self.tl}/{name}")

    def _removal(self, unit: Unit, *, completed: bool) -> Removal:
        names = [unit.done] if completed and unit.done else list(reversed(unit.pre))
        for name in names:
            try:
                data = self._content(unit, name)
            except SourceFileMissing:
                continue
            if data:
                return rollback_removal(unit.action, data, completed=completed)
        return Removal([])

    def _check(self, src_units: dict[UnitKey, Unit], archived: dict[UnitKey, Unit], todo: list[Unit]) -> str | None:
        """Refuse a target that was written to; say why to wait if the source is rolling back what the target has.

        Raises:
            ReplicationError: the target has an instant the source does not explain.
        """
        to_roll_back = {t for u in todo if u.action in _ROLLBACKS for t in self._removal(u, completed=True).targets}
        rolling_back = {t for u in src_units.values() if u.action in _ROLLBACKS and u.done is None
                        for t in self._removal(u, completed=False).targets}
        first = min((k[0] for k in src_units), default=None)
        src_sizes, dst_sizes = self.src.folder(self.tl), self.dst.folder(self.tl)
        for key, unit in sorted(self.dst_units.items()):
            theirs = src_units.get(key)
            what = f"{'completed' if unit.done else 'pending'} {unit.action.value} {unit.time}"
            if theirs is not None and theirs.done is not None:
                if unit.done is not None and src_sizes.get(unit.done) not in (None, dst_sizes.get(unit.done)):
                    raise ReplicationError(f"the target's {what} differs from the source's: it was written to; "
                                           "replicate into a new location")
                continue
            if key in archived or unit.time in to_roll_back or (theirs is not None and unit.done is None):
                continue  # archived by the source / rolled back when its rollback is copied / pending in both
            if unit.time in rolling_back:
                return f"the source is rolling back {unit.time}, which the target has; run again once it is done"
            if unit.done is not None and (unit.action is Action.SAVEPOINT or (first is not None and unit.time < first)):
                continue  # a savepoint the source deleted / archived by the source (a run stopped before dropping it)
            raise ReplicationError(f"the target {self.dst.io.uri} has the {what}, which the source does not: it "
                                   "was written to (a replica must not be); replicate into a new location")
        return None

    # ---- one unit ----------------------------------------------------------------------------------------------

    def _unit(self, unit: Unit) -> None:
        """Copy one completed unit: requested and inflight files, its data files (or deletions), the completed file
        last."""
        assert unit.done is not None
        try:
            done = self._content(unit, unit.done)
        except SourceFileMissing:
            raise ReplicationError(f"the {unit.action.value} {unit.time} left the source's active timeline while it "
                                   "was replicated (archived or rolled back meanwhile): run the replication again") \
                from None
        for name in unit.pre:
            try:
                self.dst.put(f"{self.tl}/{name}", self._content(unit, name))
            except SourceFileMissing:
                logger.debug("%s of %s is gone from the source", name, unit.time)
        if unit.action.is_write:
            self._copy_written(unit, done)
        elif unit.action in _ROLLBACKS:
            self._roll_back(unit, done)
        elif unit.action is Action.CLEAN:
            files, partitions = clean_removal(done)
            for rel in sorted(files):
                self.dst.delete(rel)
            for p in sorted(partitions):
                self.dst.delete_folder(p)
        self.dst.put(f"{self.tl}/{unit.done}", done)
        self.dst_units[unit.key] = Unit(unit.time, unit.action, list(unit.pre), unit.done, unit.completion)
        self.copied.append((unit.time, unit.action.value))
        logger.info("replicated %s %s", unit.action.value, unit.time)
        self.lock.refresh()

    def _metadata(self, data: bytes, unit: Unit, where: str) -> CommitMetadata:
        try:
            return CommitMetadata.from_bytes(data)
        except (ValueError, TypeError, AttributeError, KeyError, EOFError, IndexError):
            raise TableCorruptError(f"the completed {unit.action.value} file does not parse as commit metadata",
                                    path=f"{where}/{self.tl}/{unit.done}", instant=unit.time) from None

    def _copy_written(self, unit: Unit, done: bytes) -> None:
        files = written_files(self._metadata(done, unit, self.src.io.uri))
        folders = sorted({posixpath.dirname(f.path) for f in files})
        for p in folders:
            self.src.folder(p)
            self.dst.folder(p)
            self._partition_marker(p)

        def copy(f: DataFile) -> str | None:
            try:
                self.dst.copy(self.src, f.path, f.size, prefix=f.log, instant=unit.time)
            except SourceFileMissing:
                return f.path
            return None

        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="lakegate-replicate") as pool:
            missing = [m for m in pool.map(copy, files) if m is not None]
        for rel in missing:
            self._missing(unit, rel)

    def _partition_marker(self, partition: str) -> None:
        """The partition's ``.hoodie_partition_metadata``, before its first data file."""
        if partition in self._markers:
            return
        rel = f"{partition}/{PARTITION_METAFILE}" if partition else PARTITION_METAFILE
        if self.dst.size(rel) is None and self.src.size(rel) is not None:
            self.dst.put(rel, self.src.read_all(rel))
        self._markers.add(partition)

    def _missing(self, unit: Unit, rel: str) -> None:
        """A file a completed source instant wrote is gone: fine if a clean (or a replacecommit of its file group)
        of the source removed it, else the source is damaged.

        Raises:
            ReplicationError: the instant itself left the source meanwhile.
            TableCorruptError: nothing explains the missing file.
        """
        cleaned, replaced = self._removed_in_source()
        if rel in cleaned or (posixpath.dirname(rel), file_id_of(posixpath.basename(rel)) or "") in replaced:
            logger.info("%s of %s %s was cleaned in the source: not copied", rel, unit.action.value, unit.time)
            return
        if unit.contents is None and not self.src.io.exists(self.src.path(f"{self.tl}/{unit.done}")):
            raise ReplicationError(f"the {unit.action.value} {unit.time} left the source while it was replicated "
                                   "(rolled back or archived meanwhile): run the replication again")
        raise TableCorruptError(f"a file the completed {unit.action.value} {unit.time} wrote is missing from the "
                                "source, and no clean removed it: the source is damaged (`lakegate table doctor`)",
                                path=self.src.path(rel), instant=unit.time)

    def _removed_in_source(self) -> tuple[set[str], set[tuple[str, str]]]:
        """Files the source's cleans (completed, pending, archived) removed, and file groups its replacecommits
        replaced (read once, from a fresh listing)."""
        if self._gone is not None:
            return self._gone
        cleaned: set[str] = set()
        replaced: set[tuple[str, str]] = set()
        names = [f.name for f in self.src.io.list(self.src.path(self.tl))]
        fresh = units_of(i for i in (Instant.parse(n) for n in names) if i is not None)
        for unit in [*fresh.values(), *self._archived]:
            try:
                if unit.action is Action.CLEAN:
                    for name in ([unit.done] if unit.done else unit.pre):
                        cleaned |= cleaned_names(self._content(unit, name), plan=unit.done is None)
                elif unit.action is Action.REPLACE_COMMIT and unit.done:
                    meta = CommitMetadata.from_bytes(self._content(unit, unit.done))
                    replaced.update((p, fid) for p, ids in (meta.replaced_file_ids or {}).items() for fid in ids)
            except (SourceFileMissing, ValueError, KeyError, TypeError, EOFError, IndexError):
                continue
        self._gone = (cleaned, replaced)
        return self._gone

    def _roll_back(self, unit: Unit, done: bytes) -> None:
        """Undo a rollback's or restore's targets in the target as the source did: their completed files, then the
        rollback's command-block log files (and the log files of the targets they void, which the source keeps),
        then their data files (those the source no longer has) and their requested and inflight files."""
        removal = rollback_removal(unit.action, done, completed=True)
        targets = set(removal.targets)
        named, partitions = set(removal.deleted), set(removal.partitions)
        mine = [(k, u) for k, u in self.dst_units.items() if k[0] in targets and k[1] is not Action.SAVEPOINT]
        mine.sort(key=lambda item: item[0], reverse=True)
        for _, their in mine:
            for name in their.names():
                meta = self._dst_metadata(name)
                if meta is not None:
                    named.update(f.path for f in written_files(meta))
                    partitions |= meta.partitions()
        for _, their in mine:
            if their.done:
                self.dst.delete(f"{self.tl}/{their.done}")  # the target's instant turns invisible at once
        for p in sorted(partitions):
            theirs, have = self.src.folder(p), self.dst.folder(p)
            for name, size in sorted(theirs.items()):
                rel = f"{p}/{name}" if p else name
                if have.get(name) != size and (rel in removal.written or self._rollback_log(rel, targets)):
                    self.dst.copy(self.src, rel, size, prefix=False, instant=unit.time)
        for p in sorted(partitions):
            theirs = self.src.folder(p)
            for name in sorted(self.dst.folder(p)):
                rel = f"{p}/{name}" if p else name
                if name not in theirs and (rel in named or instant_of(name) in targets):
                    self.dst.delete(rel)
        for key, their in mine:
            for name in reversed(their.pre):
                self.dst.delete(f"{self.tl}/{name}")
            self.dst_units.pop(key, None)

    def _dst_metadata(self, name: str) -> CommitMetadata | None:
        """The commit metadata (or inflight plan) a target timeline file holds, if it is one."""
        instant = Instant.parse(name)
        if instant is None or instant.action in (Action.COMPACTION, Action.CLUSTERING, *_ROLLBACKS):
            return None
        try:
            return CommitMetadata.from_bytes(self.dst.io.read_bytes(self.dst.path(f"{self.tl}/{name}")))
        except (OSError, ValueError, TypeError, AttributeError, KeyError, EOFError, IndexError):
            return None

    def _rollback_log(self, rel: str, targets: Iterable[str]) -> bool:
        """True for a source log file holding only blocks of ``targets`` (voided) and rollback command blocks of
        them: what the rollback wrote, or left of its targets."""
        if LogFileName.parse(posixpath.basename(rel)) is None:
            return False
        try:
            blocks = read_blocks(self.src.read_all(rel), tolerate_truncated_tail=False)
        except (SourceFileMissing, LogFormatError):
            return False
        wanted = set(targets)
        return bool(blocks) and all(b.target_instant in wanted if b.block_type is BlockType.COMMAND
                                    else b.instant in wanted for b in blocks)

    # ---- archive -----------------------------------------------------------------------------------------------

    def _sync_archives(self) -> None:
        """Copy the source's new and changed archive files (an LSM history's ``_version_`` last)."""
        for d in self.archive_dirs:
            have = self.dst.folder(d)
            listed = self.src.folder(d)
            names = sorted((n for n in listed if n != VERSION_FILE and have.get(n) != listed[n]),
                           key=lambda n: (n.startswith("manifest_"), n))
            for name in names:
                try:
                    self.dst.put(f"{d}/{name}", self.src.read_all(f"{d}/{name}"))
                except SourceFileMissing:
                    continue
            if VERSION_FILE in listed:
                version = self.src.read_all(f"{d}/{VERSION_FILE}")
                mine = self.dst.io.read_bytes(self.dst.path(f"{d}/{VERSION_FILE}")) if VERSION_FILE in have else None
                if mine != version:
                    self.dst.write(f"{d}/{VERSION_FILE}", version)

    def _drop(self, src_units: dict[UnitKey, Unit]) -> None:
        """Instants of the target the source no longer has (archived; or savepoints it deleted) leave the target's
        active timeline, oldest first, each one's completed file last; so do requested and inflight files the
        source deleted of instants both have."""
        for key, unit in sorted(self.dst_units.items()):
            theirs = src_units.get(key)
            if theirs is not None and unit.done and theirs.done:  # a requested or inflight file the source deleted
                for name in [n for n in unit.pre if n not in theirs.pre]:
                    self.dst.delete(f"{self.tl}/{name}")
                    unit.pre.remove(name)
            if theirs is not None or unit.done is None:
                continue
            for name in unit.names():
                self.dst.delete(f"{self.tl}/{name}")
            self.dst_units.pop(key)
            self.archived += unit.action is not Action.SAVEPOINT
        if self.archived:
            logger.info("%d instants left the active timeline of %s (archived by the source)", self.archived,
                        self.dst.io.uri)
