"""Rollback of an instant, recorded on the timeline as Hudi does (``R.rollback.requested/.inflight/R.rollback``).

Order of a rollback of instant ``T`` by rollback instant ``R`` (each step leaves the table readable):

1. ``R.rollback.requested`` with the plan (``HoodieRollbackPlan``: files to delete, log files to void), then
   ``R.rollback.inflight``.
2. The completed file of ``T`` is deleted first: from here on ``T`` is a pending instant, invisible to readers.
3. Merge-on-read log files holding blocks of ``T`` get a rollback command block (a new log version of the same
   slice), so every reader, also one that would merge uncommitted blocks, drops ``T``'s blocks. Base files of
   ``T`` are deleted; so are log files a pending (failed) ``T`` wrote and nobody else appended to.
4. ``T``'s remaining instant files are deleted, then ``R.rollback`` (``HoodieRollbackMetadata``) is written.

A rollback killed midway is finished by the next write or service run (:func:`resume_rollbacks`).
Only the newest completed write can be rolled back (newer writes may have copied its rows); use savepoint and
restore to go back further.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tablecore.commit import writer_alive
from tablecore.exceptions import InstantNotFoundError, RollbackError, TableCorruptError
from tablecore.format.file_naming import write_token
from tablecore.format.file_view import BaseFile, CdcFile, LogFile, list_table_files, relative_path
from tablecore.format.instant import Action, Instant, State
from tablecore.format.log_format import LogFileName, encode_rollback_command
from tablecore.format.service_metadata import (
    RollbackPartition,
    RollbackRequest,
    read_rollback_plan,
    rollback_metadata,
    rollback_plan,
)
from tablecore.format.timeline import Timeline
from tablecore.transaction import Transaction

if TYPE_CHECKING:
    from tablecore.context import TableContext

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RollbackResult:
    """What a rollback did."""

    instant: str  # the rollback instant
    rolled_back: str
    action: str
    files_deleted: int
    rollback_blocks: int


def _target(timeline: Timeline, time_: str) -> Instant:
    found = [i for i in timeline.instants() if i.time == time_ and i.action is not Action.ROLLBACK]
    if not found:
        raise InstantNotFoundError(f"instant {time_!r} is not on the timeline")
    inst = found[0]
    if not (inst.action.is_write or inst.action in (Action.COMPACTION, Action.CLUSTERING)):
        raise RollbackError(f"instant {time_} is a {inst.action}, not a write or compaction: nothing to roll back")
    return inst


def _touched_partitions(ctx: TableContext, timeline: Timeline, target: Instant) -> set[str]:
    if target.is_completed:
        try:
            return timeline.metadata(target).partitions() or ctx.meta.all_partitions()
        except TableCorruptError as exc:
            # the damaged instant's own record of what it wrote is unreadable: its inflight plan names the
            # partitions (else every partition is searched); its files are found by name and by block instant
            logger.warning("rolling back %s without its commit metadata: %s", target.time, exc)
    return ctx.meta.planned_partitions(target)


def rollback_instant(ctx: TableContext, instant_time: str, *, record: bool = True) -> RollbackResult:
    """Roll back ``instant_time`` (completed or pending) and record the rollback instant.

    Raises:
        InstantNotFoundError: no such instant.
        RollbackError: a newer completed write exists, or the instant is savepointed.
    """
    protocol, io = ctx.meta, ctx.io
    timeline = protocol.load_timeline()
    target = _target(timeline, instant_time)
    if target.is_completed:
        newer = [i.time for i in timeline.completed_writes() if i.time > instant_time]
        if newer:
            raise RollbackError(f"cannot roll back {instant_time}: newer completed writes depend on it "
                                f"({', '.join(newer)}); roll those back first, or restore a savepoint")
        if any(i.action is Action.SAVEPOINT and i.time == instant_time and i.is_completed
               for i in timeline.instants()):
            raise RollbackError(f"cannot roll back {instant_time}: it is savepointed (delete the savepoint first)")
    started = time.monotonic()
    partitions = _touched_partitions(ctx, timeline, target)
    files = list_table_files(io, partitions)
    bases: list[BaseFile | CdcFile] = [f for f in files.bases if f.instant == instant_time]
    bases += [f for f in files.cdc if f.instant == instant_time]  # its CDC log files go with its base files
    only, mixed = protocol.logs_with_blocks_of(instant_time, files.logs)
    # a completed delta commit's own log files are voided with command blocks (as Java does up to version 6); a
    # failed one's are deleted outright (they may be half-written). From version 8 a delta commit's log files are
    # its own (named by its instant): they are deleted either way, as Hudi 1.x does
    void = only + mixed if target.is_completed and not ctx.config.completion_times else mixed
    delete_logs = [lg for lg in only if lg not in void]
    requests: dict[tuple[str, str], RollbackRequest] = {}
    for f in bases:
        req = requests.setdefault((f.partition, f.file_id), RollbackRequest(f.partition, f.file_id, f.instant, [], {}))
        req.files_to_delete.append(f.path)
    for lg in void + delete_logs:
        req = requests.setdefault((lg.partition, lg.file_id),
                                  RollbackRequest(lg.partition, lg.file_id, lg.base_instant, [], {}))
        if lg in delete_logs:
            req.files_to_delete.append(lg.path)
        else:
            req.log_blocks_to_delete[lg.path] = lg.size
    plan = rollback_plan(instant_time, _action_name(target), list(requests.values()))
    with Transaction(ctx, Action.ROLLBACK, plan=plan if record else b"", on_failure="keep") as tx:
        r_instant = tx.mark_inflight()
        if target.is_completed:
            protocol.delete_instant_file(target)  # T becomes invisible at once
        rollback_files = _append_rollback_blocks(ctx, void, files.logs, r_instant.time, instant_time)
        for path in [f.path for f in bases] + [lg.path for lg in delete_logs]:
            io.delete(path)
        protocol.forget_instant(Instant(target.time, target.action, State.INFLIGHT))
        if target.action in (Action.COMMIT, Action.COMPACTION):  # a compaction's plan files
            protocol.forget_instant(Instant(target.time, Action.COMPACTION, State.INFLIGHT))
        if target.action is Action.REPLACE_COMMIT and ctx.config.completion_times:  # a clustering's plan files
            protocol.forget_instant(Instant(target.time, Action.CLUSTERING, State.INFLIGHT))
        by_part: dict[str, RollbackPartition] = {}
        for f in bases:
            by_part.setdefault(f.partition, RollbackPartition([])).deleted_files.append(f.path)
        for lg in delete_logs:
            by_part.setdefault(lg.partition, RollbackPartition([])).deleted_files.append(lg.path)
        for lg, written in rollback_files:
            part = by_part.setdefault(lg.partition, RollbackPartition([]))
            part.log_files_from_failed_commit[lg.path] = lg.size
            part.rollback_log_files[written] = 0
        elapsed = int((time.monotonic() - started) * 1000)
        meta = rollback_metadata(r_instant.time, elapsed, [(instant_time, _action_name(target))], by_part)
        if record:
            tx.publish(meta)
        else:
            tx.discard()
    logger.info("rolled back %s %s with %s (%d files deleted, %d rollback blocks)", target.action, instant_time,
                r_instant.time, len(bases) + len(delete_logs), len(rollback_files))
    return RollbackResult(r_instant.time, instant_time, target.action.value, len(bases) + len(delete_logs),
                          len(rollback_files))


def _action_name(target: Instant) -> str:
    # a completed compaction is a commit on the timeline
    return Action.COMMIT.value if target.action is Action.COMPACTION and target.is_completed else target.action.value


def _append_rollback_blocks(ctx: TableContext, logs: list[LogFile], listed: Iterable[LogFile], rollback: str,
                            target: str) -> list[tuple[LogFile, str]]:
    """One new log version with a rollback command block per slice holding blocks of ``target`` (versions follow
    the ``listed`` log files of the touched partitions)."""
    io = ctx.io
    out: list[tuple[LogFile, str]] = []
    by_slice: dict[tuple[str, str, str], LogFile] = {}
    for lg in logs:
        by_slice.setdefault((lg.partition, lg.file_id, lg.base_instant), lg)
    for (partition, fid, base), lg in sorted(by_slice.items()):
        existing = [x for x in listed if (x.partition, x.file_id, x.base_instant) == (partition, fid, base)]
        version = max((x.version for x in existing), default=0) + 1
        name = LogFileName(fid, base, version, write_token(1, 0, 1)).name
        path = io.join(partition, name) if partition else io.join(name)
        io.create_if_absent(path, encode_rollback_command(rollback, target))
        out.append((lg, relative_path(partition, name)))
    return out


def resume_rollbacks(ctx: TableContext) -> list[str]:
    """Finish rollbacks whose process died midway; returns the instants they rolled back."""
    protocol = ctx.meta
    timeline = protocol.load_timeline()
    done = []
    for r in timeline.pending():
        if r.action is not Action.ROLLBACK or writer_alive(ctx.io, r.time):
            continue
        try:
            target, _ = read_rollback_plan(protocol.read_plan(r))
        except (OSError, ValueError):
            target = None
        # drop the dead rollback instant; then roll its target back again if it is still (partly) there
        protocol.delete_instant_file(r.with_state(State.INFLIGHT))
        protocol.delete_instant_file(r.with_state(State.REQUESTED))
        if target is not None and any(i.time == target[0] for i in timeline.instants() if i is not r):
            rollback_instant(ctx, target[0])
            done.append(target[0])
    return done
