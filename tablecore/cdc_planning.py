"""Planning a change-data-capture read of ``(start, end]``: for every commit in range and every partition it wrote,
the file slices of the groups it touched as they stood just *before* the commit and just *after* it.

An engine reads both sides in its tasks and diffs them by key (:mod:`tablecore.tasks.cdc`): a row the commit wrote
(its ``_hoodie_commit_time`` is the commit) is an insert or an update, a row that is gone is a delete. This is how
Apache Hudi infers changes where a table keeps no CDC log files (``HoodieCDCExtractor``: a new base file's rows are
inserts, a replaced file group's rows deletes, a log file or a new base file version diffed against the previous
file slice), so the read costs the file groups the commits in range wrote, never the table.

Where the table writes CDC log files with both images (``hoodie.table.cdc.enabled``, mode ``DATA_BEFORE_AFTER``), a
file group a copy-on-write merge rewrote has its changes in the commit's ``.cdc`` file (its write stat's
``cdcStats``): the read takes them *as is* (Hudi's ``AS_IS`` case) and reads neither file slice of that group, so it
costs the changes, not the file groups they fall in, and it needs no before slice (a clean may have removed it).

Commits are taken in the order they became visible (completion time on version 8 and 9, instant time on version 6).
"Before" is the table as of the commit visible just before; the diffs telescope, so replaying them in order onto the
table as of ``start`` gives the table as of ``end``. Table services that do not change data (compaction, log
compaction, clustering) have no changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tablecore.config import TableConfig
from tablecore.exceptions import InvalidInputError, TableCoreError
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.file_view import TableFiles
from tablecore.format.instant import Action, Instant
from tablecore.format.log_integrity import LogExtent
from tablecore.format.record_keys import string_form_is_sparks
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
CDC_LOGS_TYPE = pa.list_(pa.struct([("file_id", pa.string()), ("cdc_path", pa.string()),
                                    ("file_name", pa.string())]))
"""The CDC log files of a (commit, partition) read as is: per file group, the ``.cdc`` file and the new base file's
name (the after images' ``_hoodie_file_name``)."""


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
    # commit (index into commits), partition, before, after (lists of slices), cdc_logs, weight (bytes to read, from
    # the commit's write stats: what a task that reads the descriptor costs, to cut a read into even runs)
    descriptors: pa.Table
    event_time: bool
    ordering_field: str | None
    log_extents: Mapping[str, tuple[LogExtent, ...]] = field(default_factory=dict)
    start: str = EARLIEST
    end: str = EARLIEST
    record_key: tuple[str, ...] = ()  # the key fields, to key the images of CDC log files
    complex_keys: bool = False
    columns: tuple[str, ...] | None = None  # the images' columns, in this order (None: every column of ``schema``)

    @property
    def image_schema(self) -> pa.Schema:
        """The type of the before and after images: ``schema``, or only its :attr:`columns`."""
        if self.columns is None:
            return self.schema
        return pa.schema([self.schema.field(c) for c in self.columns])


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


def _reads_cdc_logs(config: TableConfig, schema: pa.Schema) -> bool:
    """Whether the table's CDC log files can be read as is: both images logged, and record keys whose text Arrow
    builds as Spark does (the log records carry no key)."""
    if not (config.cdc_enabled and config.cdc_mode == "DATA_BEFORE_AFTER"):
        return False
    names = set(schema.names)
    return all(k in names and string_form_is_sparks(schema.field(k).type) for k in config.record_key)


def _logged_groups(io: FileIO, md: CommitMetadata) -> dict[tuple[str, str], list[dict[str, str]]]:
    """(partition, file id) -> the CDC log files a commit's merges left there (its write stats' ``cdcStats``)."""
    out: dict[tuple[str, str], list[dict[str, str]]] = {}
    for s in md.write_stats:
        if s.cdc_stats and s.path:
            name = s.path.rsplit("/", 1)[-1]
            out.setdefault((s.partition_path, s.file_id), []).extend(
                {"file_id": s.file_id, "cdc_path": f"{io.base}/{rel}", "file_name": name}
                for rel in sorted(s.cdc_stats))
    return out


def _image_columns(schema: pa.Schema, columns: Sequence[str] | None) -> tuple[str, ...] | None:
    if columns is None:
        return None
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise InvalidInputError(f"CDC read: no column {', '.join(map(repr, unknown))} in the table (it has "
                                f"{', '.join(schema.names)})")
    twice = sorted({c for c in columns if list(columns).count(c) > 1})
    if twice:
        raise InvalidInputError(f"CDC read: column {', '.join(map(repr, twice))} named twice")
    return tuple(columns)


def plan_cdc(io: FileIO, timeline: Timeline, config: TableConfig, *, start: str | None,
             end: str | None, columns: Sequence[str] | None = None) -> CdcPlan:
    """The CDC read of the commits visible in ``(start, end]`` (completion times on version 8 and 9); ``columns``:
    the images' columns (default: all).

    Raises:
        InvalidInputError: a column the table does not have, or one named twice.
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
    image_columns = _image_columns(schema, columns)
    in_range = [(n, i) for n, i in enumerate(writes) if start < _visible_key(timeline, i) <= end]
    as_is = _reads_cdc_logs(config, schema)
    # per commit in range that changed rows: the groups to diff, and the groups whose CDC log files are read as is
    touched: list[tuple[int, Instant, str, set[tuple[str, str]], dict[tuple[str, str], list[dict[str, str]]]]] = []
    weights: dict[tuple[int, str], int] = {}  # (commit index in writes, partition) -> bytes its descriptor reads
    for n, i in in_range:
        md = timeline.metadata(i)
        if md.operation_type in NO_CHANGE_OPERATIONS or i.action is Action.COMPACTION:
            continue
        groups = md.touched_file_ids()
        logged = _logged_groups(io, md) if as_is and i.action is not Action.REPLACE_COMMIT else {}
        if groups:
            touched.append((n, i, md.operation_type, groups - set(logged), logged))
            for st in md.write_stats:
                # a group read as is costs its CDC log files; a diffed one, its file slice before and after
                cost = sum(st.cdc_stats.values()) if (st.partition_path, st.file_id) in logged and st.cdc_stats \
                    else 2 * st.file_size_in_bytes
                weights[(n, st.partition_path)] = weights.get((n, st.partition_path), 0) + cost
    empty = pa.table({"commit": pa.array([], pa.int32()), "partition": pa.array([], pa.string()),
                      "before": pa.array([], SIDE_TYPE), "after": pa.array([], SIDE_TYPE),
                      "cdc_logs": pa.array([], CDC_LOGS_TYPE), "weight": pa.array([], pa.int64())})
    event_time = config.merge_mode == "EVENT_TIME_ORDERING"
    keys: dict[str, Any] = {"record_key": tuple(config.record_key), "complex_keys": config.complex_keys,
                            "columns": image_columns}
    if not touched:
        return CdcPlan(schema, (), empty, event_time, config.ordering_field, start=start, end=end, **keys)
    first_n, first, _, first_diffed, first_logged = touched[0]
    first_prev = writes[first_n - 1] if first_n > 0 else None
    if first_prev is not None and first_diffed:
        _check_not_cleaned(timeline, first_prev.time, "CDC start (the before images of its first commit)")
    elif first_logged:  # a clean removes CDC log files with the file slices they belong to
        _check_not_cleaned(timeline, first.time, "CDC start (the CDC log files of its first commit)")
    diffed = set().union(*(g for _, _, _, g, _ in touched))
    listed = _candidates(io, config, timeline, diffed) if diffed else TableFiles((), ())
    commits: list[CdcCommit] = []
    rows: dict[str, list[object]] = {"commit": [], "partition": [], "before": [], "after": [], "cdc_logs": [],
                                     "weight": []}
    extents: dict[str, tuple[LogExtent, ...]] = {}
    for n, instant, operation, groups, logged in touched:
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
        by_part: dict[str, tuple[list[object], list[object], list[object]]] = {
            p: ([], [], []) for p, _ in sorted(groups | set(logged))}
        for side, plan in enumerate((before, after)):
            for part, fid, base, logs in plan.slices():
                by_part[part][side].append({"file_id": fid, "base_path": base, "log_paths": logs})
        for (part, _), cdc_files in sorted(logged.items()):
            by_part[part][2].extend(cdc_files)
        for part, (b, a, c) in by_part.items():
            if b or a or c:
                rows["commit"].append(idx)
                rows["partition"].append(part)
                rows["before"].append(b)
                rows["after"].append(a)
                rows["cdc_logs"].append(c)
                rows["weight"].append(max(1, weights.get((n, part), 0)))
    descriptors = pa.table({"commit": pa.array(rows["commit"], pa.int32()),
                            "partition": pa.array(rows["partition"], pa.string()),
                            "before": pa.array(rows["before"], SIDE_TYPE), "after": pa.array(rows["after"], SIDE_TYPE),
                            "cdc_logs": pa.array(rows["cdc_logs"], CDC_LOGS_TYPE),
                            "weight": pa.array(rows["weight"], pa.int64())})
    logger.info("CDC read of (%s, %s]: %d commits, %d (commit, partition) pairs, %d CDC log files read as is", start,
                end, len(commits), descriptors.num_rows, sum(len(g) for *_, g in touched))
    return CdcPlan(schema, tuple(commits), descriptors, event_time, config.ordering_field, extents, start, end, **keys)
