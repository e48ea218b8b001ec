"""What :mod:`tablecore.services.replicate` copies, read from a table's timeline and archive: *units* (one completed
instant with the requested and inflight files that led to it), the data files a unit wrote, and the files a clean,
rollback or restore removed.

A unit is keyed by ``(instant time, completed action)``: a compaction's ``T.compaction.requested`` /
``.inflight`` belong to the unit ``(T, commit)`` it completes as, a clustering's (layout 2) to ``(T,
replacecommit)``; a savepoint of ``T`` is a unit of its own beside the write ``T``.

Archived units come from the source's archive: lakegate's JSON-lines files in ``.hoodie/archived`` hold every state
file of an instant byte for byte; the LSM history of layout 2 (``.hoodie/timeline/history``) holds the completed
file's bytes and the plan, from which the unit's files are rebuilt (an empty requested file, the clean's plan for a
clean). Java's Avro archive logs are not read.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from tablecore.format.archived_timeline import decode_archive, parse_archive_file_name
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.file_naming import BaseFileName
from tablecore.format.instant import Action, Instant, State
from tablecore.format.log_format import LogFileName
from tablecore.format.lsm_timeline import decode_data_file, is_data_file
from tablecore.format.service_metadata import (
    read_clean_metadata,
    read_cleaner_plan_files,
    read_restore_metadata,
    read_restore_plan,
    read_rollback_metadata,
    read_rollback_plan,
)

__all__ = [
    "DataFile", "Removal", "Unit", "UnitKey", "archive_range", "archived_units", "clean_removal", "cleaned_names",
    "file_id_of", "instant_of", "relative", "rollback_removal", "units_of", "written_files",
]

logger = logging.getLogger(__name__)

UnitKey = tuple[str, Action]
"""(instant time, completed action) of a unit."""

_FAMILY = {Action.COMPACTION: Action.COMMIT, Action.LOG_COMPACTION: Action.DELTA_COMMIT,
           Action.CLUSTERING: Action.REPLACE_COMMIT}


@dataclass
class Unit:
    """One instant of a timeline with its state files (names in the timeline folder).

    Attributes:
        time: the instant time.
        action: the action it completes as (``commit`` for a compaction).
        pre: names of its requested and inflight files, in lifecycle order.
        done: the name of its completed file (None: the instant is pending).
        completion: its completion time (layout 2), None on layout 1.
        contents: the files' bytes, for a unit read from an archive (None: read them from the timeline folder).
    """

    time: str
    action: Action
    pre: list[str] = field(default_factory=list)
    done: str | None = None
    completion: str | None = None
    contents: dict[str, bytes] | None = None

    @property
    def key(self) -> UnitKey:
        """(time, action)."""
        return (self.time, self.action)

    @property
    def order(self) -> tuple[str, str, int]:
        """The order units are copied in: by completion (layout 1: instant time), a savepoint after its write."""
        return (self.completion or self.time, self.time, 1 if self.action is Action.SAVEPOINT else 0)

    def names(self) -> list[str]:
        """Every file name of the unit, the completed one last."""
        return [*self.pre, *([self.done] if self.done else [])]


def units_of(files: Iterable[Instant]) -> dict[UnitKey, Unit]:
    """The units of a timeline's instant files."""
    out: dict[UnitKey, Unit] = {}
    for i in sorted(files, key=lambda i: (i.time, i.state.rank, i.action.value)):
        unit = out.setdefault((i.time, _FAMILY.get(i.action, i.action)), Unit(i.time, _FAMILY.get(i.action, i.action)))
        if i.is_completed:
            unit.done, unit.completion = i.file_name, i.completion
        elif i.file_name not in unit.pre:
            unit.pre.append(i.file_name)
    return out


# ---- archives ------------------------------------------------------------------------------------------------------

def archive_range(name: str) -> tuple[str, str] | None:
    """(first, last) instant time of an archive file of either layout, from its name; None for other files."""
    found = parse_archive_file_name(name)
    if found is not None:
        return found
    if is_data_file(name):
        first, last, _ = name.split("_", 2)
        return first, last
    return None


