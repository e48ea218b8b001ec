"""The data-file checks of :mod:`tablecore.services.verify`: the latest snapshot's files against what completed
writes recorded, their content, files no instant explains, and (``deep``) every row.

A missing or cut-short file is found with :mod:`tablecore.format.file_integrity` (one file at a time, so that every
one is reported); log files are read with :func:`~tablecore.format.log_integrity.read_log_checked`, which tells bytes
of completed instants that changed (an error) from damage no completed instant wrote (skipped by reads: reported
here as a torn tail).

Which data file an instant explains: a base file names the instant that wrote it; a log file is named by the write
stats of the completed writes that appended to it, or else its blocks name their instants. A file is explained when
that instant is a completed write that recorded it, a pending instant (a write in progress or staged, or one whose
commit file is damaged: reported on its own), older than the active timeline (archived: its data stays visible,
as in Hudi), or — for log files — an instant a rollback or restore on the timeline rolled back (its blocks stay,
voided by the rollback's command blocks). A file of a completed write that the write did not record is visible to
readers and was never committed (an error); a file of an instant that is gone (rolled back, or a writer that died)
is invisible, and only takes space (a warning).
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, partial

import pyarrow as pa
import pyarrow.parquet as pq

from tablecore.config import TableConfig
from tablecore.engine import Engine
from tablecore.exceptions import TableCorruptError
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_integrity import WrittenFiles, check_bases, check_slices, slice_extents
from tablecore.format.file_view import (
    BaseFile,
    FileSlice,
    LogFile,
    TableFiles,
    files_from_listing,
    latest_file_slices,
)
from tablecore.format.log_format import BlockType, LogBlock, read_block_at
from tablecore.format.log_integrity import LogExtent, extents_by_name, read_log_checked
from tablecore.format.timeline import HOODIE_DIR, InstantsOrEarlier, Timeline
from tablecore.io import FileInfo, FileIO
from tablecore.read_planning import ReadPlan, table_schema, written_files
from tablecore.results import Problem
from tablecore.tasks import mor
from tablecore.tasks.verify import read_every_row, slice_outcomes

__all__ = ["THREADS", "FileCheck", "Findings", "View", "check_duplicate_keys", "check_files", "check_rows",
           "repair_hint"]

logger = logging.getLogger(__name__)

PARQUET_MAGIC = b"PAR1"
TEMP_DIR = f"{HOODIE_DIR}/.temp"
THREADS = "lakegate-verify"
"""The name prefix of the threads that check files."""


class _ReportedByTheDoctor(logging.Filter):
    """Drops the warnings :func:`~tablecore.format.log_integrity.read_log_checked` logs about bytes it skips when it
    runs in the doctor's threads: the doctor reports them as problems of their own."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not threading.current_thread().name.startswith(THREADS)


logging.getLogger("tablecore.format.log_integrity").addFilter(_ReportedByTheDoctor())


@dataclass
class Findings:
    """The problems found so far and how many files were checked (appended to by the calling thread only)."""

    where: str  # the table as given: what the hints name
    problems: list[Problem] = field(default_factory=list)
    checked: int = 0

    def add(self, kind: str, severity: str, path: str | None, instant: str | None, message: str) -> None:
        """Record one problem."""
        self.problems.append(Problem(kind, severity, path, instant, message))


@dataclass(frozen=True)
class FileCheck:
    """What the file checks work with."""

    io: FileIO
    timeline: Timeline  # without completed writes whose commit file does not parse
    broken: frozenset[str]  # those writes
    rolled_back: frozenset[str]  # instants rollbacks and restores on the timeline rolled back (or are rolling back)
    found: Findings
    pool: ThreadPoolExecutor

    @cached_property
    def completed(self) -> frozenset[str]:
        """Times of the completed writes."""
        return frozenset(i.time for i in self.timeline.completed_writes())

    @cached_property
    def on_timeline(self) -> frozenset[str]:
        """Times of every instant file (any action and state), and of the writes whose commit file is damaged."""
        return frozenset(i.time for i in self.timeline.files) | self.broken

    def status(self, instant: str) -> str:
        """``completed`` (a completed write), ``pending`` (on the timeline but not a completed write, or a write
        whose commit file is damaged: reported on its own), ``rolled_back`` (by a rollback or restore on the
        timeline), ``archived`` (older than the active timeline) or ``gone``."""
        if instant in self.completed:
            return "completed"
        if instant in self.on_timeline:
            return "pending"
        if instant in self.rolled_back:
            return "rolled_back"
        first = self.timeline.first_instant_time()
        return "archived" if first is not None and instant < first else "gone"

    def repair(self, instant: str) -> str:
        """The hint for data a completed instant wrote that is lost."""
        return repair_hint(self.found.where, self.timeline, instant, self.broken)


