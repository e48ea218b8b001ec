"""File groups, their base and log files, and their latest file slices as of an instant (the 'file system view').

A base file is visible as of ``Q`` when its instant is a completed write at or before ``Q``, or when its instant is
older than the first instant of the active timeline (assumed archived), and its file group was not replaced by a
completed replacecommit at or before ``Q``. The latest visible base file of each file group starts the group's
latest slice; the slice's log files are those whose base instant is that base file's instant (merge-on-read). Which
log *blocks* count is decided when the logs are read (their instants must be completed and not rolled back).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tablecore.format.file_naming import BaseFileName
from tablecore.format.log_format import LogFileName
from tablecore.format.timeline import Timeline
from tablecore.io import FileInfo, FileIO


def relative_path(partition: str, name: str) -> str:
    """The path of a file relative to the table base (partition "" is the base itself)."""
    return f"{partition}/{name}" if partition else name


@dataclass(frozen=True)
class BaseFile:
    """A base file of a file group."""

    partition: str
    file_id: str
    instant: str
    name: str
    path: str
    size: int

    @property
    def relative_path(self) -> str:
        """The path relative to the table base, as write stats record it."""
        return relative_path(self.partition, self.name)


@dataclass(frozen=True)
class LogFile:
    """A log file of a file slice (merge-on-read)."""

    partition: str
    file_id: str
    base_instant: str
    version: int
    write_token: str
    name: str
    path: str
    size: int

    @property
    def relative_path(self) -> str:
        """The path relative to the table base, as write stats record it."""
        return relative_path(self.partition, self.name)

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's order of the log files of a slice: base instant, version, write token."""
        return (self.base_instant, self.version, self.write_token)


