"""``Transaction``: one instant of a table, from its start to its publish — the only way anything is committed.

```
Transaction(ctx, action, plan=...)      with tx:  -> begin(): T.<action>.requested (create-if-absent) + heartbeat
tx.mark_inflight(content)                          T.<action>.inflight (planned file groups, or a service plan)
   ... the engine writes files of T (write_batch) / a service deletes files ...
tx.publish(metadata, ...)                          under the commit lock: conflict check, then the completed file
                                                   written create-if-absent  <- THE publish (CommitProtocol.complete)
an exception before publish                        on_failure="rollback": every file of T deleted, T forgotten;
                                                   on_failure="keep": T stays pending for the next run to finish
```

Every write (upsert, insert, delete, bulk insert, insert overwrite, staged commits), compaction, clustering, clean,
rollback, restore and savepoint publishes through :meth:`Transaction.publish`; nothing else writes a completed
instant file. :func:`write_batch` is the write path (DESIGN §2.3) on top of it: the engine plans and writes the files,
the transaction records them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tablecore.arrow_upsert import plan_arrow_write
from tablecore.arrow_writer import is_arrow_write
from tablecore.commit import Heartbeat, KeyCheck, StagedRecord
from tablecore.exceptions import CommitConflictError, ConfigError
from tablecore.format.avro_schema import canonical_json
from tablecore.format.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat, placeholder_inflight
from tablecore.format.instant import Action, Instant, State
from tablecore.results import CommitResult
from tablecore.tasks import key_check

if TYPE_CHECKING:
    from types import TracebackType

    from tablecore.context import TableContext
    from tablecore.engine import Operation, PlannedWrite, WritePart

logger = logging.getLogger(__name__)

OnFailure = Literal["rollback", "keep"]
KEY_CLASH_SAMPLE = 5  # clashing keys named in a key conflict (a sample: only it reaches the driver)


class Transaction:
    """Owns one instant: starts it, moves it inflight, publishes it, or rolls it back on failure.

    Args:
        ctx: the table.
        action: the timeline action of the instant.
        plan: the content of the requested file (a service's Avro plan; empty for writes).
        on_failure: ``rollback`` (writes, compaction, clustering: delete what the instant wrote) or ``keep`` (clean,
            restore, rollback: roll forward — the next run finishes the pending instant from its plan).
    """

    def __init__(self, ctx: TableContext, action: Action, *, plan: bytes = b"",
                 on_failure: OnFailure = "rollback") -> None:
        self.ctx = ctx
        self.action = action
        self.plan = plan
        self.on_failure = on_failure
        self._instant: Instant | None = None
        self._heartbeat: Heartbeat | None = None
        self._finished = False

    @classmethod
    def resume(cls, ctx: TableContext, instant: Instant, *, on_failure: OnFailure = "keep",
               heartbeat: bool = True) -> Transaction:
        """A transaction over an instant that already exists (a staged commit to publish or abort, a pending service
        to finish, a savepoint named after the instant it pins). With ``heartbeat`` it says the instant is alive."""
        tx = cls(ctx, instant.action, on_failure=on_failure)
        tx._instant = instant
        if heartbeat:
            tx._heartbeat = Heartbeat(ctx.io, instant.time)
            tx._heartbeat.start()
        return tx

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    @property
    def instant(self) -> Instant:
        """The instant in its latest state."""
        if self._instant is None:
            raise RuntimeError("the transaction has not begun")
        return self._instant

    def begin(self) -> Instant:
        """Create a new, unique requested instant (with the plan) and start its heartbeat."""
        self.ctx.meta.check_version()
        if not self.ctx.config.populate_meta_fields:
            raise ConfigError("this table has no meta fields (hoodie.populate.meta.fields=false): lakegate reads it "
                              "but writes tables with meta fields only: nothing was written")
        self.ctx.disable_metadata_table()
        self._instant, self._heartbeat = self.ctx.meta.start(self.action, self.plan)
        return self._instant

    def mark_inflight(self, content: bytes | CommitMetadata = b"") -> Instant:
        """Move the instant to inflight with ``content`` (planned file groups, or the service plan)."""
        if isinstance(content, CommitMetadata):
            self._instant = self.ctx.meta.inflight(self.instant, content)
        else:
            self._instant = self.ctx.meta.transition(self.instant, State.INFLIGHT, content)
        return self._instant

    def publish(self, metadata: CommitMetadata | bytes, *, base_instant: str | None = None,
                pending_at_start: Sequence[str] = (), check_keys: bool = False) -> None:
        """Publish the instant: under the commit lock, check that no write that completed since ``base_instant`` (or
        was pending then) touched the same file groups, and write the completed instant file create-if-absent.

        Commit metadata (writes, compaction, clustering) is checked for conflicts; a service's Avro metadata (clean,
        rollback, restore, savepoint) is not: it touches no file group. With ``check_keys`` (writes), the keys this
        instant inserted are also checked against those the concurrent writes inserted into the same partitions
        (:mod:`tablecore.tasks.key_check`): the same new key inserted by both is a conflict, not a duplicate.

        Raises:
            CommitConflictError: a conflicting write completed meanwhile.
            LockTimeoutError: the commit lock could not be acquired.
            StagedCommitError: the instant is already completed.
        """
        keys: KeyCheck | None = None
        if isinstance(metadata, CommitMetadata):
            touched: set[tuple[str, str]] | None = metadata.touched_file_ids()
            content = self.ctx.meta.encode_commit(metadata)
            if check_keys:
                keys = self._key_check(metadata)
        else:
            touched, content = None, metadata
        self._instant = self.ctx.meta.complete(self.instant, content, touched=touched, base_instant=base_instant,
                                               pending_at_start=tuple(pending_at_start), key_check=keys,
                                               metadata=metadata if isinstance(metadata, CommitMetadata) else None)
        self._finish()

    def _key_check(self, ours: CommitMetadata) -> KeyCheck | None:
        """The check of this instant's inserted keys against a concurrent write's (None: it inserted nothing)."""
        ctx, instant = self.ctx, self.instant.time
        mine = key_check.stats_insert_partitions(ours.write_stats)
        if not mine or ctx.engine_or_none is None:
            return None
        engine = ctx.engine

        def check(other: Instant, theirs: CommitMetadata) -> None:
            shared = mine & key_check.stats_insert_partitions(theirs.write_stats)
            if not shared:
                return
            left = [f for fs in key_check.insert_files(ctx.io, ours, instant, shared).values() for f in fs]
            right = [f for fs in key_check.insert_files(ctx.io, theirs, other.time, shared).values() for f in fs]
            clash = engine.common_keys(ctx.io, left, right, KEY_CLASH_SAMPLE)
            if clash:
                p, k = clash[0]
                raise CommitConflictError(
                    f"instant {instant} conflicts with {other.action} {other.time}, completed meanwhile: both "
                    f"inserted record key {k!r} in partition {p!r} (into different file groups; "
                    f"{len(clash)}{'+' if len(clash) == KEY_CLASH_SAMPLE else ''} keys clash)")

        return check

    def rollback(self, *, partitions: set[str] | None = None) -> None:
        """Delete everything the pending instant wrote (data files first, then its instant files)."""
        try:
            self.ctx.meta.rollback_pending(self.instant, partitions=partitions)
        finally:
            self._finish()

    def discard(self) -> None:
        """Drop the instant's pending files without rolling anything back (a service that had nothing to do)."""
        self.ctx.meta.forget_instant(self.instant)
        self._finish()

    def keep_pending(self) -> None:
        """Leave the instant pending on purpose (a staged commit waiting for its audit); stop the heartbeat."""
        self._finish(delete_heartbeat=True)

    def _finish(self, *, delete_heartbeat: bool = True) -> None:
        self._finished = True
        if self._heartbeat is not None:
            self._heartbeat.stop(delete=delete_heartbeat)
            self._heartbeat = None

    def __enter__(self) -> Transaction:
        if self._instant is None:
            self.begin()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._finished:
            return
        if exc is not None and self.on_failure == "rollback" and self._instant is not None:
            logger.exception("%s %s failed; rolling back", self.action, self._instant.time, exc_info=exc)
            self.rollback(partitions=None)
            return
        self._finish()