def repair_hint(where: str, timeline: Timeline, instant: str, broken: Iterable[str] = ()) -> str:
    """What to do about a completed instant whose data is lost: roll it back if it is the newest write, else return
    to a savepoint before it."""
    writes = [i.time for i in timeline.completed_writes()] + list(broken)
    newest = max(writes, default=None)
    if newest is None or instant >= newest:
        return f"roll the instant back: `lakegate table repair {where} --rollback-instant {instant}`"
    savepoints = [t for t in timeline.savepoint_times() if t < instant]
    if savepoints:
        return (f"return to the savepoint before it: `lakegate table repair {where} --restore {savepoints[-1]}` (rolls "
                f"back every later instant)")
    return (f"only the newest write can be rolled back (`lakegate table repair {where} --rollback-instant T`, "
            f"newest first, down to {instant}): later writes are lost with it; or restore the table from a backup")


@dataclass(frozen=True)
class View:
    """The latest snapshot the checks looked at."""

    slices: tuple[FileSlice, ...]
    written: WrittenFiles
    flagged: frozenset[str]  # files with a problem already (not read again by the deep check)


def check_files(check: FileCheck, listing: Sequence[FileInfo]) -> View:
    """Run every file check on ``listing`` (one recursive listing of the table); returns the latest snapshot."""
    io, timeline = check.io, check.timeline
    files = files_from_listing(io.base, [(f.path, f.size) for f in listing])
    slices = tuple(latest_file_slices(files, timeline))
    written = written_files(timeline)
    flagged = _check_recorded(check, slices, written)
    recorded: dict[str, set[str]] = {}  # completed write -> the file names its stats name
    for inst in timeline.completed_writes():
        recorded[inst.time] = {s.file_name for s in timeline.metadata(inst).write_stats if s.file_name}
    named_logs = {n for names in recorded.values() for n in names}
    latest_logs = {lg.path for s in slices for lg in s.logs}
    jobs: list[Callable[[], list[Problem]]] = []
    for s in slices:
        if s.base is not None and s.base.path not in flagged:
            jobs.append(partial(_check_base, check, s.base, _stat_of(written, s.base)))
    for lg in files.logs:
        latest, named = lg.path in latest_logs, lg.name in named_logs
        if lg.path not in flagged and (latest or not named):
            jobs.append(partial(_check_log, check, lg, extents_by_name(written.extents, lg.path), latest, named))
    for problems in check.pool.map(lambda job: job(), jobs):
        check.found.checked += 1
        check.found.problems.extend(problems)
        flagged.update(p.path for p in problems if p.path and p.severity == "error")
    for f in files.bases:
        _check_base_explained(check, f, recorded)
    _check_cdc_files(check, files)
    _check_leftovers(check, listing)
    return View(slices, written, frozenset(flagged))


def _stat_of(written: WrittenFiles, f: BaseFile) -> tuple[str, WriteStat] | None:
    """(instant, stat) of the completed write that recorded base file ``f`` as its group's newest, if it did."""
    hit = written.newest_base.get((f.partition, f.file_id))
    return hit if hit is not None and hit[1].file_name == f.name else None


# ---- recorded files: present, with their recorded sizes ------------------------------------------------------------

