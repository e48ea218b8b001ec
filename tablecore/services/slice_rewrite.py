"""What compaction and clustering share: the jobs that read file slices (base merged with logs) and write new base
files (run by the engine's tasks, :meth:`tablecore.engine.Engine.run_tasks`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tablecore.format.avro_schema import canonical_json, with_meta_fields
from tablecore.format.file_integrity import WrittenFiles
from tablecore.format.table_schema import table_arrow_schema
from tablecore.format.timeline import Timeline
from tablecore.tasks import mor
from tablecore.tasks import write as ex
from tablecore.write_planning import latest_slices_job

if TYPE_CHECKING:
    from tablecore.context import TableContext


def rewrite_jobs(ctx: TableContext, timeline: Timeline, instant: str,
                 written: WrittenFiles) -> tuple[str, mor.SliceJob, ex.WriteJob]:
    """The table's Avro schema (no meta fields), how to read its slices as of ``timeline`` (every completed write
    counts, and whatever is older than the active timeline; ``written``: what completed writes recorded, for the
    log extents), and how to write base files of ``instant``."""
    config, io = ctx.config, ctx.io
    avro = timeline.latest_schema() or config.create_schema
    assert avro is not None
    read_job = latest_slices_job(io, config, timeline, written)
    write_job = ex.WriteJob(io=io, base=io.base, instant=instant,
                            target_schema=table_arrow_schema(avro, with_meta=False),
                            avro_schema_with_meta=canonical_json(with_meta_fields(json.loads(avro))),
                            groups={}, event_time=read_job.event_time, ordering_field=read_job.ordering_field,
                            bloom_filters=config.writes_bloom_filters)
    return avro, read_job, write_job