# ---- the write path -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WriteOutcome:
    """A written instant: published (``staged`` None) or left inflight for an audit (``staged``)."""

    result: CommitResult
    staged: StagedRecord | None = None


def write_batch(ctx: TableContext, parts: Sequence[WritePart], operation: Operation, *, stage: bool = False,
                extra_metadata: dict[str, str] | None = None) -> WriteOutcome:
    """Write ``parts`` as one instant: the engine plans (index lookup, file groups) and writes the files; the
    transaction records the plan inflight, removes files of failed task attempts, builds the commit metadata and
    publishes it — or, with ``stage``, leaves the instant inflight with a staged record (write-audit-publish)."""
    timeline = ctx.meta.load_timeline()
    if is_arrow_write(parts):  # Arrow tables are planned and written in this process, without the engine
        planned: PlannedWrite = plan_arrow_write(ctx.io, ctx.config, timeline, parts, operation)
    else:
        planned = ctx.engine.plan_write(ctx.io, ctx.config, timeline, parts, operation)
    try:
        with Transaction(ctx, planned.action) as tx:
            metadata, result = _write_files(ctx, tx, planned, extra_metadata or {})
            if stage:
                record = StagedRecord(
                    instant=tx.instant.time, action=planned.action.value, operation=planned.operation.value,
                    base_instant=planned.base_instant, pending_at_start=planned.pending_at_start,
                    metadata=metadata.to_json(), result=result.__dict__)
                ctx.meta.save_staged(record)
                tx.keep_pending()
                return WriteOutcome(result, record)
            ctx.record_create_schema(metadata.schema)
            tx.publish(metadata, base_instant=planned.base_instant, pending_at_start=planned.pending_at_start,
                       check_keys=True)
            return WriteOutcome(result)
    finally:
        planned.close()