def _check_recorded(check: FileCheck, slices: Sequence[FileSlice], written: WrittenFiles) -> set[str]:
    """Every newest base file and every log file of a live slice that completed writes recorded exists with its
    recorded size (one file at a time, so that each is reported); returns the paths found missing or cut short."""
    io, found = check.io, check.found
    replaced = check.timeline.replaced_file_groups()
    chosen = {s.key: s.base for s in slices}
    flagged: set[str] = set()
    for key, (instant, stat) in sorted(written.newest_base.items()):
        if key in replaced:
            continue
        base = chosen.get(key)
        try:
            check_bases([base] if base else [], WrittenFiles({key: (instant, stat)}, {}, {}), lambda _: True,
                        replaced, join=io.base)
        except TableCorruptError as exc:
            missing = base is None or base.name != stat.file_name
            if missing and exc.path and io.exists(exc.path):
                continue  # written after the listing
            found.add("missing_file" if missing else "size_mismatch", "error", exc.path, exc.instant,
                      f"{exc.problem}; {check.repair(instant)}")
            flagged.add(exc.path or "")
    for s in slices:
        for instant, stat in written.log_stats.get(s.key, ()):
            one = WrittenFiles({}, {s.key: [(instant, stat)]}, written.extents)
            try:
                check_slices([s], one, join=io.base)
            except TableCorruptError as exc:
                missing = not any(lg.name == stat.file_name for lg in s.logs)
                if missing and exc.path and io.exists(exc.path):
                    continue
                found.add("missing_file" if missing else "size_mismatch", "error", exc.path, exc.instant,
                          f"{exc.problem}; {check.repair(exc.instant or instant)}")
                flagged.add(exc.path or "")
    return flagged


# ---- content: Parquet footers and log framing ----------------------------------------------------------------------

def _check_base(check: FileCheck, f: BaseFile, recorded: tuple[str, WriteStat] | None) -> list[Problem]:
    """The base file opens as Parquet (magic at both ends, a footer that parses) and holds the rows its write
    recorded."""
    instant = recorded[0] if recorded else f.instant

    def unreadable(why: str) -> list[Problem]:
        return [Problem("unreadable_base", "error", f.path, instant,
                        f"base file is not a readable Parquet file: {why}; {check.repair(instant)}")]

    try:
        with check.io.open_input(f.path) as src:
            size = src.size()
            if size < 12:
                return unreadable(f"it is {size} bytes long")
            if src.read_at(4, 0) != PARQUET_MAGIC or src.read_at(4, size - 4) != PARQUET_MAGIC:
                return unreadable("the Parquet magic PAR1 is missing at its start or end")
            rows = pq.read_metadata(src).num_rows
    except FileNotFoundError:
        return []  # removed since the listing (a clean of an older slice, a rollback): not a file of the snapshot
    except (pa.ArrowException, OSError) as exc:
        return unreadable(f"the footer does not parse ({exc})")
    if recorded is not None and rows != recorded[1].num_writes:
        return [Problem("row_count", "error", f.path, instant,
                        f"base file holds {rows} rows, but instant {instant} recorded writing "
                        f"{recorded[1].num_writes}; {check.repair(instant)}")]
    return []


def _check_log(check: FileCheck, lg: LogFile, extents: Sequence[LogExtent], latest: bool,
               named: bool) -> list[Problem]:
    """A log file of the latest snapshot frames as blocks against what completed instants wrote (damage outside
    them is reported as a torn tail or damaged region); a log file no completed write recorded is explained by the
    instants of its blocks."""
    try:
        data = check.io.read_bytes(lg.path)
    except FileNotFoundError:
        return []
    try:
        blocks = read_log_checked(data, lg.path, extents)
    except TableCorruptError as exc:
        instant = exc.instant or (extents[0].instant if extents else None)
        return [Problem("log_damage", "error", lg.path, instant,
                        f"{exc.problem}; {check.repair(instant) if instant else 'delete the file'}")]
    out = _unframed(check, lg, data, blocks, extents) if latest else []
    if not named:
        out.extend(_log_explained(check, lg, data, blocks))
    return out


def _unframed(check: FileCheck, lg: LogFile, data: bytes, blocks: Sequence[LogBlock],
              extents: Sequence[LogExtent]) -> list[Problem]:
    """Bytes that are no block of the log file (reads skipped them, with a warning): after the last block a torn
    tail, between blocks a damaged region."""
    out: list[Problem] = []
    pos = 0
    owner = extents[-1].instant if extents else next((b.instant for b in reversed(blocks) if b.instant), None)
    for b in blocks:
        if b.offset > pos:
            out.append(Problem("log_damage", "warning", lg.path, owner,
                               f"{b.offset - pos} damaged bytes at offset {pos} of the log file that no completed "
                               f"instant wrote: reads skip them. Compact the file group (`lakegate table compact "
                               f"{check.found.where}`) to rewrite its rows without the damaged file"))
        pos = read_block_at(data, b.offset)[1]
    if pos < len(data):
        out.append(Problem("torn_log_tail", "warning", lg.path, owner,
                           f"{len(data) - pos} bytes after the last complete block (offset {pos}) that no completed "
                           f"instant wrote: a writer died while appending. Reads skip them and return the committed "
                           f"rows; compacting the file group (`lakegate table compact {check.found.where}`) rewrites "
                           f"its rows without them"))
    return out


