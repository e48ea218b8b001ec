"""Checking a table against its own records without trusting any of them (``lakegate table doctor``, issue 22).

:func:`verify_table` (and :meth:`tablecore.Table.verify`) collects every problem it finds, never stopping at the
first, into an :class:`~tablecore.results.IntegrityReport`; nothing is raised for damage and nothing is changed.

- ``hoodie.properties`` parses (name, type, checksum), and equals ``hoodie.properties.backup`` when one exists (a
  backup exists only while the properties are rewritten, or after a crash in between; a backup that differs is a
  warning with a hint, not damage of data).
- Every instant file of the active timeline parses: the commit metadata of completed writes
  (:meth:`~tablecore.format.timeline.Timeline.metadata`), the Avro plans and metadata of cleans, rollbacks,
  restores, savepoints, compactions and clusterings (:mod:`tablecore.format.service_metadata`); every completed
  instant still has its requested and inflight files.
- The files of the latest snapshot (:mod:`tablecore.services.verify_files`): every base and log file a completed
  write recorded exists with its recorded size, base files open as Parquet with the recorded row count, log files
  frame as blocks against what completed instants wrote (a torn tail is reported on its own), and no data file is
  left that no instant explains.
- ``deep``: every row of every file slice is read through the engine, so data that does not decode is found too.

Without ``deep`` no engine is needed (no JVM starts): a listing, the timeline files, Parquet footers and the log
files of the latest slices are read, footers and logs by a pool of threads (the work waits on storage).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tablecore.config import TableConfig
from tablecore.context import TableContext
from tablecore.engine import Engine
from tablecore.exceptions import ConfigError, TableCorruptError, TableNotFoundError
from tablecore.format.instant import Action, Instant, State
from tablecore.format.instant_avro import decode_instant_avro
from tablecore.format.properties import parse_properties
from tablecore.format.service_metadata import (
    read_cleaner_plan_files,
    read_clustering_plan,
    read_compaction_plan,
    read_rollback_metadata,
    read_rollback_plan,
    read_savepoint_files,
)
from tablecore.format.timeline import HOODIE_DIR, Timeline
from tablecore.io import FileIO, file_io_for
from tablecore.results import IntegrityReport, Problem
from tablecore.services.verify_files import THREADS, FileCheck, Findings, check_files, check_rows, repair_hint
from tablecore.table_properties import PROPERTIES, PROPERTIES_BACKUP, damage_of

__all__ = ["verify", "verify_storage", "verify_table"]

logger = logging.getLogger(__name__)

WORKERS = 16
"""Threads reading footers, logs and instant files (the work waits on storage, not on the CPU)."""


def verify_table(path: str, *, deep: bool = False, storage_options: Mapping[str, str] | None = None,
                 engine: Engine | None = None) -> IntegrityReport:
    """Check the table at ``path`` and report every problem found (see the module docstring); nothing is raised for
    damage and nothing is changed. Needs no engine unless ``deep``: ``Table.open(path, spark=...).verify(deep=True)``
    reads the rows with Spark.

    Args:
        path: the table's base path or URI.
        deep: also read every row of every file slice through ``engine``.
        storage_options: settings of the table's storage, as for :meth:`tablecore.Table.open`.
        engine: the engine that reads the rows with ``deep``.

    Raises:
        TableNotFoundError: nothing at ``path`` looks like a table (no ``hoodie.properties``, no backup of it, no
            timeline).
        ConfigError: ``deep`` without an engine.
        StorageError: bad storage options.
    """
    return verify_storage(file_io_for(path, storage_options), deep=deep, engine=engine)


def verify(ctx: TableContext, *, deep: bool = False) -> IntegrityReport:
    """:func:`verify_table` on a table's context (``deep`` reads the rows with the context's engine)."""
    return verify_storage(ctx.io, deep=deep, engine=ctx.engine if deep else None)


def verify_storage(io: FileIO, *, deep: bool = False, engine: Engine | None = None) -> IntegrityReport:
    """:func:`verify_table` on the table's storage."""
    if deep and engine is None:
        raise ConfigError("a deep check reads every row through a compute engine: pass engine=..., or use "
                          "Table.open(path, spark=...).verify(deep=True)")
    started = time.monotonic()
    found = Findings(io.uri)
    # the data files are listed before the timeline: a write that completes in between then finds its instant
    # completed and its files listed, or its files not listed yet (never files of an instant the timeline lacks)
    listing = io.list(io.base, recursive=True)
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=THREADS) as pool:
        config = _check_properties(io, found)
        timeline, broken, rolled_back = _check_timeline(io, found, pool, config.table_version if config else 6)
        if config is None and not found.problems:  # no properties, no backup, no timeline
            raise TableNotFoundError(f"no table at {io.uri}: {PROPERTIES} not found")
        check = FileCheck(io, timeline, frozenset(broken), frozenset(rolled_back), found, pool)
        view = check_files(check, listing)
    if deep:
        if config is None:
            found.add("properties", "error", io.join(PROPERTIES), None,
                      "the deep check needs the table's configuration to read rows, and hoodie.properties has "
                      "none that is intact: rows were not read")
        else:
            assert engine is not None
            check_rows(check, view, config, engine)
    problems = sorted(found.problems, key=lambda p: (p.path or "", p.kind, p.instant or ""))
    report = IntegrityReport(io.uri, tuple(problems), found.checked, len({s.partition for s in view.slices}),
                             time.monotonic() - started, deep=deep and config is not None)
    logger.info("verified %s: %d problems, %d files checked in %.2f s", io.uri, len(problems), report.files_checked,
                report.elapsed)
    return report


