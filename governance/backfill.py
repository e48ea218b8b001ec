"""Backfills: recompute a date range of a pipeline's target from snapshots of its sources, beside the incremental run.

When business logic changes, ``lakegate pipeline backfill PIPELINE --from 2026-01-01 --to 2026-03-31`` reads the
main table source as a snapshot (its latest data commit when the batch starts), keeps the rows whose
``backfill.range_field`` falls in the range, ``days_per_batch`` days per batch, and sends each batch through the
pipeline's transform (secondary sources read whole), gate and validators into the target, by ``backfill.operation``:
``upsert`` or ``insert_overwrite`` of the partitions the output touches.

- **Beside the incremental pipeline.** A backfill commit carries no checkpoint, so it never moves the incremental
  pipeline's position, nor the ends its secondary sources were read to. Both write the same table under the
  engine's optimistic concurrency: a commit that touched the same file groups (or inserted the same new key) as one
  that completed meanwhile fails its conflict check; the batch is aborted and transformed and written again over
  the new state (:meth:`~governance.pipeline.PipelineRunner.write_batch`). So both finish, and each group holds a
  recomputation from data at least as new as any write before it; with ``merge_mode: EVENT_TIME_ORDERING`` the
  ordering field also keeps an older recomputation from replacing a newer one.
- **Resumable.** Each batch's commit records ``extraMetadata["lakegate.backfill"]`` = the pipeline, the backfill's
  range and the batch's days. A run (again, after a crash) aborts the staged instants a killed run of the same
  backfill left and skips the batches already committed.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from governance.audit import AuditRecord, Decision
from governance.errors import PipelineConfigError, SourceError
from governance.pipeline import PipelineRunner
from governance.source_batch import without_meta
from governance.sources import Batch, TableSource, TableSourceConfig
from tablecore import Table, TableCoreError

__all__ = ["BACKFILL_KEY", "Backfill"]

logger = logging.getLogger(__name__)

BACKFILL_KEY = "lakegate.backfill"
"""The ``extraMetadata`` key of a backfill batch's commit (compact JSON: pipeline, range, the batch's days)."""


class Backfill:
    """One backfill of a pipeline over ``[start, end]`` (dates, both included).

    Args:
        runner: the pipeline's runner (its spec needs a ``backfill:`` section and a table source).
        start / end: the range.

    Raises:
        PipelineConfigError: no ``backfill:`` section, or ``end`` before ``start``.
    """

    def __init__(self, runner: PipelineRunner, start: dt.date, end: dt.date) -> None:
        spec = runner.spec.backfill
        if spec is None:
            raise PipelineConfigError(f"pipeline {runner.spec.name} has no backfill section (backfill: "
                                      "{range_field: dt, operation: upsert | insert_overwrite})")
        if end < start:
            raise PipelineConfigError(f"backfill: --to {end} is before --from {start}")
        assert isinstance(runner.spec.source, TableSourceConfig)  # the spec's validator requires it
        self.runner = runner
        self.spec = spec
        self.start = start
        self.end = end

    @property
    def id(self) -> str:
        """The backfill's name in its commits: ``<from>..<to>``."""
        return f"{self.start}..{self.end}"

    def batches(self) -> list[tuple[dt.date, dt.date]]:
        """The range cut into ``days_per_batch`` spans, in order."""
        out = []
        day = self.start
        step = dt.timedelta(days=self.spec.days_per_batch)
        while day <= self.end:
            last = min(day + step - dt.timedelta(days=1), self.end)
            out.append((day, last))
            day = last + dt.timedelta(days=1)
        return out

    def _entry(self, batch: str) -> dict[str, str]:
        return {BACKFILL_KEY: json.dumps({"pipeline": self.runner.spec.name, "range": self.id, "batch": batch},
                                         sort_keys=True, separators=(",", ":"))}

    def _mine(self, extra: dict[str, str]) -> str | None:
        """The batch (``a..b``) a commit's metadata records for this backfill, else None."""
        text = extra.get(BACKFILL_KEY)
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, dict) and data.get("pipeline") == self.runner.spec.name and data.get("range") == self.id:
            return str(data.get("batch"))
        return None

    def done(self) -> set[str]:
        """The batches (``a..b``) of this backfill already committed to the target."""
        found = set()
        for _, metadata in self.runner.table.commit_history():
            batch = self._mine(metadata.extra_metadata)
            if batch is not None:
                found.add(batch)
        return found

    def recover(self) -> list[str]:
        """Abort the staged instants a killed run of this backfill left; returns them."""
        aborted = []
        for staged in self.runner.table.staged():
            if self._mine(staged.metadata.extra_metadata) is not None:
                staged.abort()
                aborted.append(staged.instant)
                logger.warning("backfill %s of %s: aborted staged instant %s left by an interrupted run", self.id,
                               self.runner.spec.name, staged.instant)
        return aborted

    def run(self, *, max_batches: int | None = None,
            on_batch: Callable[[Batch, AuditRecord], None] | None = None) -> list[AuditRecord]:
        """Write the batches not yet committed, in order (``max_batches`` stops after that many).

        Raises:
            BatchBlockedError: the gate did not publish a batch (whatever ``on_block`` says, a backfill stops there:
                its next run starts at that batch).
            SourceError: the source table cannot be read.
        """
        runner = self.runner
        self.recover()
        gate = runner.gate()
        done = self.done()
        pending = (self._batch(first, last) for first, last in self.batches() if f"{first}..{last}" not in done)

        def write(batch: Batch) -> AuditRecord:
            return runner.write_batch(gate, batch, extra_metadata=self._entry(batch.position["batch"]),
                                      backfill=True)

        stop = set(Decision) - {Decision.PUBLISHED, Decision.QUARANTINED}
        return runner.drive(gate, pending, write, stop=stop, what=f"backfill {self.id} of {runner.spec.name}",
                            limit=max_batches, on_batch=on_batch)

    def _batch(self, first: dt.date, last: dt.date) -> Batch:
        runner = self.runner
        source = runner.spec.source
        assert isinstance(source, TableSourceConfig)
        path = runner.spec.resolve(source.path)
        try:
            table = Table.open(path, spark=runner.spark)
            pending = TableSource(path=table.uri).pending(table, None)
            end_instant = pending[-1][1] if pending else None
            df = table.read(as_of=end_instant) if end_instant else table.read()
        except TableCoreError as e:
            raise SourceError(f"backfill {self.id}: cannot read the source table {path}: {e}") from e
        field = self.spec.range_field
        if field not in df.columns:
            raise SourceError(f"backfill {self.id}: the source table {path} has no column {field!r} "
                              "(backfill.range_field)")
        rows = without_meta(df.where(F.col(field).cast("date").between(F.lit(first), F.lit(last))))
        position: dict[str, Any] = {"backfill": self.id, "batch": f"{first}..{last}"}
        return Batch(df=rows, position=position, description=f"backfill {self.id}: days {first}..{last} of "
                     f"{table.name} as of {end_instant}", end_instant=end_instant)