# ---- files no instant explains -------------------------------------------------------------------------------------

def _orphan(path: str, instant: str | None, visible: bool, what: str) -> Problem:
    if visible:
        return Problem("orphan_file", "error", path, instant,
                       f"{what}: readers see its rows, which no commit recorded (a failed task attempt's file or a "
                       f"copy); delete the file")
    return Problem("orphan_file", "warning", path, instant,
                   f"{what}: readers do not see it, it only takes space (a rolled-back or crashed write left it); "
                   f"delete the file")


def _check_base_explained(check: FileCheck, f: BaseFile, recorded: dict[str, set[str]]) -> None:
    status = check.status(f.instant)
    if status == "completed" and f.name not in recorded.get(f.instant, set()):
        check.found.problems.append(_orphan(f.path, f.instant, True,
                                            f"base file of completed instant {f.instant}, which did not record it"))
    elif status in ("gone", "rolled_back"):  # a rollback deletes the base files of its instant
        check.found.problems.append(_orphan(f.path, f.instant, False,
                                            f"base file of instant {f.instant}, which is not on the timeline"))


def _log_explained(check: FileCheck, lg: LogFile, data: bytes, blocks: Iterable[LogBlock]) -> list[Problem]:
    """The blocks of a log file no completed write recorded must be of pending or archived instants, or rollback
    commands of instants that are not completed writes."""
    blocks = list(blocks)
    if not blocks:
        return [Problem("half_written", "warning", lg.path, None,
                        f"log file of {len(data)} bytes without a complete block (a writer died before finishing "
                        f"it): readers skip it; delete the file")]
    for b in blocks:
        if b.block_type is BlockType.COMMAND:
            target = b.target_instant
            if target is not None and check.status(target) == "completed":
                return [Problem("orphan_file", "error", lg.path, target,
                                f"log file with a rollback command for completed instant {target}, which was never "
                                f"rolled back: readers drop that instant's rows from the file group; delete the "
                                f"file")]
            continue
        status = check.status(b.instant or "")
        if status == "completed":
            return [_orphan(lg.path, b.instant, True,
                            f"log file with blocks of completed instant {b.instant}, which did not record it")]
        if status == "gone":
            return [_orphan(lg.path, b.instant, False,
                            f"log file with blocks of instant {b.instant}, which is not on the timeline")]
    return []


def _check_cdc_files(check: FileCheck, files: TableFiles) -> None:
    """CDC log files against the ``cdcStats`` of completed writes: each one named is there with its size while the
    base file its write recorded beside it is (a clean removes both; Hudi's CDC readers read the named files), and
    none is left that no completed write names."""
    listed = {f.relative_path: f for f in files.cdc}
    bases = {b.relative_path for b in files.bases}
    named: set[str] = set()
    for inst in check.timeline.completed_writes():
        for stat in check.timeline.metadata(inst).write_stats:
            for rel, size in (stat.cdc_stats or {}).items():
                named.add(rel)
                f = listed.get(rel)
                if f is None and stat.path in bases:
                    check.found.add("missing_file", "error", f"{check.io.base}/{rel}", inst.time,
                                    f"CDC log file of completed instant {inst.time} is missing (Hudi's CDC reads of "
                                    f"the instant fail); {check.repair(inst.time)}")
                elif f is not None and f.size != size:
                    check.found.add("size_mismatch", "error", f.path, inst.time,
                                    f"CDC log file has {f.size} bytes, its write recorded {size}; "
                                    f"{check.repair(inst.time)}")
    for rel, f in sorted(listed.items()):
        if rel not in named and check.status(f.instant) != "pending":
            check.found.add("orphan_file", "warning", f.path, f.instant,
                            f"CDC log file of instant {f.instant}, which no completed write names: no reader uses it "
                            "(a failed task attempt or a rolled-back write left it); delete the file")


