"""Reading file slices with Arrow: one slice (a base file merged with its log files, conformed to the table schema
and filtered to the read's commit range), or a whole read plan in this process. Engines read slices with it in
their tasks (the Spark data source does); reading a whole plan here suits small tables and tests."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.tasks import mor
from tablecore.tasks.write import conform, read_base_file


def slice_job(io: FileIO, plan: ReadPlan) -> mor.SliceJob:
    """What a task needs to decode and reduce the logs of the plan's slices."""
    return mor.SliceJob(io=io, table_schema=plan.schema, valid_instants=plan.valid_instants,
                        event_time=plan.event_time, ordering_field=plan.ordering_field, start=plan.start,
                        in_range=plan.in_range, log_extents=plan.log_extents)


def read_slice(io: FileIO, plan: ReadPlan, base_path: str | None, log_paths: Sequence[str]) -> pa.Table | None:
    """The rows of one file slice of ``plan`` (None: no base file and no log records)."""
    table = None
    if base_path is not None:
        table = conform(read_base_file(io, base_path), plan.schema)
        if plan.start is not None or plan.end is not None or plan.in_range is not None:
            table = mor.filter_commit_range(table, plan.start, plan.end, plan.in_range)
    if log_paths:
        job = slice_job(io, plan)
        winners = mor.reduce_slice_logs(mor.log_records(io, list(log_paths), job), job, table)
        table = mor.merge_slice(table, winners, plan.schema)
    return table


def read_plan_locally(io: FileIO, plan: ReadPlan) -> pa.Table:
    """Every row of ``plan``, read slice by slice in this process."""
    parts = [t for *_, base, logs in plan.slices() if (t := read_slice(io, plan, base, logs)) is not None]
    return pa.concat_tables(parts) if parts else plan.schema.empty_table()
