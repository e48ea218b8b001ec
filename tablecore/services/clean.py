"""Cleaning: delete the file slices no retained snapshot needs (Hudi's ``clean`` action, format reference §9).

A file slice is a base file with the log files written against it (log files whose base instant is the base file's
instant), or the logs of a log-only group. Policies, as Hudi names them:

- ``KEEP_LATEST_COMMITS`` (``retain_commits=N``, default 10 like ``hoodie.cleaner.commits.retained``): keep every
  slice the table needs to be read as of any of the latest N completed write instants: per file group the latest
  slice, plus every slice that was the latest as of one of those instants. The earliest retained instant is the
  oldest of the N.
- ``KEEP_LATEST_FILE_VERSIONS`` (``retain_file_versions=N``): keep the newest N slices of every file group. The
  earliest retained instant is the oldest write from which on every snapshot is still complete; it is recorded as
  the clean's ``earliestCommitToRetain`` too, so readers can tell a cleaned range.

File groups replaced by a completed replacecommit lose all their files once the replacecommit is older than the
retained window (``KEEP_LATEST_COMMITS``; until then their last slice stays) or at once
(``KEEP_LATEST_FILE_VERSIONS``, as in Java; the earliest retained instant moves past the replacecommit then). Never
deleted: the latest slice of a live group, any slice holding a file a savepoint lists (or, for a savepoint being
taken, a slice live as of its instant), anything of a pending instant. The earliest retained instant never moves
back in time: slices older than the previous clean's window are gone already.

Timeline: ``C.clean.requested`` (``HoodieCleanerPlan``) -> ``C.clean.inflight`` (the same plan) -> the files are
deleted -> ``C.clean`` (``HoodieCleanMetadata``). A clean that dies midway stays pending; the next write or service
run (``Table.rollback_failed()``) finishes it from its plan (:func:`resume_clean`): deleting is idempotent.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tablecore.format.file_view import TableFiles, latest_file_slices, list_table_files
from tablecore.format.instant import Action, Instant, State
from tablecore.format.instant_avro import decode_instant_avro
from tablecore.format.service_metadata import (
    clean_metadata,
    cleaner_plan,
    read_cleaner_plan_files,
)
from tablecore.format.timeline import Timeline
from tablecore.results import CleanResult
from tablecore.services.savepoint import protected_files
from tablecore.transaction import Transaction

if TYPE_CHECKING:
    from tablecore.context import TableContext
    from tablecore.io import FileIO

logger = logging.getLogger(__name__)

PolicyName = Literal["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"]
KEEP_LATEST_COMMITS: PolicyName = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS: PolicyName = "KEEP_LATEST_FILE_VERSIONS"
DEFAULT_RETAIN_COMMITS = 10
SliceKey = tuple[str, str, str]
"""(partition, fileId, base instant) of a file slice."""


@dataclass(frozen=True)
class CleanPolicy:
    """A cleaning policy and how much it retains."""

    name: PolicyName
    retain: int

    @classmethod
    def of(cls, retain_commits: int | None = None, retain_file_versions: int | None = None) -> CleanPolicy:
        """The policy the arguments of ``Table.clean`` ask for (default: keep the latest 10 commits).

        Raises:
            ValueError: both or a value below 1 given.
        """
        if retain_commits is not None and retain_file_versions is not None:
            raise ValueError("give retain_commits or retain_file_versions, not both")
        if retain_file_versions is not None:
            if retain_file_versions < 1:
                raise ValueError(f"retain_file_versions must be at least 1, got {retain_file_versions}")
            return cls(KEEP_LATEST_FILE_VERSIONS, retain_file_versions)
        n = DEFAULT_RETAIN_COMMITS if retain_commits is None else retain_commits
        if n < 1:
            raise ValueError(f"retain_commits must be at least 1, got {n}")
        return cls(KEEP_LATEST_COMMITS, n)


@dataclass(frozen=True)
class CleanPlan:
    """What one clean deletes, and the earliest write instant whose snapshot stays complete."""

    policy: CleanPolicy
    earliest_retained: tuple[str, str]  # (time, action)
    last_completed: str
    files: dict[str, tuple[str, ...]]  # partition -> full paths

    @property
    def file_count(self) -> int:
        """How many files the plan deletes."""
        return sum(len(v) for v in self.files.values())

    def to_avro(self) -> bytes:
        """The ``HoodieCleanerPlan`` of the requested and inflight files."""
        return cleaner_plan(self.earliest_retained, self.last_completed, self.policy.name, self.files)


def committed_slices(files: TableFiles, timeline: Timeline) -> dict[SliceKey, list[tuple[str, str]]]:
    """Every committed file slice (its base instant is a completed write, or older than the active timeline) with
    its files as (partition, full path). Slices of pending or failed instants are left out: never cleaned."""
    completed = {i.time for i in timeline.completed_writes()}
    first = timeline.first_instant_time()
    on_timeline = {i.time for i in timeline.files}

    def committed(instant: str) -> bool:
        return instant in completed or (first is not None and instant < first and instant not in on_timeline)

    out: dict[SliceKey, list[tuple[str, str]]] = {}
    for b in files.bases:
        if committed(b.instant):
            out.setdefault((b.partition, b.file_id, b.instant), []).append((b.partition, b.path))
    for lg in files.logs:
        if committed(lg.base_instant):
            out.setdefault((lg.partition, lg.file_id, lg.base_instant), []).append((lg.partition, lg.path))
    for c in files.cdc:  # a CDC log file goes with the base file its commit wrote
        if (c.partition, c.file_id, c.instant) in out:
            out[(c.partition, c.file_id, c.instant)].append((c.partition, c.path))
    return out


def slices_as_of(files: TableFiles, timeline: Timeline, instant: str | None) -> set[SliceKey]:
    """The slices a snapshot read as of ``instant`` (None: the latest) uses."""
    return {(s.partition, s.file_id, s.base_instant) for s in latest_file_slices(files, timeline, as_of=instant)}


def plan_clean(timeline: Timeline, files: TableFiles, policy: CleanPolicy,
               protected: Iterable[tuple[str, str]] = ()) -> CleanPlan | None:
    """The files a clean under ``policy`` deletes; None if there is nothing to delete.

    Args:
        timeline: the active timeline.
        files: a listing of the whole table.
        policy: what to retain.
        protected: (partition, file name) of files that must stay (savepoints); their whole slices stay.
    """
    writes = timeline.completed_writes()
    if not writes:
        return None
    slices = committed_slices(files, timeline)
    names = set(protected)
    keep = {k for k, fs in slices.items() if any((p, posixpath.basename(path)) in names for p, path in fs)}
    keep |= slices_as_of(files, timeline, None)  # never the latest slice of a live group
    if policy.name == KEEP_LATEST_COMMITS:
        window = writes[-policy.retain:]
        for w in window:
            keep |= slices_as_of(files, timeline, w.time)
        earliest = window[0]
        # a group replaced inside the window keeps its last slice until the replacecommit leaves the window
        newest: dict[tuple[str, str], str] = {}
        for p, fid, base in slices:
            newest[(p, fid)] = max(base, newest.get((p, fid), base))
        for r in writes:
            if r.action is Action.REPLACE_COMMIT and r.time >= earliest.time:
                for p, ids in (timeline.metadata(r).replaced_file_ids or {}).items():
                    keep.update((p, fid, newest[(p, fid)]) for fid in ids if (p, fid) in newest)
    else:
        replaced = timeline.replaced_file_groups()
        by_group: dict[tuple[str, str], list[str]] = {}
        for p, fid, base in slices:
            by_group.setdefault((p, fid), []).append(base)
        for (p, fid), bases in by_group.items():
            if (p, fid) not in replaced:
                keep.update((p, fid, b) for b in sorted(bases, reverse=True)[:policy.retain])
        earliest = writes[-1]
        for w in reversed(writes):  # the oldest write from which on every snapshot is complete
            if not slices_as_of(files, timeline, w.time) <= keep:
                break
            earliest = w
    previous = timeline.earliest_retained()
    earliest_time, earliest_action = earliest.time, earliest.action.value
    if previous is not None and previous > earliest_time:
        # an earlier clean (with a larger window or another policy) already removed what is older
        earliest_time = previous
        earliest_action = next((w.action.value for w in writes if w.time == previous), earliest_action)
    doomed: dict[str, list[str]] = {}
    for key, fs in slices.items():
        if key not in keep:
            for p, path in fs:
                doomed.setdefault(p, []).append(path)
    if not doomed:
        return None
    return CleanPlan(policy, (earliest_time, earliest_action), writes[-1].time,
                     {p: tuple(sorted(v)) for p, v in sorted(doomed.items())})


def clean(ctx: TableContext, policy: CleanPolicy) -> CleanResult | None:
    """Plan and run one clean; None (and no instant written) when there is nothing to delete."""
    protocol, io = ctx.meta, ctx.io
    timeline = protocol.load_timeline()
    files = list_table_files(io)
    protected = protected_files(io, timeline, files)
    plan = plan_clean(timeline, files, policy, protected)
    if plan is None:
        logger.info("clean (%s %d): nothing to delete", policy.name, policy.retain)
        return None
    started = time.monotonic()
    with Transaction(ctx, Action.CLEAN, plan=plan.to_avro(), on_failure="keep") as tx:
        # a savepoint taken while we planned must keep its files: plan again with it
        now = protocol.load_timeline()
        if _savepoints(now) != _savepoints(timeline):
            plan = plan_clean(now, files, policy, protected_files(io, now, files))
            if plan is None:
                tx.discard()
                return None
            protocol.transition(tx.instant, State.REQUESTED, plan.to_avro())
        tx.mark_inflight(plan.to_avro())
        return _execute(io, tx, plan.files, plan.earliest_retained[0], plan.last_completed, plan.policy.name,
                        started)


def _savepoints(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline.instants() if i.action is Action.SAVEPOINT]


def _execute(io: FileIO, tx: Transaction, files: Mapping[str, Sequence[str]], earliest: str, last_completed: str,
             policy: str, started: float) -> CleanResult:
    """Delete the planned files (idempotent) and complete the clean instant."""
    instant = tx.instant
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for partition, paths in files.items():
        for path in paths:
            # resolve by partition and name: plans written elsewhere (Java: URIs) name the same files
            name = posixpath.basename(path)
            target = io.join(partition, name) if partition else io.join(name)
            try:
                io.delete(target)
            except OSError as e:
                logger.warning("clean %s could not delete %s: %s", instant.time, target, e)
                failed.setdefault(partition, []).append(target)
                continue
            deleted.setdefault(partition, []).append(target)
    elapsed = int((time.monotonic() - started) * 1000)
    meta = clean_metadata(instant.time, elapsed, earliest, last_completed, policy, deleted, failed)
    tx.publish(meta)
    count = sum(len(v) for v in deleted.values())
    logger.info("clean %s (%s): deleted %d files, earliest retained instant %s", instant.time, policy, count, earliest)
    return CleanResult(instant=instant.time, files_deleted=count, earliest_retained=earliest)


def resume_clean(ctx: TableContext, instant: Instant) -> CleanResult:
    """Finish a pending clean whose process died: delete what is left of its plan and complete it."""
    protocol, io = ctx.meta, ctx.io
    started = time.monotonic()
    with Transaction.resume(ctx, instant) as tx:
        data = protocol.read_plan(instant)
        record = decode_instant_avro(data, "cleaner_plan")
        files = read_cleaner_plan_files(data)
        retained = record.get("earliestInstantToRetain") or {}
        earliest = str(retained.get("timestamp") or "")
        if instant.state is State.REQUESTED:
            tx.mark_inflight(data)
        logger.info("resuming clean %s", instant.time)
        return _execute(io, tx, files, earliest, str(record.get("lastCompletedCommitTimestamp") or ""),
                        str(record.get("policy") or KEEP_LATEST_COMMITS), started)