def _check_leftovers(check: FileCheck, listing: Sequence[FileInfo]) -> None:
    """Temporary files of our writers (``*.tmp``) outside ``.hoodie/.aux`` and scratch folders
    ``.hoodie/.temp/<instant>`` of instants that are not pending."""
    io = check.io
    prefix = io.base.rstrip("/") + "/"
    scratch: dict[str, str] = {}
    for f in listing:
        rel = f.path[len(prefix):] if f.path.startswith(prefix) else f.path
        if rel.startswith(TEMP_DIR + "/"):
            instant = rel[len(TEMP_DIR) + 1:].split("/", 1)[0]
            if check.status(instant) != "pending":
                scratch.setdefault(instant, io.join(TEMP_DIR, instant))
        elif f.name.endswith(".tmp") and not rel.startswith(f"{HOODIE_DIR}/.aux/"):
            check.found.add("half_written", "warning", f.path, None,
                            f"temporary file a writer left ({posixpath.basename(rel)}): it is no table file and "
                            f"readers ignore it; delete it once no writer runs")
    for instant, path in sorted(scratch.items()):
        check.found.add("half_written", "warning", path, instant,
                        f"scratch folder of instant {instant}, which is not running: a writer died before removing "
                        f"its half-written log files. Readers ignore it; delete the folder")


# ---- deep: every row -----------------------------------------------------------------------------------------------

def check_rows(check: FileCheck, view: View, config: TableConfig, engine: Engine) -> None:
    """Read every row of every slice of ``view`` that passed the file checks, in the engine's tasks; a slice whose
    rows do not decode is a problem naming the file and the instant."""
    timeline = check.timeline
    slices = [s for s in view.slices
              if not ({lg.path for lg in s.logs} | ({s.base.path} if s.base else set())) & view.flagged]
    if not slices:
        return
    counted = InstantsOrEarlier((i.time for i in timeline.completed_writes()), before=timeline.first_instant_time())
    plan = ReadPlan(tuple(s.base for s in slices if s.base is not None), table_schema(timeline, config.create_schema),
                    log_slices=tuple(s for s in slices if s.logs), valid_instants=counted,
                    event_time=config.merge_mode == "EVENT_TIME_ORDERING", ordering_field=config.ordering_field,
                    log_extents=slice_extents(slices, view.written))
    io = check.io
    desc = mor.slice_descriptors([(s.partition, s.file_id, s.base.path if s.base else None,
                                   [lg.path for lg in s.logs]) for s in slices])
    stats = engine.run_tasks(desc, lambda d, _token: read_every_row(io, plan, d))
    unreadable = False
    for outcome in slice_outcomes(stats):
        if outcome.problem is None:
            continue
        unreadable = True
        check.found.add("unreadable_data", "error", outcome.path, outcome.instant,
                        f"rows of the file slice do not decode: {outcome.problem}; "
                        f"{check.repair(outcome.instant) if outcome.instant else 'restore the file from a backup'}")
    if not unreadable and config.populate_meta_fields:  # the keys are the rows' meta fields
        check_duplicate_keys(check, plan, engine)


DUPLICATES_SHOWN = 10
"""Keys read more than once that the deep check names one by one (the rest are counted in one more problem)."""


def check_duplicate_keys(check: FileCheck, plan: ReadPlan, engine: Engine) -> None:
    """Keys a snapshot read returns more than once in one partition: an ``insert`` of a key the table holds (it looks
    at nothing stored), two writers inserting one key, or an upsert of a lakegate before 2026-12-02 that found a key
    deleted in one file group and live in another. Every reader returns each copy (the rows were committed), so it
    is a warning; an upsert or delete of the key reaches every copy."""
    total, sample = engine.duplicate_keys(check.io, plan, DUPLICATES_SHOWN)
    for k in sample:
        where = f"file groups {', '.join(k.file_ids)}" if len(k.file_ids) > 1 else f"file group {k.file_ids[0]}"
        check.found.add("duplicate_key", "warning", check.io.join(k.partition) if k.partition else check.io.base,
                        None, f"key {k.key!r} of partition {k.partition!r} is read {k.copies} times ({where}): "
                        "readers return every copy; to keep one, delete the key and upsert the row to keep")
    if total > len(sample):
        check.found.add("duplicate_key", "warning", check.io.base, None,
                        f"{total - len(sample)} more keys are read more than once in their partition (the first "
                        f"{len(sample)} are named above)")
