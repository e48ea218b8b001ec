"""Savepoints and restore (Hudi's ``savepoint`` and ``restore`` actions, format reference §2 and §9).

A savepoint pins the snapshot as of a completed write ``T``: ``T.savepoint.inflight`` (empty), then ``T.savepoint``
(``HoodieSavepointMetadata``) listing, per partition, the names of the base and log files of every file slice live
as of ``T``. Cleaning never deletes those files (nor the rest of their slices), time travel to ``T`` stays possible
after the surrounding range was cleaned, and archival stops before the oldest savepoint.

Restore to a savepoint ``S`` rolls back, newest first, every write after ``S`` (completed, pending or staged, and
pending compactions) with :func:`tablecore.services.rollback.rollback_instant`:
``R.restore.requested`` (``HoodieRestorePlan``) -> ``R.restore.inflight`` (the same plan) -> the rollbacks ->
``R.restore`` (``HoodieRestoreMetadata``). The rollbacks are not recorded as ``rollback`` instants of their own;
the restore metadata holds them. A restore that dies midway stays pending and is finished by the next write or
service run (:func:`resume_restore`).
"""

from __future__ import annotations

import getpass
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tablecore.commit import writer_alive
from tablecore.exceptions import CleanedRangeError, CommitConflictError, InstantNotFoundError, RollbackError
from tablecore.format.file_view import TableFiles, latest_file_slices, list_table_files
from tablecore.format.instant import Action, Instant, State
from tablecore.format.instant_avro import decode_instant_avro
from tablecore.format.service_metadata import (
    read_savepoint_files,
    restore_metadata,
    restore_plan,
    rollback_metadata_record,
    savepoint_metadata,
)
from tablecore.format.timeline import Timeline
from tablecore.transaction import Transaction

if TYPE_CHECKING:
    from tablecore.context import TableContext
    from tablecore.io import FileIO
    from tablecore.services.rollback import RollbackResult

logger = logging.getLogger(__name__)

_RESTORABLE = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION, Action.LOG_COMPACTION)


def snapshot_files(files: TableFiles, timeline: Timeline, instant: str) -> dict[str, list[str]]:
    """Partition -> names of the base and log files of every file slice live as of ``instant``."""
    out: dict[str, list[str]] = {}
    for s in latest_file_slices(files, timeline, as_of=instant):
        names = out.setdefault(s.partition, [])
        if s.base is not None:
            names.append(s.base.name)
        names.extend(lg.name for lg in s.logs)
    return {p: sorted(v) for p, v in sorted(out.items())}


def protected_files(io: FileIO, timeline: Timeline, files: TableFiles) -> set[tuple[str, str]]:
    """(partition, file name) of every file a savepoint keeps: the files completed savepoints list, and the files of
    the slices live as of a savepoint being taken (its metadata is not written yet)."""
    out: set[tuple[str, str]] = set()
    for sp in (i for i in timeline.instants() if i.action is Action.SAVEPOINT):
        listed: dict[str, list[str]] | None = None
        if sp.is_completed:
            try:
                listed = read_savepoint_files(io.read_bytes(f"{timeline.hoodie_dir}/{sp.file_name}"))
            except (OSError, ValueError) as e:
                logger.warning("cannot read savepoint %s (%s); keeping its snapshot as of now", sp.time, e)
        if listed is None:
            listed = snapshot_files(files, timeline, sp.time)
        out.update((p, name) for p, names in listed.items() for name in names)
    return out


def _check_readable(timeline: Timeline, instant: str) -> None:
    earliest = timeline.earliest_retained()
    if earliest is not None and instant < earliest and instant not in timeline.savepoint_times():
        raise CleanedRangeError(
            f"cannot savepoint {instant}: a clean removed file slices of its snapshot; the earliest instant that can "
            f"be savepointed is {earliest}", instant=instant, earliest_readable=earliest)


def savepoint(ctx: TableContext, instant: str | None = None, *, comments: str = "") -> str:
    """Savepoint the snapshot as of ``instant`` (default: the latest completed write); returns the instant.

    Savepointing an instant twice is a no-op.

    Raises:
        InstantNotFoundError: ``instant`` is not a completed write (or the table has none).
        CleanedRangeError: a clean already removed file slices of that snapshot.
    """
    protocol, io = ctx.meta, ctx.io
    timeline = protocol.load_timeline()
    if instant is None:
        latest = timeline.latest_completed()
        if latest is None:
            raise InstantNotFoundError("nothing to savepoint: the table has no completed commit")
        instant = latest.time
    elif not timeline.is_completed_write(instant):
        raise InstantNotFoundError(f"cannot savepoint {instant!r}: it is not a completed commit of this table")
    if instant in timeline.savepoint_times():
        logger.info("instant %s is already savepointed", instant)
        return instant
    _check_readable(timeline, instant)
    # a savepoint has no requested file: its instant is the time of the write it pins
    with Transaction.resume(ctx, Instant(instant, Action.SAVEPOINT, State.REQUESTED)) as tx:
        inflight = tx.mark_inflight()
        # a clean that started meanwhile either shows in the timeline now or sees our inflight savepoint
        timeline = protocol.load_timeline()
        try:
            _check_readable(timeline, instant)
        except CleanedRangeError:
            protocol.delete_instant_file(inflight)
            raise
        by_partition = snapshot_files(list_table_files(io), timeline, instant)
        tx.publish(savepoint_metadata(_user(), int(time.time() * 1000), comments, by_partition))
    logger.info("savepointed %s (%d files)", instant, sum(len(v) for v in by_partition.values()))
    return instant


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no user name in some containers
        return "lakegate"


