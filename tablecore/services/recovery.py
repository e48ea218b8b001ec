"""Recovery of what dead processes left pending: writes and services rolled back or finished (the first step of
every write, :meth:`tablecore.table.Table.rollback_failed`)."""

from __future__ import annotations

import logging

from tablecore.commit import writer_alive
from tablecore.context import TableContext
from tablecore.format.instant import Action, Instant, State
from tablecore.services.clean import resume_clean
from tablecore.services.rollback import resume_rollbacks, rollback_instant
from tablecore.services.savepoint import discard_pending_savepoint, resume_restore

logger = logging.getLogger(__name__)


def rollback_failed(ctx: TableContext) -> list[str]:
    """Roll back pending instants whose writer is gone (crashed or killed), recording a ``rollback`` instant for
    each, and finish rollbacks, cleans and restores that were killed midway; staged instants are kept.

    Returns:
        The rolled-back instant times.
    """
    done = resume_rollbacks(ctx)
    tl = ctx.meta.load_timeline()
    staged = set(ctx.meta.staged_instants())
    for inst in tl.pending():
        if inst.time in staged or inst.state is State.COMPLETED:
            continue
        if inst.action in (Action.CLEAN, Action.RESTORE, Action.SAVEPOINT):
            if not writer_alive(ctx.io, inst.time):
                done.extend(_finish_pending_service(ctx, inst))
            continue
        if not (inst.action.is_write or inst.action in (Action.COMPACTION, Action.CLUSTERING)):
            continue
        if writer_alive(ctx.io, inst.time):
            continue
        rollback_instant(ctx, inst.time)
        done.append(inst.time)
    if done:
        logger.info("rolled back failed instants %s", ", ".join(done))
    return done


def _finish_pending_service(ctx: TableContext, inst: Instant) -> list[str]:
    """Finish a clean or restore whose process died (from its plan); drop an unfinished savepoint. Returns the
    instants a finished restore rolled back."""
    if inst.action is Action.CLEAN:
        resume_clean(ctx, inst)
        return []
    if inst.action is Action.RESTORE:
        return resume_restore(ctx, inst)
    discard_pending_savepoint(ctx, inst)
    return []