# ---- hoodie.properties ---------------------------------------------------------------------------------------------

def _read(io: FileIO, rel: str) -> bytes | None:
    try:
        return io.read_bytes(io.join(rel))
    except FileNotFoundError:
        return None


def _usable(data: bytes) -> TableConfig | None:
    """The config of an intact backup, if it describes a table lakegate can open."""
    try:
        return TableConfig.from_properties_text(data.decode("utf-8"))
    except ConfigError:
        return None


def _check_properties(io: FileIO, found: Findings) -> TableConfig | None:
    """Check ``hoodie.properties`` and its backup (:mod:`tablecore.table_properties`); return the config the table
    opens with (the backup's when the main file is damaged; None: none is intact).

    Raises:
        ConfigError: ``hoodie.properties`` is intact but describes a table lakegate does not support (not damage).
    """
    main, backup = _read(io, PROPERTIES), _read(io, PROPERTIES_BACKUP)
    found.checked += (main is not None) + (backup is not None)
    main_path, backup_path = io.join(PROPERTIES), io.join(PROPERTIES_BACKUP)
    backup_damage = damage_of(backup) if backup is not None else None
    backup_config = _usable(backup) if backup is not None and backup_damage is None else None
    damage = "it is missing" if main is None else damage_of(main)
    if damage is not None:
        if main is None and backup is None:
            if io.list(io.join(HOODIE_DIR)):  # a timeline without its properties
                found.add("properties", "error", main_path, None,
                          "hoodie.properties is missing and there is no backup of it: readers cannot open the table; "
                          "copy the file from a backup of the table")
            return None
        repair = (f"restore it from its backup: `lakegate table repair {io.uri} --properties-from-backup` (until "
                  f"then lakegate reads the backup)" if backup_config is not None else
                  "there is no intact backup to restore it from: copy the file from a backup of the table")
        found.add("properties", "error", main_path, None, f"hoodie.properties is damaged ({damage}); {repair}")
        return backup_config
    assert main is not None
    config = TableConfig.from_properties_text(main.decode("utf-8"))
    if backup is None:
        return config
    if backup_damage is not None:
        found.add("properties", "warning", backup_path, None,
                  f"hoodie.properties.backup is damaged ({backup_damage}) beside an intact hoodie.properties: an "
                  f"interrupted rewrite of the properties left it; delete {backup_path}")
        return config
    ours, theirs = parse_properties(main.decode("utf-8")), parse_properties(backup.decode("utf-8"))
    if ours != theirs:
        keys = ", ".join(sorted({k for k, _ in set(ours.items()) ^ set(theirs.items())}))
        found.add("properties", "warning", backup_path, None,
                  f"hoodie.properties differs from hoodie.properties.backup ({keys}): a rewrite of the properties "
                  f"was interrupted. The table opens with hoodie.properties; if that is the right one, delete the "
                  f"backup, else `lakegate table repair {io.uri} --properties-from-backup` puts the backup back")
    return config


