"""Reading file slices with Arrow: one slice (a base file merged with its log files, conformed to the table schema
and filtered to the read's commit range), or a whole read plan in this process. Engines read slices with it in
their tasks (the Spark data source does); reading a whole plan here suits small tables and tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablecore.format.file_naming import BaseFileName
from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.tasks import mor
from tablecore.tasks.write import IS_DELETED, conform, read_base_file


def slice_job(io: FileIO, plan: ReadPlan) -> mor.SliceJob:
    """What a task needs to decode and reduce the logs of the plan's slices."""
    return mor.SliceJob(io=io, table_schema=plan.schema, valid_instants=plan.valid_instants,
                        event_time=plan.event_time, ordering_field=plan.ordering_field, start=plan.start,
                        in_range=plan.in_range, log_extents=plan.log_extents)


def _times_meet_range(low: str, high: str, plan: ReadPlan) -> bool:
    """Whether commit times between ``low`` and ``high`` (both included) can fall in the plan's range."""
    if plan.in_range is not None:
        return any(low <= t <= high for t in plan.in_range)
    return (plan.start is None or high > plan.start) and (plan.end is None or low <= plan.end)


def _written_before_range(path: str, plan: ReadPlan) -> bool:
    """Whether a base file's name shows it holds no row in the plan's range: a base file holds rows of its own
    instant and of earlier ones, never of a later instant."""
    parsed = BaseFileName.parse(path.rsplit("/", 1)[-1])
    return parsed is not None and not _times_meet_range("", parsed.instant, plan)


def row_groups_in_range(meta: pq.FileMetaData, plan: ReadPlan) -> list[int] | None:
    """The row groups of a base file (its footer: ``meta``) whose ``_hoodie_commit_time`` statistics meet the
    plan's range; None when a row group has no statistics to tell (then the whole file is read and filtered).

    A merge writes the rows it keeps and its own rows in separate row groups
    (:func:`tablecore.tasks.write.write_base_file`), so an incremental pull of a copy-on-write commit reads the rows
    the commit wrote, not every file it rewrote."""
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if mor.TIME_COL not in names:
        return None
    column = names.index(mor.TIME_COL)
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        if _times_meet_range(str(stats.min), str(stats.max), plan):
            groups.append(g)
    return groups


def range_row_groups(plan: ReadPlan) -> Callable[[pq.FileMetaData], list[int] | None] | None:
    """What picks a base file's row groups for ``plan`` (:func:`tablecore.tasks.write.read_base_file`'s
    ``row_groups``): in a ranged read, :func:`row_groups_in_range`; otherwise None (every row group)."""
    if not plan.ranged:
        return None
    return lambda meta: row_groups_in_range(meta, plan)


def merge_schema(plan: ReadPlan, columns: Sequence[str] | None) -> pa.Schema:
    """The columns a slice is read and merged in when the caller wants ``columns`` (None: all): those, and what the
    merge needs (the record key; the ordering field under event-time ordering; the commit time in a ranged read; the
    delete flag). A base file's other columns are not read."""
    if columns is None:
        return plan.schema
    need = {*columns, mor.KEY_COL, IS_DELETED}
    if plan.event_time and plan.ordering_field:
        if plan.ordering_field not in plan.schema.names:
            return plan.schema  # a nested ordering field: read whole
        need.add(plan.ordering_field)
    if plan.ranged:
        need.add(mor.TIME_COL)
    return pa.schema([f for f in plan.schema if f.name in need])