def savepoints(ctx: TableContext) -> list[str]:
    """The savepointed instants, oldest first."""
    return ctx.meta.load_timeline().savepoint_times()


def delete_savepoint(ctx: TableContext, instant: str) -> None:
    """Remove the savepoint of ``instant``: its files become cleanable again.

    Raises:
        InstantNotFoundError: ``instant`` is not savepointed.
    """
    timeline = ctx.meta.load_timeline()
    if instant not in timeline.savepoint_times():
        raise InstantNotFoundError(f"{instant!r} is not a savepoint of this table "
                                   f"(savepoints: {', '.join(timeline.savepoint_times()) or 'none'})")
    done = Instant(instant, Action.SAVEPOINT, State.COMPLETED)
    ctx.meta.delete_instant_file(done)
    ctx.meta.delete_instant_file(done.with_state(State.INFLIGHT))
    logger.info("deleted savepoint %s", instant)


def discard_pending_savepoint(ctx: TableContext, instant: Instant) -> None:
    """Drop the inflight file of a savepoint whose process died before completing it."""
    ctx.meta.delete_instant_file(instant.with_state(State.INFLIGHT))
    logger.info("discarded the unfinished savepoint %s", instant.time)


# ---- restore ---------------------------------------------------------------------------------------------------------

def _action_name(instant: Instant) -> str:
    return instant.action.value


def restore(ctx: TableContext, instant: str) -> list[str]:
    """Roll the table back to the savepoint ``instant``; returns the rolled-back instant times, newest first.

    Raises:
        InstantNotFoundError: ``instant`` is not savepointed.
        RollbackError: a later instant is savepointed too (delete that savepoint first).
        CommitConflictError: a writer is still running on an instant after ``instant``.
    """
    protocol, io = ctx.meta, ctx.io
    timeline = protocol.load_timeline()
    savepointed = timeline.savepoint_times()
    if instant not in savepointed:
        raise InstantNotFoundError(f"cannot restore to {instant!r}: it is not a savepoint of this table "
                                   f"(savepoints: {', '.join(savepointed) or 'none'})")
    later = [t for t in savepointed if t > instant]
    if later:
        raise RollbackError(f"cannot restore to {instant}: later instants are savepointed ({', '.join(later)}); "
                            f"delete those savepoints first")
    targets = [i for i in reversed(timeline.instants()) if i.time > instant and i.action in _RESTORABLE]
    staged = set(protocol.staged_instants())
    running = [i.time for i in targets if not i.is_completed and i.time not in staged and writer_alive(io, i.time)]
    if running:
        raise CommitConflictError(f"cannot restore to {instant}: writers are still running on "
                                  f"{', '.join(running)}")
    if not targets:
        logger.info("restore to %s: nothing after it to roll back", instant)
        return []
    for t in targets:
        if t.time in staged:
            logger.warning("restore to %s discards the staged commit %s", instant, t.time)
    plan = restore_plan([(i.time, _action_name(i)) for i in targets], savepoint_to_restore=instant)
    started = time.monotonic()
    with Transaction(ctx, Action.RESTORE, plan=plan, on_failure="keep") as tx:
        tx.mark_inflight(plan)
        times = [i.time for i in targets]
        records = _roll_back(ctx, times)
        _complete(tx, [(i.time, _action_name(i)) for i in targets], records, started)
    logger.info("restored to savepoint %s with %s: rolled back %s", instant, tx.instant.time, ", ".join(times))
    return times


def _rollback_record(result: RollbackResult) -> dict[str, Any]:
    record = rollback_metadata_record(result.instant, 0, [(result.rolled_back, result.action)], {})
    record["totalFilesDeleted"] = result.files_deleted
    return record


def _roll_back(ctx: TableContext, times: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Roll back ``times`` newest first (those still on the timeline); their rollback metadata records."""
    from tablecore.services.rollback import rollback_instant

    out: dict[str, list[dict[str, Any]]] = {}
    for t in times:
        live = {i.time for i in ctx.meta.load_timeline().instants() if i.action in _RESTORABLE}
        if t not in live:
            out[t] = []
            continue
        out[t] = [_rollback_record(rollback_instant(ctx, t, record=False))]
    return out


def _complete(tx: Transaction, targets: Sequence[tuple[str, str]], records: dict[str, list[dict[str, Any]]],
              started: float) -> None:
    elapsed = int((time.monotonic() - started) * 1000)
    tx.publish(restore_metadata(tx.instant.time, elapsed, [t for t, _ in targets], records,
                                restore_instant_info=list(targets)))


def resume_restore(ctx: TableContext, instant: Instant) -> list[str]:
    """Finish a pending restore whose process died: roll back what its plan lists and is still on the timeline,
    then complete it. Returns the instants rolled back now."""
    protocol = ctx.meta
    started = time.monotonic()
    with Transaction.resume(ctx, instant) as tx:
        data = protocol.read_plan(instant)
        plan = decode_instant_avro(data, "restore_plan")
        targets = [(i["commitTime"], i["action"]) for i in plan["instantsToRollback"]]
        if instant.state is State.REQUESTED:
            tx.mark_inflight(data)
        logger.info("resuming restore %s to savepoint %s", instant.time, plan.get("savepointToRestoreTimestamp"))
        records = _roll_back(ctx, [t for t, _ in targets])
        _complete(tx, targets, records, started)
    return [t for t, recs in records.items() if recs]