# ---- the timeline --------------------------------------------------------------------------------------------------

def _avro(kind: str) -> Callable[[bytes], Any]:
    return lambda data: decode_instant_avro(data, kind)


# the parser of each (action, state) file that holds an Avro plan or metadata; others are empty or JSON
_PARSERS: dict[tuple[Action, State], Callable[[bytes], Any]] = {
    (Action.COMPACTION, State.REQUESTED): read_compaction_plan,
    (Action.COMPACTION, State.INFLIGHT): read_compaction_plan,
    (Action.CLEAN, State.REQUESTED): read_cleaner_plan_files,
    (Action.CLEAN, State.INFLIGHT): read_cleaner_plan_files,
    (Action.CLEAN, State.COMPLETED): _avro("clean_metadata"),
    (Action.ROLLBACK, State.REQUESTED): read_rollback_plan,
    (Action.ROLLBACK, State.INFLIGHT): read_rollback_plan,
    (Action.ROLLBACK, State.COMPLETED): read_rollback_metadata,
    (Action.RESTORE, State.REQUESTED): _avro("restore_plan"),
    (Action.RESTORE, State.INFLIGHT): _avro("restore_plan"),
    (Action.RESTORE, State.COMPLETED): _avro("restore_metadata"),
    (Action.SAVEPOINT, State.COMPLETED): read_savepoint_files,
    (Action.REPLACE_COMMIT, State.REQUESTED): read_clustering_plan,
    (Action.CLUSTERING, State.REQUESTED): read_clustering_plan,
}
# what depends on a completed service instant's file (its damage is an error when something reads it)
_NEEDED_BY = {
    Action.CLEAN: "reads take the instants cleaning kept readable from it, and fail until it is repaired",
    Action.SAVEPOINT: "cleans read the files the savepoint keeps from it",
}


def _check_timeline(io: FileIO, found: Findings, pool: ThreadPoolExecutor,
                    table_version: int) -> tuple[Timeline, set[str], set[str]]:
    """Check every instant file. Returns the timeline without the completed writes whose commit file does not parse
    (what the file checks work with: those instants count as not completed), the times of those writes, and the
    instants that rollbacks and restores on the timeline rolled back (or are rolling back)."""
    timeline = Timeline.listed(io, table_version)
    _check_states(timeline, found)
    completed = {i.time for i in timeline.instants() if i.is_completed}
    results = pool.map(lambda i: (i, _check_instant_file(io, timeline, i, i.time in completed)), timeline.files)
    broken: set[str] = set()
    rolled_back: set[str] = set()
    for inst, (problem, targets) in results:
        found.checked += 1
        rolled_back |= targets
        if problem is None:
            continue
        found.problems.append(problem)
        if inst.is_completed and inst.action.is_write:
            broken.add(inst.time)
    kept = tuple(i for i in timeline.files if not (i.is_completed and i.action.is_write and i.time in broken))
    return dataclasses.replace(timeline, files=kept), broken, rolled_back


def _targets(inst: Instant, parsed: Any) -> set[str]:
    """The instants a rollback or restore file says were (or are being) rolled back."""
    if inst.action is Action.ROLLBACK and inst.is_completed:
        return {t for t, _ in parsed[0]}
    if inst.action is Action.ROLLBACK:
        return {parsed[0][0]} if parsed[0] is not None else set()
    if inst.action is Action.RESTORE and inst.is_completed:
        return {str(t) for t in parsed.get("instantsToRollback") or ()}
    if inst.action is Action.RESTORE:
        return {str(i["commitTime"]) for i in parsed.get("instantsToRollback") or ()}
    return set()


