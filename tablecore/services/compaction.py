"""Compaction of merge-on-read tables: merge each chosen slice's logs into a new base file of its file group.

Timeline: ``C.compaction.requested`` (Avro ``HoodieCompactionPlan``) -> ``C.compaction.inflight`` -> executors write
``<fileId>_<token>_C.parquet`` -> ``C.commit`` (``compacted: true``, operation ``COMPACT``). Rows keep their commit
time and sequence number, so incremental reads see no change. A compaction is never left pending: a failure rolls
it back at once, and a crashed one is rolled back by the next write or service run (hudi-rs drops log files that
are written against a pending compaction, so none ever are).

Concurrent writes are checked at completion like any commit: a delta commit that completed meanwhile on a
compacted file group makes the compaction fail (its logs would otherwise be hidden behind the new base file).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tablecore.format.avro_schema import canonical_json
from tablecore.format.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from tablecore.format.file_integrity import check_slices
from tablecore.format.file_view import FileSlice, latest_file_slices, list_table_files
from tablecore.format.instant import Action
from tablecore.format.service_metadata import CompactionOperation, compaction_plan
from tablecore.format.timeline import Timeline
from tablecore.read_planning import written_files
from tablecore.results import CommitResult
from tablecore.services.slice_rewrite import rewrite_jobs
from tablecore.tasks import mor
from tablecore.transaction import Transaction, result_of

if TYPE_CHECKING:
    from tablecore.context import TableContext

logger = logging.getLogger(__name__)

Strategy = Literal["all", "num_commits", "log_ratio"]


@dataclass(frozen=True)
class CompactionSelection:
    """Which slices to compact: all with logs, those with at least ``min_delta_commits`` delta commits since their
    base file, or those whose log bytes reach ``min_log_ratio`` times their base file size."""

    strategy: Strategy = "all"
    min_delta_commits: int = 1
    min_log_ratio: float = 0.0


def delta_commits_since_base(timeline: Timeline, slices: list[FileSlice]) -> dict[tuple[str, str], int]:
    """For every slice, how many completed delta commits wrote to its file group after its base instant."""
    wanted = {s.key: s.base_instant for s in slices}
    counts = dict.fromkeys(wanted, 0)
    for inst in timeline.completed_writes():
        if inst.action is not Action.DELTA_COMMIT:
            continue
        for key in timeline.metadata(inst).touched_file_ids():
            base = wanted.get(key)
            if base is not None and inst.time > base:
                counts[key] += 1
    return counts


def choose_slices(timeline: Timeline, slices: list[FileSlice], selection: CompactionSelection) -> list[FileSlice]:
    """The slices with logs that the selection picks."""
    candidates = [s for s in slices if s.logs]
    if selection.strategy == "all":
        return candidates
    if selection.strategy == "num_commits":
        counts = delta_commits_since_base(timeline, candidates)
        return [s for s in candidates if counts[s.key] >= selection.min_delta_commits]
    if selection.strategy == "log_ratio":
        out = []
        for s in candidates:
            logs = sum(lg.size for lg in s.logs)
            base = s.base.size if s.base is not None else 0
            if base == 0 or logs / base >= selection.min_log_ratio:
                out.append(s)
        return out
    raise ValueError(f"unknown compaction strategy {selection.strategy!r}: expected all, num_commits or log_ratio")


def compact(ctx: TableContext, selection: CompactionSelection | None = None) -> CommitResult | None:
    """Schedule and execute one compaction; returns None if no slice needs it (or the table is copy-on-write)."""
    if ctx.config.table_type != "MERGE_ON_READ":
        return None
    io = ctx.io
    timeline = ctx.meta.load_timeline()
    latest = timeline.latest_completed()
    if latest is None:
        return None
    slices = choose_slices(timeline, latest_file_slices(list_table_files(io), timeline), selection
                           or CompactionSelection())
    if not slices:
        return None
    # refuse to write a base file over a damaged slice: it would make the loss permanent (the tasks check blocks)
    written = written_files(timeline)
    check_slices(slices, written, join=io.base)
    ops = [CompactionOperation(base_instant=s.base_instant, file_id=s.file_id, partition_path=s.partition,
                               data_file_name=s.base.name if s.base else None,
                               delta_file_names=[lg.name for lg in s.logs],
                               metrics={"TOTAL_LOG_FILES": float(len(s.logs)),
                                        "TOTAL_LOG_FILES_SIZE": float(sum(lg.size for lg in s.logs))})
           for s in slices]
    plan = compaction_plan(ops)
    started = time.monotonic()
    with Transaction(ctx, Action.COMPACTION, plan=plan) as tx:
        tx.mark_inflight(plan)
        instant = tx.instant.time
        avro, read_job, write_job = rewrite_jobs(ctx, timeline, instant, written)
        stats = _run(ctx, slices, mor.CompactionJob(read_job, write_job))
        keep = {s.file_name for s in stats if s.file_name}
        ctx.meta.remove_unlisted_files(instant, {s.partition for s in slices}, keep)
        metadata = CommitMetadata(operation_type="COMPACT", write_stats=tuple(stats),
                                  extra_metadata={SCHEMA_KEY: canonical_json(json.loads(avro))}, compacted=True)
        tx.publish(metadata, base_instant=latest.time, pending_at_start=[i.time for i in timeline.pending()])
    logger.info("compacted %d file slices at %s in %.1fs", len(stats), instant, time.monotonic() - started)
    return result_of(instant, "COMPACT", stats, None, inserts=False)


def _run(ctx: TableContext, slices: list[FileSlice], job: mor.CompactionJob) -> list[WriteStat]:
    desc = mor.slice_descriptors([(s.partition, s.file_id, s.base.path if s.base else None,
                                   [lg.path for lg in s.logs]) for s in slices])
    return ctx.engine.run_tasks(desc, lambda d, token: mor.compact_slice(d, job, token))