def read_slice(io: FileIO, plan: ReadPlan, base_path: str | None, log_paths: Sequence[str],
               records: pa.Table | None = None, *, columns: Sequence[str] | None = None) -> pa.Table | None:
    """The rows of one file slice of ``plan`` (None: no base file and no log records). ``records``: the slice's
    log records (:func:`tablecore.tasks.mor.log_records`), when already read. ``columns``: the rows hold at least
    these columns (:func:`merge_schema`; None: every column of the table).

    In a ranged read (incremental), a base file reads only the row groups whose commit-time statistics meet the
    range (:func:`row_groups_in_range`; none: only the slice's logs count, as in a pull of delta commits), and a base
    file whose name shows it was written before the range is not opened at all."""
    table = None
    schema = merge_schema(plan, columns)
    if base_path is not None and plan.ranged and log_paths and _written_before_range(base_path, plan):
        table = schema.empty_table()  # known by its name, without opening the file
    elif base_path is not None:
        read = None if columns is None else schema.names
        # rows merged with logs keep the meta columns of a few values as dictionaries until the merge has dropped
        # the replaced rows (:func:`tablecore.tasks.mor.merge_slice` expands them)
        lazy = bool(log_paths) and not plan.ranged
        table = conform(read_base_file(io, base_path, read, present_only=True, use_threads=False, expand=not lazy,
                                       row_groups=range_row_groups(plan)), schema, dictionaries=lazy)
        if plan.ranged:
            table = mor.filter_commit_range(table, plan.start, plan.end, plan.in_range)
    if log_paths:
        job = slice_job(io, plan)
        if records is None:
            records = mor.log_records(io, list(log_paths), job)
        winners = mor.reduce_slice_logs(records, job, table)
        table = mor.merge_slice(table, winners, schema)
    return table


def _rows_from_logs_alone(plan: ReadPlan, base_path: str | None) -> bool:
    """Whether a slice with logs takes its rows from them alone: it has no base file, or (a ranged read) its base
    file's name shows it was written before the range."""
    return base_path is None or (plan.ranged and _written_before_range(base_path, plan))


def _logs_alone(schema: pa.Schema, records: list[pa.Table]) -> pa.Table | None:
    """The rows of slices whose rows come from their logs alone, from all their log records at once (a pull of a
    commit over every file group); None when a key has more than one record (then slice by slice).

    With one record per key and no base row to lose to, every record wins, whatever the ordering: the rows are the
    records that are not deletes (what :func:`read_slice` gives, slice after slice)."""
    table = pa.concat_tables(records)
    if table.num_rows and pc.count_distinct(table.column(mor.KEY_COL)).as_py() != table.num_rows:
        return None
    if pc.any(table.column(mor.DELETE)).as_py():  # filtering one chunk per slice costs ~10x filtering one chunk
        table = table.combine_chunks()
        table = table.filter(pc.invert(table.column(mor.DELETE)))
    return table.select(schema.names).cast(schema)


def read_slices(io: FileIO, plan: ReadPlan, slices: Sequence[tuple[str | None, Sequence[str]]], *,
                map_fn: Callable[..., Iterable[Any]] = map, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """The rows of the ``(base path, log paths)`` slices, as :func:`read_slice` reads each, in tables (not one per
    slice: the slices whose rows come from their logs alone are read together). The logs of all slices are read
    first and decoded together (:func:`tablecore.tasks.mor.log_records_many`). ``map_fn`` reads the log files and
    then the slices (a thread pool's ``map`` runs them side by side; Parquet and Arrow work release the GIL).
    ``columns``: as :func:`read_slice`'s."""
    logged = [i for i, (_, logs) in enumerate(slices) if logs]
    decoded = mor.log_records_many(io, [slices[i][1] for i in logged], slice_job(io, plan), map_fn=map_fn)
    records = dict(zip(logged, decoded, strict=True))
    del decoded
    alone = [i for i in logged if _rows_from_logs_alone(plan, slices[i][0])]
    together = _logs_alone(merge_schema(plan, columns), [records[i] for i in alone]) if len(alone) > 1 else None
    if together is not None:
        for i in alone:
            del records[i]
    rest = [i for i in range(len(slices)) if i in records or not slices[i][1]]
    tables = map_fn(lambda i: read_slice(io, plan, *slices[i], records=records.pop(i, None), columns=columns), rest)
    if together is not None and together.num_rows:
        yield together
    yield from (t for t in tables if t is not None)


def read_plan_locally(io: FileIO, plan: ReadPlan) -> pa.Table:
    """Every row of ``plan``, read slice by slice in this process."""
    parts = list(read_slices(io, plan, [(base, logs) for *_, base, logs in plan.slices()]))
    return pa.concat_tables(parts) if parts else plan.schema.empty_table()
