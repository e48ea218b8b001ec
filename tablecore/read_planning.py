"""Read planning, engine-neutral (DESIGN §2.3): which file slices a snapshot, time-travel, read-optimized or
incremental ``(start, end]`` read scans, chosen on the driver from the timeline and one listing. An engine executes
the plan (:meth:`tablecore.engine.Engine.read`, ``count``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa

from tablecore.config import TableConfig
from tablecore.exceptions import CleanedRangeError, InstantNotFoundError, TableCoreError
from tablecore.format.archived_timeline import ARCHIVED_DIR, last_archived_instant
from tablecore.format.file_integrity import WrittenFiles, check_bases, check_slices, slice_extents
from tablecore.format.file_view import (
    BaseFile,
    FileSlice,
    TableFiles,
    latest_base_files,
    latest_file_slices,
)
from tablecore.format.instant import Instant
from tablecore.format.log_integrity import LogExtent
from tablecore.format.table_schema import table_arrow_schema
from tablecore.format.timeline import TIMELINE_DIR_V2, InstantsOrEarlier, Timeline
from tablecore.io import FileIO
from tablecore.metadata_table import table_files

logger = logging.getLogger(__name__)

EARLIEST = "00000000000000000"
TIMESTAMP_KEYGEN_SUFFIX = ".TimestampBasedKeyGenerator"
VIEWS = ("snapshot", "read_optimized")


@dataclass(frozen=True)
class ReadPlan:
    """The base files a read scans, the table schema, and an optional commit-time range filter."""

    files: tuple[BaseFile, ...]
    schema: pa.Schema  # with meta columns
    start: str | None = None  # exclusive
    end: str | None = None  # inclusive
    log_slices: tuple[FileSlice, ...] = ()  # merge-on-read slices whose logs are merged into their base rows
    valid_instants: frozenset[str] = frozenset()  # write instants whose log blocks count
    event_time: bool = False
    ordering_field: str | None = None
    log_extents: Mapping[str, tuple[LogExtent, ...]] = field(default_factory=dict)  # by log file name
    # base files may store a column in another type than the schema's (a timestamp-based key generator's partition
    # field: int64 in the files, a string in the schema): they are read and cast with Arrow, in tasks
    cast_in_tasks: bool = False
    # incremental reads of tables with completion times: the instants whose rows and log blocks the read returns
    # (those *completed* in (start, end]); None: the range (start, end] of instant times itself
    in_range: frozenset[str] | None = None

    @property
    def ranged(self) -> bool:
        """True for a read filtered by commit time (an incremental read)."""
        return self.start is not None or self.end is not None or self.in_range is not None

    def slices(self) -> list[tuple[str, str, str | None, list[str]]]:
        """Every file slice the plan reads as (partition, file id, base file path, log file paths): base files
        without logs first, then the slices with logs (a group with logs appears once, with its base)."""
        with_logs = {(s.partition, s.file_id) for s in self.log_slices}
        out: list[tuple[str, str, str | None, list[str]]] = [
            (f.partition, f.file_id, f.path, []) for f in self.files if (f.partition, f.file_id) not in with_logs]
        out += [(s.partition, s.file_id, s.base.path if s.base else None, [lg.path for lg in s.logs])
                for s in self.log_slices]
        return out


def table_schema(timeline: Timeline, create_schema: str | None, *, meta: bool = True) -> pa.Schema:
    """The Arrow schema (meta columns first; none for a table without meta fields) every read uses: like Hudi (Java
    and hudi-rs), the latest table schema, also for time travel; older files read with nulls for columns added
    later and with promoted types."""
    avro = timeline.latest_schema() or create_schema
    return table_arrow_schema(avro or {"type": "record", "name": "empty", "fields": []}, with_meta=meta)


def _check_readable(config: TableConfig) -> None:
    if not config.populate_meta_fields and config.table_type == "MERGE_ON_READ":
        raise TableCoreError("this merge-on-read table has no meta fields (hoodie.populate.meta.fields=false): "
                             "lakegate cannot merge its log records without their record keys")


def _check_instant(timeline: Timeline, instant: str, what: str) -> None:
    if not timeline.is_completed_write(instant):
        raise InstantNotFoundError(f"{what} {instant!r} is not a completed commit of this table")


def _check_not_cleaned(timeline: Timeline, instant: str, what: str) -> None:
    """Raise if reading the table as of ``instant`` needs file slices a clean removed (savepoints stay readable)."""
    earliest = timeline.earliest_retained()
    if earliest is None or instant >= earliest:
        return
    savepoints = timeline.savepoint_times()
    if instant in savepoints:
        return
    also = f" (or a savepointed instant: {', '.join(savepoints)})" if savepoints else ""
    raise CleanedRangeError(
        f"{what} {instant} is in a cleaned range: a clean removed file slices the table needs as of that instant, "
        f"so the read would return partial data; the earliest instant still readable is {earliest}{also}",
        instant=instant, earliest_readable=earliest)


def _check_not_archived(io: FileIO, timeline: Timeline, start: str) -> None:
    """Raise if the incremental range starting after ``start`` includes instants archived off the active timeline:
    their write stats are gone, so the file groups they changed cannot be found."""
    first = timeline.first_instant_time()
    if first is None or start >= first:
        return
    last = last_archived_instant(f.name for f in io.list(io.join(ARCHIVED_DIR)))
    if last is not None and start < last:
        raise CleanedRangeError(
            f"incremental start {start} reaches into archived instants (archived up to {last}): the changes they "
            f"made can no longer be found, so the read would return partial data; the earliest start still "
            f"readable is {last}", instant=start, earliest_readable=last)


def written_files(timeline: Timeline, *, until: str | None = None) -> WrittenFiles:
    """What the completed writes of the active timeline (up to ``until``) recorded about the files they wrote."""
    return WrittenFiles.of([(i.time, timeline.metadata(i)) for i in timeline.completed_writes(until=until)])


def _plan(files: TableFiles, timeline: Timeline, config: TableConfig, *, as_of: str | None, view: str,
          in_scope: Callable[[tuple[str, str]], bool], base: str, start: str | None = None,
          in_range: frozenset[str] | None = None) -> ReadPlan:
    _check_readable(config)
    schema = table_schema(timeline, config.create_schema, meta=config.populate_meta_fields)
    cast = config.key_generator.endswith(TIMESTAMP_KEYGEN_SUFFIX)
    written = written_files(timeline, until=as_of)
    replaced = timeline.replaced_file_groups(until=as_of)
    if config.table_type != "MERGE_ON_READ" or view == "read_optimized":
        bases = latest_base_files(files.bases, timeline, as_of=as_of)
        check_bases(bases, written, in_scope, replaced, join=base)
        return ReadPlan(tuple(bases), schema, start, as_of, cast_in_tasks=cast, in_range=in_range)
    slices = latest_file_slices(files, timeline, as_of=as_of)
    check_bases([s.base for s in slices if s.base is not None], written, in_scope, replaced, join=base)
    check_slices(slices, written, join=base)
    # blocks of completed writes count, and those of instants older than the active timeline (archived)
    counted = (i.time for i in timeline.completed_writes(until=as_of)
               if (start is None or i.time > start) if in_range is None or i.time in in_range)
    valid = InstantsOrEarlier(counted, before=timeline.first_instant_time() if in_range is None else None)
    return ReadPlan(tuple(s.base for s in slices if s.base is not None), schema, start, as_of,
                    log_slices=tuple(s for s in slices if s.logs), valid_instants=valid,
                    event_time=config.merge_mode == "EVENT_TIME_ORDERING", ordering_field=config.ordering_field,
                    log_extents=slice_extents(slices, written), cast_in_tasks=cast, in_range=in_range)


def _check_view(view: str) -> None:
    if view not in VIEWS:
        raise TableCoreError(f"unknown view {view!r}: expected one of {', '.join(VIEWS)}")


def plan_snapshot(io: FileIO, timeline: Timeline, config: TableConfig, *, as_of: str | None = None,
                  view: str = "snapshot", partitions: Collection[str] | None = None) -> ReadPlan:
    """Files of the snapshot as of ``as_of`` (default: latest); ``view="read_optimized"`` reads base files only;
    ``partitions`` (partition paths) lists and reads only those partitions.

    Raises:
        InstantNotFoundError: ``as_of`` is not a completed write on the active timeline.
        CleanedRangeError: ``as_of`` is older than what cleaning kept (and not savepointed).
    """
    _check_view(view)
    if as_of is not None:
        _check_instant(timeline, as_of, "as_of instant")
        _check_not_cleaned(timeline, as_of, "as_of instant")
    # the files are chosen as of the instant (its requested time, on every table version, as hudi-rs does); the rows
    # need no commit-time filter
    if partitions is None:
        files, in_scope = table_files(io, config, timeline), (lambda _: True)
    else:
        wanted = frozenset(partitions)
        files, in_scope = table_files(io, config, timeline, sorted(wanted)), (lambda group: group[0] in wanted)
    plan = _plan(files, timeline, config, as_of=as_of, view=view, in_scope=in_scope, base=io.base)
    return replace(plan, end=None)


def plan_incremental(io: FileIO, timeline: Timeline, config: TableConfig, *, start: str | None,
                     end: str | None) -> ReadPlan:
    """Files and range of an incremental read of ``(start, end]``: only the file groups commits in range wrote.

    The read needs the file slices as of ``end`` (rows are filtered by commit time), so a range that starts before
    what cleaning kept is complete as long as ``end`` is readable.

    Raises:
        InstantNotFoundError: ``end`` is not a completed write on the active timeline.
        CleanedRangeError: ``end`` is older than what cleaning kept (and not savepointed), or ``start`` is older
            than the newest archived instant.
    """
    if timeline.layout >= 2:
        return _plan_incremental_by_completion(io, timeline, config, start=start, end=end)
    writes = timeline.completed_writes()
    if end is None:
        end = writes[-1].time if writes else EARLIEST
    else:
        _check_instant(timeline, end, "end instant")
    start = start or EARLIEST
    if start > end:
        raise TableCoreError(f"incremental range is empty or inverted: start {start} > end {end}")
    _check_not_cleaned(timeline, end, "incremental end instant")
    _check_not_archived(io, timeline, start)
    in_range = [i for i in writes if start < i.time <= end]
    groups = _written_groups(timeline, in_range)
    if not groups:
        return ReadPlan((), table_schema(timeline, config.create_schema, meta=config.populate_meta_fields), start,
                        end)
    plan = _plan(_candidates(io, config, timeline, groups), timeline, config, as_of=end, view="snapshot",
                 in_scope=groups.__contains__, base=io.base, start=start)
    return plan if config.populate_meta_fields else _whole_slices(plan)


def _written_groups(timeline: Timeline, instants: list[Instant]) -> set[tuple[str, str]]:
    groups: set[tuple[str, str]] = set()
    for i in instants:
        groups.update((s.partition_path, s.file_id) for s in timeline.metadata(i).write_stats if s.file_id)
    return groups


def _candidates(io: FileIO, config: TableConfig, timeline: Timeline, groups: set[tuple[str, str]]) -> TableFiles:
    listed = table_files(io, config, timeline, {p for p, _ in groups})
    return TableFiles(tuple(f for f in listed.bases if (f.partition, f.file_id) in groups),
                      tuple(f for f in listed.logs if (f.partition, f.file_id) in groups))


def _whole_slices(plan: ReadPlan) -> ReadPlan:
    """A table without meta fields has no commit time per row: an incremental read returns every row of the file
    slices the commits in range wrote (what hudi-rs returns), not an empty result."""
    logger.info("incremental read of a table without meta fields: whole file slices, rows are not filtered by "
                "commit time")
    return replace(plan, start=None, end=None, in_range=None)


def _plan_incremental_by_completion(io: FileIO, timeline: Timeline, config: TableConfig, *, start: str | None,
                                    end: str | None) -> ReadPlan:
    """Table versions 8 and 9: ``(start, end]`` are *completion* times; the read returns the rows of the writes
    that completed in that range, whenever they started (a staged commit published late is in the range it
    completed in)."""
    writes = timeline.completed_writes_by_completion()
    if end is None:
        end = writes[-1].completed_at if writes else EARLIEST
    start = start or EARLIEST
    if start > end:
        raise TableCoreError(f"incremental range is empty or inverted: start {start} > end {end}")
    view = timeline.completed_by(end)
    visible = view.completed_writes()
    if visible:
        _check_not_cleaned(view, visible[-1].time, "incremental end")
    _check_history(io, timeline, start)
    in_range = [i for i in writes if start < i.completed_at <= end]
    groups = _written_groups(timeline, in_range)
    if not groups:
        return ReadPlan((), table_schema(timeline, config.create_schema, meta=config.populate_meta_fields), start,
                        end, in_range=frozenset())
    plan = _plan(_candidates(io, config, timeline, groups), view, config, as_of=None, view="snapshot",
                 in_scope=groups.__contains__, base=io.base, start=start, in_range=frozenset(i.time for i in in_range))
    # rows in the latest table schema, as every read (the view may end before the latest schema change)
    plan = replace(plan, start=start, end=end,
                   schema=table_schema(timeline, config.create_schema, meta=config.populate_meta_fields))
    return plan if config.populate_meta_fields else _whole_slices(plan)


def _check_history(io: FileIO, timeline: Timeline, start: str) -> None:
    """Raise if ``start`` reaches before the active timeline of a table whose LSM history holds archived instants:
    the changes they made cannot be found from the active timeline."""
    firsts = [i.completed_at for i in timeline.completed_writes()]
    if not firsts or start >= min(firsts):
        return
    # the LSM history, and the version-6 archive an upgraded table keeps
    history = [f for f in io.list(io.join(TIMELINE_DIR_V2, "history")) if f.name.endswith(".parquet")]
    history += io.list(io.join(ARCHIVED_DIR))
    if history:
        raise CleanedRangeError(
            f"incremental start {start} reaches into archived instants ({len(history)} archive files): the changes "
            f"they made are not read from the archive, so the read would return partial data; the earliest start "
            f"readable is {min(firsts)}", instant=start, earliest_readable=min(firsts))
