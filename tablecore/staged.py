"""``StagedCommit``: a written instant left inflight for an audit (the engine half of write-audit-publish)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from tablecore.commit import StagedRecord
from tablecore.exceptions import StagedCommitError
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.instant import Action, Instant, State
from tablecore.format.timeline import Timeline
from tablecore.read_planning import plan_incremental, plan_snapshot
from tablecore.results import CommitResult
from tablecore.transaction import Transaction

if TYPE_CHECKING:
    from tablecore.context import TableContext
    from tablecore.spark.frames import DataFrame, StructType

logger = logging.getLogger(__name__)


class StagedCommit:
    """An instant whose files are written but not published. Readers do not see it until :meth:`publish`.

    Obtain one from ``tx.stage()`` (or a write with ``stage=True``) or from :meth:`Table.staged` (also in another
    process). Its views are frames of the table's engine (Spark DataFrames).
    """

    def __init__(self, ctx: TableContext, record: StagedRecord) -> None:
        self.ctx = ctx
        self.record = record
        self._done = False
        self.published_behind: str | None = None
        """After :meth:`publish` on a table without completion times (version 6): the newest write that had
        completed with a later instant time, if any (incremental consumers that read up to it miss this instant)."""

    @property
    def instant(self) -> str:
        """The staged instant time."""
        return self.record.instant

    @property
    def operation(self) -> str:
        """The operation type (``UPSERT``...)."""
        return self.record.operation

    @property
    def result(self) -> CommitResult:
        """The counts of the write."""
        return CommitResult(**self.record.result)

    @property
    def metadata(self) -> CommitMetadata:
        """The commit metadata that publish will write."""
        return CommitMetadata.from_json(self.record.metadata)

    def _instant(self) -> Instant:
        return Instant(self.record.instant, Action(self.record.action), State.INFLIGHT)

    def _check_open(self) -> None:
        if self._done:
            raise StagedCommitError(f"staged commit {self.instant} was already published or aborted")
        if self.ctx.meta.load_staged(self.instant) is None:
            raise StagedCommitError(f"staged commit {self.instant} no longer exists (published or aborted elsewhere)")

    # views for the audit -----------------------------------------------------------------------------------------
    def _timeline_after(self) -> Timeline:
        """The current timeline with this instant completed (nothing is written: a view for the audit); with
        completion times, it completes after everything on the timeline, as a publish now would."""
        timeline = self.ctx.meta.load_timeline()
        completion = timeline.next_completion_time() if self.ctx.config.completion_times else None
        return timeline.with_completed(self._instant(), self.metadata, completion)

    def _schema(self) -> str:
        schema = self.metadata.schema
        if schema is None:
            raise StagedCommitError(f"staged commit {self.instant} records no table schema")
        return schema

    def view_schema(self) -> StructType:
        """The schema of :meth:`changes` and :meth:`snapshot` (meta columns, then the staged table schema; a Spark
        ``StructType``), without planning a read."""
        return cast("StructType", self.ctx.engine.frame_schema(self._schema(), with_meta=True))

    def changes(self) -> DataFrame:
        """The rows this instant writes (inserted and updated records, with meta columns)."""
        timeline = self._timeline_after()
        if self.ctx.config.completion_times:  # the range of its (provisional) completion
            done = sorted(i.completed_at for i in timeline.completed_writes())
            start, end = (done[-2] if len(done) > 1 else None), done[-1]
        else:
            earlier = [i.time for i in timeline.completed_writes() if i.time < self.instant]
            start, end = (earlier[-1] if earlier else None), self.instant
        plan = plan_incremental(self.ctx.io, timeline, self.ctx.config, start=start, end=end)
        df = cast("DataFrame", self.ctx.engine.read(self.ctx.io, plan))
        return df.where(df["_hoodie_commit_time"] == self.instant)

    def snapshot(self) -> DataFrame:
        """The table as it will be after publish."""
        plan = plan_snapshot(self.ctx.io, self._timeline_after(), self.ctx.config)
        return cast("DataFrame", self.ctx.engine.read(self.ctx.io, plan))

    def snapshot_count(self) -> int:
        """The exact number of rows of :meth:`snapshot`, without reading them (see :meth:`Table.count`)."""
        plan = plan_snapshot(self.ctx.io, self._timeline_after(), self.ctx.config)
        return self.ctx.engine.count(self.ctx.io, plan)

    def before(self) -> DataFrame:
        """The table as of the latest completed instant (what readers see now); before the table's first commit, no
        rows with the columns the staged commit writes (so a query over it resolves its columns)."""
        timeline = self.ctx.meta.load_timeline()
        if timeline.latest_completed() is None and self.metadata.schema is not None:
            return cast("DataFrame", self.ctx.engine.empty(self.metadata.schema))
        plan = plan_snapshot(self.ctx.io, timeline, self.ctx.config)
        return cast("DataFrame", self.ctx.engine.read(self.ctx.io, plan))

    # transitions -------------------------------------------------------------------------------------------------
    def publish(self, extra_metadata: dict[str, str] | None = None) -> CommitResult:
        """Complete the instant atomically; raises :class:`CommitConflictError` if a commit that completed meanwhile
        touched the same file groups (the staged instant is left as it was: abort it, or audit again)."""
        self._check_open()
        meta = self.metadata.with_extra(extra_metadata or {})
        tx = Transaction.resume(self.ctx, self._instant(), on_failure="keep", heartbeat=False)
        self.ctx.record_create_schema(meta.schema)
        # version 6 only (one more listing): the writes of later instant times already completed
        later = [] if self.ctx.config.completion_times else \
            [i.time for i in self.ctx.meta.load_timeline().completed_writes() if i.time > self.instant]
        tx.publish(meta, base_instant=self.record.base_instant, pending_at_start=self.record.pending_at_start,
                   check_keys=True)
        if later:
            self.published_behind = later[-1]
            logger.warning(
                "staged instant %s was published after the later instant %s had completed: on this table version "
                "(%d) incremental reads select by instant time, so a consumer that has read up to %s will not see "
                "its rows; tables of version 8 (lakegate table upgrade) select by completion time and do not miss it",
                self.instant, later[-1], self.ctx.config.table_version, later[-1])
        self.ctx.meta.drop_staged(self.instant)
        self._done = True
        logger.info("published staged %s", self.instant)
        return self.result

    def abort(self) -> None:
        """Discard the staged instant and every file it wrote."""
        self._check_open()
        Transaction.resume(self.ctx, self._instant(), heartbeat=False).rollback()
        self._done = True
        logger.info("aborted staged %s", self.instant)

    def __repr__(self) -> str:
        return f"StagedCommit(instant={self.instant!r}, operation={self.operation!r})"