def _write_files(ctx: TableContext, tx: Transaction, planned: PlannedWrite,
                 extra: dict[str, str]) -> tuple[CommitMetadata, CommitResult]:
    meta = ctx.meta
    replaced = planned.replaced
    affected = set(planned.affected)
    tx.mark_inflight(placeholder_inflight(planned.operation.value, affected | set(replaced or {}),
                                          [(g.partition, g.file_id) for g in planned.groups]))
    instant = tx.instant.time
    depth = {p: (p.count("/") + 1 if p else 0) for p in affected}
    meta.ensure_partition_metadata({p for p in affected if p}, instant, depth)
    stats = planned.write(instant)
    keep = {s.file_name for s in stats if s.file_name}
    keep |= {path.rsplit("/", 1)[-1] for s in stats for path in (s.cdc_stats or {})}
    meta.remove_unlisted_files(instant, {s.partition_path for s in stats} | affected, keep)
    by_instant = meta.table_version >= 8  # version 8 names a log file by the delta commit writing it, version 1 up
    planned_logs = {(g.partition, g.file_id, instant if by_instant else g.prev_commit, 1 if by_instant else
                     g.log_version) for g in planned.groups if g.log_version is not None}
    meta.remove_unlisted_logs(instant, planned_logs, keep)
    meta.remove_temp(instant)
    metadata = CommitMetadata(operation_type=planned.operation.value, write_stats=tuple(stats),
                              extra_metadata={SCHEMA_KEY: canonical_json(planned.table_avro), **extra},
                              replaced_file_ids=replaced)
    return metadata, result_of(instant, planned.operation.value, stats, replaced, planned.input_rows)


def result_of(instant: str, operation: str, stats: Sequence[WriteStat], replaced: dict[str, tuple[str, ...]] | None,
              input_rows: int = 0, *, inserts: bool = True) -> CommitResult:
    """The counts of a write (or a compaction, ``inserts=False``) from its write stats."""
    return CommitResult(
        instant=instant, operation=operation,
        inserted=sum(s.num_inserts for s in stats) if inserts else 0,
        updated=sum(s.num_update_writes for s in stats), deleted=sum(s.num_deletes for s in stats),
        files_written=len(stats), bytes_written=sum(s.total_write_bytes for s in stats),
        replaced_file_groups=sum(len(v) for v in (replaced or {}).values()),
        input_rows=input_rows,
    )
