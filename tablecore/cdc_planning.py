"""Planning a change-data-capture read of ``(start, end]``: for every commit in range and every partition it wrote,
the file slices of the groups it touched as they stood just *before* the commit and just *after* it.

An engine reads both sides in its tasks and diffs them by key (:mod:`tablecore.tasks.cdc`): a row the commit wrote
(its ``_hoodie_commit_time`` is the commit) is an insert or an update, a row that is gone is a delete. This is how
Apache Hudi infers changes where a table keeps no CDC log files (``HoodieCDCExtractor``: a new base file's rows are
inserts, a replaced file group's rows deletes, a log file or a new base file version diffed against the previous
file slice), so the read costs the file groups the commits in range wrote, never the table.

Commits are taken in the order they became visible (completion time on version 8 and 9, instant time on version 6).
"Before" is the table as of the commit visible just before; the diffs telescope, so replaying them in order onto the
table as of ``start`` gives the table as of ``end``. Table services that do not change data (compaction, log
compaction, clustering) have no changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from tablecore.config import TableConfig
from tablecore.exceptions import TableCoreError
from tablecore.format.file_view import TableFiles
from tablecore.format.instant import Action, Instant
from tablecore.format.log_integrity import LogExtent
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO
from tablecore.read_planning import (
    EARLIEST,
    ReadPlan,
    _candidates,
    _check_history,
    _check_instant,
    _check_not_archived,
    _check_not_cleaned,
    _plan,
    table_schema,
)

logger = logging.getLogger(__name__)

NO_CHANGE_OPERATIONS = frozenset(("COMPACT", "LOG_COMPACT", "CLUSTER"))
"""Operations that rewrite files without changing a row: they have no changes."""

SIDE_TYPE = pa.list_(pa.struct([("file_id", pa.string()), ("base_path", pa.string()),
                                ("log_paths", pa.list_(pa.string()))]))


@dataclass(frozen=True)
class CdcSide:
    """One side (before or after) of a commit: the instants whose log blocks count."""

    valid_instants: frozenset[str]


@dataclass(frozen=True)
class CdcCommit:
    """A commit in range: its instant, when it became visible, its operation and its two sides."""

    instant: str
    completion: str
    operation: str
    before: CdcSide
    after: CdcSide
    replace: bool  # a replacecommit: a key may leave one file group and arrive in another


@dataclass(frozen=True)
class CdcPlan:
    """What a CDC read reads: per (commit, partition) the before and after slices of the touched file groups."""

    schema: pa.Schema  # the table schema with meta columns: the type of the before and after images
    commits: tuple[CdcCommit, ...]
    descriptors: pa.Table  # commit (index into commits), partition, before, after (lists of slices)
    event_time: bool
    ordering_field: str | None
    log_extents: Mapping[str, tuple[LogExtent, ...]] = field(default_factory=dict)
    start: str = EARLIEST
    end: str = EARLIEST


def _ordered_writes(timeline: Timeline) -> list[Instant]:
    return timeline.completed_writes_by_completion() if timeline.layout >= 2 else timeline.completed_writes()


def _visible_key(timeline: Timeline, i: Instant) -> str:
    return i.completed_at if timeline.layout >= 2 else i.time


def _range(timeline: Timeline, io: FileIO, start: str | None, end: str | None) -> tuple[str, str, list[Instant]]:
    writes = _ordered_writes(timeline)
    if end is None:
        end = _visible_key(timeline, writes[-1]) if writes else EARLIEST
    elif timeline.layout < 2:
        _check_instant(timeline, end, "end instant")
    start = start or EARLIEST
    if start > end:
        raise TableCoreError(f"CDC range is empty or inverted: start {start} > end {end}")
    if timeline.layout >= 2:
        _check_history(io, timeline, start)
    else:
        _check_not_archived(io, timeline, start)
    return start, end, writes


def _side_plan(files: TableFiles, timeline: Timeline, config: TableConfig, io: FileIO, groups: set[tuple[str, str]],
               upto: Instant | None) -> ReadPlan:
    """The touched groups' slices as of ``upto`` (None: before the first write)."""
    if timeline.layout >= 2:
        view = timeline.completed_by(upto.completed_at if upto is not None else EARLIEST)
        return _plan(files, view, config, as_of=None, view="snapshot", in_scope=groups.__contains__, base=io.base)
    return _plan(files, timeline, config, as_of=upto.time if upto is not None else EARLIEST, view="snapshot",
                 in_scope=groups.__contains__, base=io.base)