@dataclass(frozen=True)
class FileSlice:
    """The base file (absent for a log-only group) and log files of one file group as of some instant."""

    partition: str
    file_id: str
    base_instant: str
    base: BaseFile | None
    logs: tuple[LogFile, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """(partition, fileId)."""
        return (self.partition, self.file_id)


@dataclass(frozen=True)
class CdcFile(BaseFile):
    """A CDC log file (``.<fileId>_<instant>.log.<version>_<token>.cdc``): the changes the commit ``instant`` made to
    the file group, written beside the base file it wrote (the fields of a base file; listings keep the two apart).
    Readers of the table's rows skip these files."""


@dataclass(frozen=True)
class TableFiles:
    """One listing of data files: base files, log files and CDC log files."""

    bases: tuple[BaseFile, ...]
    logs: tuple[LogFile, ...]
    cdc: tuple[CdcFile, ...] = ()


def _relative(base: str, path: str) -> str:
    prefix = base.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def files_from_listing(base: str, paths: Iterable[tuple[str, int]]) -> TableFiles:
    """Parse (full path, size) pairs into base and log files, ignoring ``.hoodie`` and unknown names."""
    bases: list[BaseFile] = []
    logs: list[LogFile] = []
    cdc: list[CdcFile] = []
    for path, size in paths:
        rel = _relative(base, path)
        if rel.startswith(".hoodie/") or "/.hoodie/" in rel:
            continue
        name = posixpath.basename(rel)
        partition = posixpath.dirname(rel)
        if name.startswith("."):
            log = LogFileName.parse(name)
            if log is not None:
                logs.append(LogFile(partition, log.file_id, log.base_instant, log.version, log.write_token, name,
                                    path, size))
            elif (changes := LogFileName.parse_cdc(name)) is not None:
                cdc.append(CdcFile(partition, changes.file_id, changes.base_instant, name, path, size))
            continue
        parsed = BaseFileName.parse(name)
        if parsed is not None:
            bases.append(BaseFile(partition, parsed.file_id, parsed.instant, parsed.name, path, size))
    return TableFiles(tuple(bases), tuple(logs), tuple(cdc))


LIST_IN_THREADS = 8  # partitions from which their listings run side by side
LIST_THREADS = 16


def list_table_files(io: FileIO, partitions: Iterable[str] | None = None) -> TableFiles:
    """Base and log files of the given partitions (one non-recursive listing each, side by side in threads when
    there are many on a remote store), or of the whole table."""
    if partitions is None:
        listing = [(f.path, f.size) for f in io.list(io.base, recursive=True)]
    else:
        dirs = [io.join(p) for p in partitions]
        listed: Iterable[list[FileInfo]]
        if not io.remote or len(dirs) < LIST_IN_THREADS:
            listed = map(io.list, dirs)
        else:  # each listing waits on storage (a LIST request on object storage): they overlap
            with ThreadPoolExecutor(min(LIST_THREADS, len(dirs)), thread_name_prefix="lakegate-list") as pool:
                listed = list(pool.map(io.list, dirs))
        listing = [(f.path, f.size) for files in listed for f in files]
    return files_from_listing(io.base, listing)


def base_files_from_listing(base: str, paths: Iterable[tuple[str, int]]) -> list[BaseFile]:
    """Parse (full path, size) pairs into base files, keeping only base-file names outside ``.hoodie``."""
    return list(files_from_listing(base, paths).bases)


def list_base_files(io: FileIO, partitions: Iterable[str] | None = None) -> list[BaseFile]:
    """The base files of the given partitions (one non-recursive listing each), or of the whole table."""
    return list(list_table_files(io, partitions).bases)


def latest_base_files(files: Iterable[BaseFile], timeline: Timeline, *, as_of: str | None = None) -> list[BaseFile]:
    """The latest visible base file of every live file group as of ``as_of`` (default: the latest completed write)."""
    completed = {i.time for i in timeline.completed_writes(until=as_of)}
    first = timeline.first_instant_time()
    on_timeline = {i.time for i in timeline.files}
    replaced = timeline.replaced_file_groups(until=as_of)
    best: dict[tuple[str, str], BaseFile] = {}
    for f in files:
        if as_of is not None and f.instant > as_of:
            continue
        visible = f.instant in completed or (
            first is not None and f.instant < first and f.instant not in on_timeline
        )
        if not visible:
            continue
        key = (f.partition, f.file_id)
        if key in replaced:
            continue
        cur = best.get(key)
        if cur is None or f.instant > cur.instant:
            best[key] = f
    return sorted(best.values(), key=lambda f: (f.partition, f.file_id))


def latest_file_slices(files: TableFiles, timeline: Timeline, *, as_of: str | None = None) -> list[FileSlice]:
    """The latest visible file slice of every live file group as of ``as_of`` (default: the latest write).

    A group with a visible base file gets the log files written against that base; a group without one (log-only,
    as Hudi's bucket index writes them) gets the logs of its newest visible base instant.
    """
    bases = {(b.partition, b.file_id): b for b in latest_base_files(files.bases, timeline, as_of=as_of)}
    completed = {i.time for i in timeline.completed_writes(until=as_of)}
    first = timeline.first_instant_time()
    on_timeline = {i.time for i in timeline.files}
    replaced = timeline.replaced_file_groups(until=as_of)
    logs_by_group: dict[tuple[str, str], list[LogFile]] = {}
    for log in files.logs:
        logs_by_group.setdefault((log.partition, log.file_id), []).append(log)
    bases_of: dict[tuple[str, str], list[str]] = {}  # every visible base instant of each group up to as_of
    if timeline.layout >= 2:
        for b in files.bases:
            if (as_of is None or b.instant <= as_of) and (b.instant in completed or (
                    first is not None and b.instant < first and b.instant not in on_timeline)):
                bases_of.setdefault((b.partition, b.file_id), []).append(b.instant)
    out: list[FileSlice] = []
    for key in sorted(set(bases) | set(logs_by_group)):
        if key in replaced:
            continue
        base = bases.get(key)
        logs = logs_by_group.get(key, [])
        if base is not None:
            base_instant = base.instant
        else:
            visible = [lg.base_instant for lg in logs if lg.base_instant in completed or (
                first is not None and lg.base_instant < first and lg.base_instant not in on_timeline)]
            if not visible:
                continue
            base_instant = max(visible)
        if timeline.layout >= 2 and base is None:
            mine = logs  # a log-only group (bucket index): one slice; blocks are chosen when the logs are read
        elif timeline.layout >= 2:
            mine = _logs_by_completion(logs, base_instant, bases_of.get(key, ()), timeline, first, on_timeline)
        else:
            mine = [lg for lg in logs if lg.base_instant == base_instant]
        out.append(FileSlice(key[0], key[1], base_instant, base, tuple(sorted(mine, key=lambda lg: lg.sort_key))))
    return out


def _logs_by_completion(logs: list[LogFile], base_instant: str, group_bases: Iterable[str], timeline: Timeline,
                        first: str | None, on_timeline: set[str]) -> list[LogFile]:
    """Layout 2 (Hudi 1.x) file slicing: a log file is named by the delta commit that wrote it and belongs to the
    slice of the newest base instant at or before that commit's *completion* time (hudi-rs and Hudi Java); logs of
    instants older than the active timeline (archived) count by their instant time, logs of pending instants by
    none."""
    starts = sorted(set(group_bases) | {base_instant})
    mine: list[LogFile] = []
    for lg in logs:
        done = timeline.completion_of(lg.base_instant)
        if done is None:
            if first is None or lg.base_instant >= first or lg.base_instant in on_timeline:
                continue
            done = lg.base_instant
        owner = max((b for b in starts if b <= done), default=None)
        if owner == base_instant:
            mine.append(lg)
    return mine