def _check_states(timeline: Timeline, found: Findings) -> None:
    """A completed instant keeps its requested and inflight files (a savepoint has no requested file; a compaction
    completes as a commit)."""
    present = {(i.time, i.action, i.state) for i in timeline.files}
    for inst in timeline.files:
        if not inst.is_completed or inst.action in (Action.INDEXING, Action.SCHEMA_COMMIT, Action.LOG_COMPACTION):
            continue
        actions = [inst.action]
        if inst.action is Action.COMMIT and any((inst.time, Action.COMPACTION, s) in present
                                                for s in (State.REQUESTED, State.INFLIGHT)):
            actions = [Action.COMPACTION]
        if inst.action is Action.REPLACE_COMMIT and any((inst.time, Action.CLUSTERING, s) in present
                                                        for s in (State.REQUESTED, State.INFLIGHT)):
            actions = [Action.CLUSTERING]
        states = (State.INFLIGHT,) if inst.action is Action.SAVEPOINT else (State.REQUESTED, State.INFLIGHT)
        for state in states:
            if any((inst.time, a, state) in present for a in actions):
                continue
            missing = Instant(inst.time, actions[0], state)
            found.add("timeline", "warning", f"{timeline.hoodie_dir}/{missing.file_name}", inst.time,
                      f"the completed {inst.action.value} {inst.time} has no {state.value} file "
                      f"({missing.file_name}): reads and writes need only the completed file, so nothing is lost, "
                      f"but the timeline is incomplete (a rollback of {inst.time} would search every partition for "
                      f"its files); recreate the file to make it whole")


def _check_instant_file(io: FileIO, timeline: Timeline, inst: Instant,
                        completed: bool) -> tuple[Problem | None, set[str]]:
    """The problem with one instant file's content, if any, and the instants it says were rolled back."""
    problem, parsed = _instant_problem(io, timeline, inst, completed)
    return problem, (_targets(inst, parsed) if parsed is not None else set())


def _instant_problem(io: FileIO, timeline: Timeline, inst: Instant, completed: bool) -> tuple[Problem | None, Any]:
    """The problem with one instant file's content (None: it parses), and what its parser made of it (None for files
    without a parser, or that are not there)."""
    path = f"{timeline.hoodie_dir}/{inst.file_name}"
    where = io.uri
    if inst.is_completed and inst.action.is_write:
        try:
            timeline.metadata(inst)
        except TableCorruptError as exc:
            return Problem("timeline", "error", exc.path or path, inst.time,
                           f"{exc.problem.split(';')[0]}: reads of the table fail; "
                           f"{repair_hint(where, timeline, inst.time)}"), None
        except FileNotFoundError:
            pass  # rolled back or archived since the listing
        return None, None
    parser = _PARSERS.get((inst.action, inst.state))
    if parser is None:
        return None, None
    try:
        data = io.read_bytes(path)
    except FileNotFoundError:
        return None, None
    if not data and not inst.is_completed:
        return None, None  # an empty requested or inflight file: the plan, if any, is in the other one
    try:
        return None, parser(data)
    except Exception as exc:  # any failure to decode is the finding
        what = f"the {inst.state.value} {inst.action.value} file {inst.file_name} does not parse ({exc})"
    if inst.is_completed:
        needed = _NEEDED_BY.get(inst.action)
        if needed is None:
            return Problem("timeline", "warning", path, inst.time,
                           f"{what}: it only records what the {inst.action.value} did (reads do not use it); copy "
                           f"it from a backup of the table if you keep its history"), None
        return Problem("timeline", "error", path, inst.time, f"{what}: {needed}; copy it from a backup of the table"), \
            None
    if completed:
        return Problem("timeline", "warning", path, inst.time,
                       f"{what}: the instant completed, so nothing reads this plan any more; copy it from a backup "
                       f"of the table if you keep its history"), None
    reads = " (and reads, which take what cleaning keeps from it, fail)" if inst.action is Action.CLEAN else ""
    return Problem("timeline", "error", path, inst.time,
                   f"{what}: the next write cannot finish or roll back the pending {inst.action.value} from its "
                   f"plan{reads}; copy the file from a backup of the table"), None