def plan_cdc(io: FileIO, timeline: Timeline, config: TableConfig, *, start: str | None,
             end: str | None) -> CdcPlan:
    """The CDC read of the commits visible in ``(start, end]`` (completion times on version 8 and 9).

    Raises:
        InstantNotFoundError: ``end`` is not a completed write (version 6).
        CleanedRangeError: a clean removed the file slices the range's before images need, or ``start`` reaches
            into archived instants.
        TableCoreError: an inverted range, or a table without meta fields (its rows carry no commit time).
    """
    if not config.populate_meta_fields:
        raise TableCoreError("a CDC read needs the meta fields (hoodie.populate.meta.fields=true): without a commit "
                             "time per row the rows a commit wrote cannot be told from the rows it kept")
    start, end, writes = _range(timeline, io, start, end)
    schema = table_schema(timeline, config.create_schema, meta=True)
    in_range = [(n, i) for n, i in enumerate(writes) if start < _visible_key(timeline, i) <= end]
    touched: list[tuple[int, Instant, str, set[tuple[str, str]]]] = []
    for n, i in in_range:
        md = timeline.metadata(i)
        if md.operation_type in NO_CHANGE_OPERATIONS or i.action is Action.COMPACTION:
            continue
        groups = md.touched_file_ids()
        if groups:
            touched.append((n, i, md.operation_type, groups))
    empty = pa.table({"commit": pa.array([], pa.int32()), "partition": pa.array([], pa.string()),
                      "before": pa.array([], SIDE_TYPE), "after": pa.array([], SIDE_TYPE)})
    event_time = config.merge_mode == "EVENT_TIME_ORDERING"
    if not touched:
        return CdcPlan(schema, (), empty, event_time, config.ordering_field, start=start, end=end)
    first_prev = writes[touched[0][0] - 1] if touched[0][0] > 0 else None
    if first_prev is not None:
        _check_not_cleaned(timeline, first_prev.time, "CDC start (the before images of its first commit)")
    listed = _candidates(io, config, timeline, set().union(*(g for *_, g in touched)))
    commits: list[CdcCommit] = []
    rows: dict[str, list[object]] = {"commit": [], "partition": [], "before": [], "after": []}
    extents: dict[str, tuple[LogExtent, ...]] = {}
    for n, instant, operation, groups in touched:
        files = TableFiles(tuple(f for f in listed.bases if (f.partition, f.file_id) in groups),
                           tuple(f for f in listed.logs if (f.partition, f.file_id) in groups))
        before = _side_plan(files, timeline, config, io, groups, writes[n - 1] if n > 0 else None)
        after = _side_plan(files, timeline, config, io, groups, instant)
        extents.update(before.log_extents)
        extents.update(after.log_extents)
        idx = len(commits)
        commits.append(CdcCommit(instant.time, _visible_key(timeline, instant), operation,
                                 CdcSide(before.valid_instants), CdcSide(after.valid_instants),
                                 replace=instant.action is Action.REPLACE_COMMIT))
        by_part: dict[str, tuple[list[object], list[object]]] = {p: ([], []) for p, _ in sorted(groups)}
        for side, plan in enumerate((before, after)):
            for part, fid, base, logs in plan.slices():
                by_part[part][side].append({"file_id": fid, "base_path": base, "log_paths": logs})
        for part, (b, a) in by_part.items():
            if b or a:
                rows["commit"].append(idx)
                rows["partition"].append(part)
                rows["before"].append(b)
                rows["after"].append(a)
    descriptors = pa.table({"commit": pa.array(rows["commit"], pa.int32()),
                            "partition": pa.array(rows["partition"], pa.string()),
                            "before": pa.array(rows["before"], SIDE_TYPE), "after": pa.array(rows["after"], SIDE_TYPE)})
    logger.info("CDC read of (%s, %s]: %d commits, %d (commit, partition) pairs", start, end, len(commits),
                descriptors.num_rows)
    return CdcPlan(schema, tuple(commits), descriptors, event_time, config.ordering_field, extents, start, end)