def archived_units(name: str, data: bytes) -> list[Unit]:
    """The completed units an archive file holds (lakegate's JSON lines or an LSM history data file); empty for a
    file of another format."""
    if parse_archive_file_name(name) is not None:
        units: dict[UnitKey, Unit] = {}
        files = decode_archive(data)
        for key, unit in units_of(f.instant for f in files).items():
            unit.contents = {f.file_name: f.content for f in files if f.instant.time == key[0]}
            units[key] = unit
        return [u for u in units.values() if u.done is not None]
    if not is_data_file(name):
        return []
    out = []
    for row in decode_data_file(data):
        try:
            action = Action(row.action)
        except ValueError:
            logger.warning("archived instant %s has an unknown action %r: not replicated", row.instant, row.action)
            continue
        done = Instant(row.instant, action, State.COMPLETED, row.completion or None).file_name
        requested = Instant(row.instant, action, State.REQUESTED).file_name
        plan = row.plan if action is Action.CLEAN and row.plan else b""
        out.append(Unit(row.instant, action, [requested], done, row.completion or None,
                        {requested: plan, done: row.metadata or b""}))
    return out


# ---- what a unit wrote and removed ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class DataFile:
    """A file a completed write recorded: its path relative to the table, the size recorded (0: unknown), and
    whether it is a log file (whose later appends make it longer: its first ``size`` bytes are what the write left)."""

    path: str
    size: int
    log: bool


def written_files(meta: CommitMetadata) -> list[DataFile]:
    """The base, log and CDC log files a completed write's metadata names."""
    out: dict[str, DataFile] = {}
    for stat in meta.write_stats:
        if stat.path:
            name = posixpath.basename(stat.path)
            log = stat.log_version is not None or LogFileName.parse(name) is not None
            out[stat.path] = DataFile(stat.path, stat.file_size_in_bytes, log)
        for rel, size in (stat.cdc_stats or {}).items():
            out[rel] = DataFile(rel, size, False)
    return sorted(out.values(), key=lambda f: f.path)


def relative(partition: str, path: str) -> str:
    """The table-relative path of a file a service recorded under ``partition`` (by name: plans written elsewhere
    name the same files by full paths or URIs)."""
    name = posixpath.basename(path)
    return f"{partition}/{name}" if partition else name


def file_id_of(name: str) -> str | None:
    """The file id a data file's name carries."""
    base = BaseFileName.parse(name)
    if base is not None:
        return base.file_id
    log = LogFileName.parse(name) or LogFileName.parse_cdc(name)
    return log.file_id if log is not None else None


def instant_of(name: str) -> str | None:
    """The instant a data file's name says wrote it: a base or CDC log file's instant, a log file's base instant
    (on layout 2 the delta commit that wrote it)."""
    base = BaseFileName.parse(name)
    if base is not None:
        return base.instant
    log = LogFileName.parse(name) or LogFileName.parse_cdc(name)
    return log.base_instant if log is not None else None


def clean_removal(data: bytes) -> tuple[set[str], set[str]]:
    """(files, partitions) a completed clean deleted, as table-relative paths."""
    deleted, gone = read_clean_metadata(data)
    return {relative(partition, n) for partition, names in deleted.items() for n in names}, {p for p in gone if p}


def cleaned_names(data: bytes, *, plan: bool) -> set[str]:
    """Table-relative paths a clean deletes: its completed metadata, or (``plan``) a pending clean's plan."""
    if not data:
        return set()
    if plan:
        return {relative(p, f) for p, fs in read_cleaner_plan_files(data).items() for f in fs}
    return clean_removal(data)[0]


@dataclass
class Removal:
    """What a rollback or restore undid: the instants rolled back and the files it recorded as deleted (by partition,
    table-relative) or written (rollback log files)."""

    targets: list[str]
    deleted: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    partitions: set[str] = field(default_factory=set)


def _add(out: Removal, partition: str, deleted: Iterable[str] | None, written: Iterable[str] | None) -> None:
    out.partitions.add(partition)
    out.deleted.update(relative(partition, f) for f in deleted or ())
    out.written.update(relative(partition, f) for f in written or ())


def rollback_removal(action: Action, data: bytes, *, completed: bool) -> Removal:
    """What a rollback or restore (its completed file, or with ``completed=False`` its plan) undid or undoes."""
    if completed:
        if action is Action.ROLLBACK:
            instants, by_partition = read_rollback_metadata(data)
            targets, parts = [t for t, _ in instants], list(by_partition.items())
        else:
            targets, parts = read_restore_metadata(data)
        out = Removal(sorted(set(targets), reverse=True))
        for partition, p in parts:
            _add(out, partition, p.deleted_files, p.rollback_log_files)
        return out
    if action is Action.ROLLBACK:
        target, _ = read_rollback_plan(data)
        return Removal([target[0]] if target else [])
    return Removal(sorted(set(read_restore_plan(data)), reverse=True))
