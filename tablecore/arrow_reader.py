"""Reads into Arrow in this process, without Spark: for single-process consumers (a service, a notebook, a test) that
want a table's rows as a ``pyarrow.Table``.

The plan is the one Spark reads (:mod:`tablecore.read_planning`: the same file slices, time travel, views and
incremental ranges, the listing from the metadata table where there is one); the slices are read by a pool of
threads (pyarrow decodes Parquet without the GIL). A slice reads only the requested columns of its base file (and,
in a merge-on-read slice with logs, those the merge needs: :func:`tablecore.tasks.read.merge_schema`; the logs of
all slices are decoded together first). Spark
remains the engine for reads larger than one machine's memory: this reader returns every row to the caller.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from tablecore.exceptions import InvalidInputError
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO, file_io_for
from tablecore.read_planning import ReadPlan, plan_incremental, plan_snapshot
from tablecore.table_properties import read_config
from tablecore.tasks import mor
from tablecore.tasks.read import range_row_groups, read_slices
from tablecore.tasks.write import conform, read_base_file

__all__ = ["read_arrow", "read_changes_arrow", "read_plan_arrow"]


def read_plan_arrow(io: FileIO, plan: ReadPlan, *, columns: Sequence[str] | None = None,
                    max_workers: int | None = None) -> pa.Table:
    """Every row of ``plan`` (``columns`` only, in that order), its slices read by ``max_workers`` threads (default:
    twice the CPUs, at most 32).

    Raises:
        InvalidInputError: a column the table does not have.
        TableCorruptError: a file of the plan is missing or damaged.
    """
    unknown = [c for c in columns or () if c not in plan.schema.names]
    if unknown:
        raise InvalidInputError(f"no column {', '.join(map(repr, unknown))} in the table (it has "
                                f"{', '.join(plan.schema.names)})")
    out_schema = plan.schema if columns is None else pa.schema([plan.schema.field(c) for c in columns])
    wanted = list(out_schema.names)
    if plan.ranged and mor.TIME_COL not in wanted:
        wanted.append(mor.TIME_COL)
    read_schema = pa.schema([plan.schema.field(c) for c in wanted])

    def plain(base: str) -> pa.Table:  # a base file alone: only the wanted columns are read
        # the meta columns stay dictionaries: conformed() expands them once for all files, not file by file
        return read_base_file(io, base, wanted, present_only=True, use_threads=False, expand=False,
                              row_groups=range_row_groups(plan))

    def conformed(tables: list[pa.Table]) -> Iterator[pa.Table]:
        # base files read alone, conformed (their dictionaries expanded) and filtered by schema (most files have one),
        # not file by file
        by_schema: dict[pa.Schema, list[pa.Table]] = {}
        for t in tables:
            by_schema.setdefault(t.schema.remove_metadata(), []).append(t)
        for group in by_schema.values():
            table = conform(pa.concat_tables(group), read_schema)
            if plan.ranged:
                table = mor.filter_commit_range(table, plan.start, plan.end, plan.in_range)
            yield table.select(out_schema.names)

    slices = [(base, logs) for *_, base, logs in plan.slices()]
    merged = [s for s in slices if s[1] or s[0] is None]
    alone = [base for base, logs in slices if not logs and base is not None]
    workers = max_workers or min(32, 2 * (os.cpu_count() or 1))
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="lakegate-read") as pool:
        map_fn = map if len(slices) <= 1 or workers == 1 else pool.map
        # base files alone: a pool's ``map`` starts reading them now, while the logs are read and decoded
        plain_parts = map_fn(plain, alone)
        # slices with logs: their logs are read and decoded together, then merged with their base files
        read = None if columns is None else wanted  # a base file's other columns are not read
        parts = [t.select(out_schema.names) for t in read_slices(io, plan, merged, map_fn=map_fn, columns=read)]
        parts.extend(conformed(list(plain_parts)))
    found = [p for p in parts if p.num_rows]
    return pa.concat_tables(found) if found else out_schema.empty_table()


def read_arrow(uri: str, *, as_of: str | None = None, view: str = "snapshot", columns: Sequence[str] | None = None,
               partitions: Collection[str] | None = None, storage_options: Mapping[str, str] | None = None,
               max_workers: int | None = None) -> pa.Table:
    """The table at ``uri`` as a ``pyarrow.Table``, read in this process (no Spark): the latest snapshot, or as of
    ``as_of``; ``view="read_optimized"`` reads base files only; ``columns`` and ``partitions`` (partition paths)
    restrict what is read.

    Raises:
        TableNotFoundError: no table at ``uri``.
        InstantNotFoundError / CleanedRangeError: ``as_of`` is not readable.
        InvalidInputError: a column the table does not have.
    """
    io = file_io_for(uri, storage_options)
    config = read_config(io, uri)
    timeline = Timeline.listed(io, config.table_version)
    plan = plan_snapshot(io, timeline, config, as_of=as_of, view=view, partitions=partitions)
    return read_plan_arrow(io, plan, columns=columns, max_workers=max_workers)


def read_changes_arrow(uri: str, start: str | None = None, end: str | None = None, *,
                       columns: Sequence[str] | None = None, storage_options: Mapping[str, str] | None = None,
                       max_workers: int | None = None) -> pa.Table:
    """The rows written in ``(start, end]`` (an incremental pull: the latest version of each record the range
    wrote), as a ``pyarrow.Table``, read in this process.

    Raises:
        TableNotFoundError: no table at ``uri``.
        InstantNotFoundError / CleanedRangeError: the range is not readable.
    """
    io = file_io_for(uri, storage_options)
    config = read_config(io, uri)
    timeline = Timeline.listed(io, config.table_version)
    plan = plan_incremental(io, timeline, config, start=start, end=end)
    return read_plan_arrow(io, plan, columns=columns, max_workers=max_workers)
