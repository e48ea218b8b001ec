"""The write-audit-publish gate: stage a write, audit it while no reader can see it, then publish or block.

``Gate(table, suite, config=..., registry=...).write(batch, checkpoint=...)`` runs, for one batch:

1. **schema**: the batch's columns against the table's registry subject (:mod:`governance.schema_gate`); a refused
   schema writes nothing.
2. **split**: rows failing a quarantine-policy row check are held back (they never reach the table).
3. **stage**: the remaining rows are written as a staged (inflight) instant carrying the source checkpoint.
4. **audit**: the suite (plus the registry's structural and semantic checks) runs over ``{batch}``, ``{changes}``,
   ``{snapshot}`` and ``{before}``.
5. **decide**: ``block`` -> abort the staged instant (or keep it for review, or park the batch's rows in the
   quarantine table and commit only the checkpoint, per ``on_block``); otherwise the held-back rows go to the
   quarantine table and the instant is published with the audit record in its ``extraMetadata``
   (:data:`~governance.audit.AUDIT_KEY`).

Every run proves ``rows_in = published + quarantined + deduplicated + rejected`` from counts taken independently (the
gate's count of the batch, the quarantine split's count, the writer's own count of the rows it received) and
records the four numbers; every run is appended to the audit log with an HTML report. When every row of the batch
goes to the write (nothing can be held back), the gate's count is observed in the job that writes the files, so the
batch is not read once more for it; it stays independent of the writer's count, which another job takes.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from governance.audit import (
    AUDIT_KEY,
    AuditLog,
    AuditRecord,
    CheckVerdict,
    Conservation,
    Decision,
    SchemaDecision,
    SourceLag,
    WriteCounts,
    render_report,
)
from governance.checkpoint import checkpoint_metadata, position_id
from governance.errors import ConservationError
from governance.gate_counts import RowCounter, chained, same_columns, wrote_exactly
from governance.quarantine import QuarantineTable, default_quarantine_path
from governance.schema_gate import CONTROL_COLUMNS, Evolution, check_batch_schema
from governance.source_batch import PartitionLag
from tablecore import CommitConflictError, Operation, StagedCommit, Table, TableCoreError
from tablecore.format.timeline import AUX_DIR
from tablecore.io import LocalFileIO, file_io_for
from tablecore.spark.jvm import recompute_is_cheap
from validators import (
    AuditContext,
    InlinePass,
    LocalSchemas,
    Policy,
    RegistrySchemas,
    SchemaCheck,
    SchemaRef,
    SemanticCheck,
    Suite,
    SuiteResult,
    Verdict,
    render_html,
)
from validators.errors import first_line

if TYPE_CHECKING:
    from schema_registry import RegistryClient

logger = logging.getLogger(__name__)

OPERATIONS = ("upsert", "insert", "bulk_insert", "insert_overwrite", "insert_overwrite_table")
_GATED = {Operation(op.upper()): op for op in OPERATIONS}
"""tablecore operations a gate can run (deletes travel as rows flagged ``_hoodie_is_deleted`` in an upsert)."""


class OnBlock(StrEnum):
    """What happens to a batch the audit blocks."""

    ABORT = "abort"
    """Abort the staged instant; a pipeline stops (its checkpoint stays, so the batch is read again next run)."""
    KEEP = "keep"
    """Keep the staged instant for review (``lakegate wap publish|abort``); a pipeline stops."""
    SKIP = "skip"
    """Abort, park the batch's rows in the quarantine table (status ``blocked``) and commit only the checkpoint, so a
    pipeline goes on; ``lakegate quarantine replay`` re-submits them once fixed."""


class GateConfig(BaseModel):
    """Policy of a gate.

    Attributes:
        subject: the registry subject of the table (default ``<table name>-value`` when a registry is given).
        evolution: ``register`` lets the gate register a new compatible version for a batch whose columns differ;
            ``refuse`` blocks such a batch.
        schema_check: policy of the structural check against the registered version (None: no check).
        semantic_check: policy of the semantic-type check of the registered version (None: no check).
        on_block: see :class:`OnBlock`.
        quarantine_path: the quarantine table (default: ``<table path>_quarantine``).
        audit_dir: the audit folder (default: ``.hoodie/.aux/lakegate`` inside a local table, where Hudi readers do
            not look).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str | None = None
    evolution: Evolution = "refuse"
    schema_check: Policy | None = Policy.BLOCK
    semantic_check: Policy | None = Policy.BLOCK
    on_block: OnBlock = OnBlock.ABORT
    quarantine_path: str | None = None
    audit_dir: str | None = None


def default_audit_dir(table_path: str) -> str:
    """The audit folder of a table unless configured: ``.hoodie/.aux/lakegate`` inside it, on the table's own
    storage (a local path, or the same URI scheme: ``s3://bucket/t/.hoodie/.aux/lakegate``)."""
    io = file_io_for(table_path)
    folder = io.join(AUX_DIR)
    return folder if isinstance(io, LocalFileIO) else io.uri_of(folder)


class Gate:
    """The write-audit-publish gate of one table (see the module docstring).

    Args:
        table: the target table.
        suite: the user's checks (None: only the registry's checks, if any).
        config: the policy.
        registry: a schema registry client; without one there is no schema gate and no registry checks.
        pipeline: the pipeline name recorded with checkpoints and audits.
    """

    def __init__(self, table: Table, suite: Suite | None = None, *, config: GateConfig | None = None,
                 registry: RegistryClient | None = None, pipeline: str | None = None) -> None:
        self.table = table
        self.suite = suite
        self.config = config or GateConfig()
        self.registry = registry
        self.pipeline = pipeline
        self.subject = self.config.subject or (f"{table.name}-value" if registry is not None else None)
        self.audit_log = AuditLog(self.config.audit_dir or default_audit_dir(table.uri))
        self.quarantine = QuarantineTable(self.config.quarantine_path or default_quarantine_path(table.uri),
                                          table.spark)
        base_dir = suite.base_dir if suite is not None else None
        self.schemas = RegistrySchemas(registry, base_dir) if registry is not None else LocalSchemas(base_dir)

    # --- the run -------------------------------------------------------------------------------------------------
    def write(self, batch: DataFrame, *, operation: Operation | str = Operation.UPSERT, checkpoint: Any = None,
              batch_id: str | None = None, extra_metadata: dict[str, str] | None = None,
              dropped: int = 0, lag: Sequence[PartitionLag] | None = None,
              source_commits: int | None = None) -> AuditRecord:
        """Run one batch through the gate; returns its audit record (also in the audit log and, when published, in
        the commit). A blocked batch is a normal outcome (``record.decision``), not an exception.

        Args:
            batch: the rows; a boolean ``_hoodie_is_deleted`` column marks deletes (not audited by row rules).
            operation: the write operation: a :class:`tablecore.Operation` or its name, one of :data:`OPERATIONS`
                (deletes travel as rows flagged ``_hoodie_is_deleted``).
            checkpoint: the source position to commit with the data (pipelines); needs ``pipeline``.
            batch_id: names the batch in quarantine keys (default: the checkpoint, else the run id).
            extra_metadata: more ``extraMetadata`` entries for the commit.
            dropped: rows the caller removed before the gate as stale (a replay's superseded rows): counted in
                ``rows_in`` and ``deduplicated``.
            lag: Kafka sources: where the batch ended in each topic-partition (recorded with its lag).
            source_commits: table sources: how many source commits the batch consumed (recorded).

        Raises:
            ValueError: unknown operation.
            ConservationError: the counts do not add up (the staged instant is aborted first).
            SchemaRegistryError / TableCoreError / ValidatorsError: infrastructure failures (nothing is published).
        """
        audited = self.audit(batch, operation=operation, checkpoint=checkpoint, batch_id=batch_id,
                             extra_metadata=extra_metadata, dropped=dropped, lag=lag, source_commits=source_commits)
        if isinstance(audited, AuditRecord):
            return audited
        return audited.block() if audited.blocked else audited.publish()

    def audit(self, batch: DataFrame, *, operation: Operation | str = Operation.UPSERT, checkpoint: Any = None,
              batch_id: str | None = None, extra_metadata: dict[str, str] | None = None, dropped: int = 0,
              lag: Sequence[PartitionLag] | None = None, split: bool = True,
              source_commits: int | None = None) -> AuditedWrite | AuditRecord:
        """The first half of :meth:`write`: the schema gate, the quarantine split, the staged write and the audit;
        the caller then calls :meth:`AuditedWrite.publish` or :meth:`AuditedWrite.block` (a pipeline writing two
        tables publishes both or neither). Returns the final record when the schema was refused (nothing staged).
        ``split=False`` holds no row back (the caller split the rows already). Arguments as for :meth:`write`.
        """
        op = _gated_operation(operation)
        run = _Run(self, op, checkpoint, batch_id, dropped, lag, source_commits)
        data = batch.select(*[F.col(f"`{c}`") for c in batch.columns
                              if not c.startswith("_hoodie_") or c in CONTROL_COLUMNS])
        # the count, the split, the write and the audit must see the same rows: the batch is cached unless it is a
        # plain deterministic scan of files or local rows, which is cheaper to read again (and which the writer then
        # reads as it is; it cannot tell a cached batch from a costly plan, so it would cache it a second time)
        cache = not recompute_is_cheap(data)
        if cache:
            data = data.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            out = run.audit(data, extra_metadata or {}, split=split)
        except BaseException:
            if cache:
                data.unpersist()
            raise
        if isinstance(out, AuditRecord):
            if cache:
                data.unpersist()
            return out
        out.cached = cache
        return out

    # --- pieces the run uses -------------------------------------------------------------------------------------
    def effective_suite(self, decision: SchemaDecision) -> Suite:
        """The user's suite plus the registry's structural and semantic checks of the decided version."""
        checks: list[Any] = list(self.suite.checks) if self.suite is not None else []
        names = {c.name for c in checks}
        if decision.subject is not None and decision.version is not None:
            ref = SchemaRef(subject=decision.subject, version=decision.version)
            if self.config.schema_check is not None and "registry.schema" not in names:
                checks.append(SchemaCheck(name="registry.schema", avro=ref, view="batch",
                                          policy=self.config.schema_check, allow_missing_with_default=True,
                                          description=f"conforms to {decision.subject} v{decision.version}"))
            if self.config.semantic_check is not None and "registry.semantic" not in names \
                    and _has_semantic_types(self.schemas.schema_text(ref)):
                checks.append(SemanticCheck(name="registry.semantic", avro=ref, view="batch",
                                            policy=self.config.semantic_check,
                                            description=f"semantic types of {decision.subject} v{decision.version}"))
        # quarantine-policy row checks judge the incoming rows: a row they fail is held back before the write, so on
        # the staged changes it would no longer show
        checks = [c.model_copy(update={"view": "batch"}) if c.policy == Policy.QUARANTINE and c.row_level else c
                  for c in checks]
        if self.suite is not None:
            return self.suite.model_copy(update={"checks": checks})
        return Suite(name=f"{self.table.name}-gate", checks=checks)


def _has_semantic_types(text: str) -> bool:
    return '"semanticType"' in text


def _gated_operation(operation: Operation | str) -> Operation:
    """The write operation a gate runs (deletes are rows of an upsert, so ``DELETE`` is not one of them)."""
    try:
        op = Operation(operation.upper()) if isinstance(operation, str) else operation
    except ValueError:
        op = None
    if op not in _GATED:
        raise ValueError(f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
    return op


class _Run:
    """The state of one gate run."""

    def __init__(self, gate: Gate, operation: Operation, checkpoint: Any, batch_id: str | None,
                 dropped: int, lag: Sequence[PartitionLag] | None = None, source_commits: int | None = None) -> None:
        self.gate = gate
        self.dropped = dropped
        self.lag = tuple(lag or ())
        self.op = operation
        self.operation = _GATED[operation]  # the name the audit record carries
        self.checkpoint = checkpoint
        self.started = dt.datetime.now(dt.UTC)
        self.run_id = f"{self.started:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"
        self.batch_id = batch_id or (position_id(checkpoint) if checkpoint is not None else self.run_id)
        self.t0 = time.perf_counter()
        self.durations: dict[str, float] = {}
        self.source_commits = source_commits

    def _lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.durations[name] = round((now - since) * 1000, 1)
        return now

    def _checkpoint_entry(self) -> dict[str, str]:
        if self.checkpoint is None:
            return {}
        return checkpoint_metadata(self.gate.pipeline or self.gate.table.name, self.checkpoint)

    def audit(self, data: DataFrame, extra: dict[str, str], *, split: bool) -> AuditedWrite | AuditRecord:
        gate = self.gate
        t = time.perf_counter()
        decision = SchemaDecision()
        if gate.registry is not None and gate.subject is not None:
            decision = check_batch_schema(gate.registry, gate.subject, data.schema, table_name=gate.table.name,
                                          evolution=gate.config.evolution)
        t = self._lap("schema", t)
        if decision.action == "refused":
            logger.warning("schema of batch %s refused for %s: %s", self.batch_id, gate.subject,
                           "; ".join(decision.messages))
            return self._not_published(data, data.count() + self.dropped, decision, None, None, Decision.REFUSED,
                                       extra)

        suite = gate.effective_suite(decision)
        has_delete_flag = CONTROL_COLUMNS[0] in data.columns
        deletes = F.coalesce(F.col(f"`{CONTROL_COLUMNS[0]}`"), F.lit(False)) if has_delete_flag else F.lit(False)
        audited = data.where(~deletes).drop(*CONTROL_COLUMNS) if has_delete_flag else data
        # hold back the rows failing quarantine-policy checks
        splits = suite.split(AuditContext(batch=audited, changes=audited), schemas=gate.schemas) if split else []
        rules = [r for s in splits for r in s.rules]
        passing, failing = (splits[0].passing, splits[0].failing) if splits and rules else (audited, None)
        # the gate's own count of the batch: taken here when the split may hold rows back (so that it checks the
        # split too), else observed in the write job (every row goes to it)
        counted_in = data.count() + self.dropped if failing is not None else None
        quarantined = failing.count() if failing is not None else 0
        if has_delete_flag:
            keep = list(data.columns)
            flagged = data.where(deletes)
            to_write = passing.withColumn(CONTROL_COLUMNS[0], F.lit(False)).select(*keep).unionByName(flagged) \
                if quarantined else data
        else:
            to_write = passing if quarantined else data
        t = self._lap("split", t)

        # the batch's rows are exactly the write job's rows when nothing was held back and no row is a delete
        inline = self._inline_passes(suite, batch_too=not quarantined and not has_delete_flag)
        staged, counter = self._stage(to_write, {**extra, **self._checkpoint_entry()}, list(inline.values()))
        t = self._lap("stage", t)
        try:
            rows_in = counted_in if counted_in is not None else self._observed_rows(counter, data)
            exact = {"batch": lambda p: p.rows == staged.result.input_rows == rows_in - self.dropped
                     and same_columns(p, audited.schema),
                     "changes": lambda p: wrote_exactly(staged, p)}
            ctx = AuditContext.from_staged(staged, batch=audited)
            counted = {view: p for view, p in inline.items() if p.clean and exact[view](p)}
            result = suite.run(ctx, schemas=gate.schemas, inline=counted)
            self._lap("audit", t)
        except BaseException:
            staged.abort()
            raise
        return AuditedWrite(self, data, extra, decision, result, staged, rows_in, quarantined, failing, passing,
                            list(audited.columns))

    def publish(self, w: AuditedWrite, extra_metadata: dict[str, str]) -> AuditRecord:
        """Quarantine the held-back rows, prove the counts and publish (the run's second half)."""
        gate = self.gate
        t = time.perf_counter()
        staged = w.staged
        try:
            q_instant = self._quarantine(w.failing, w.columns, w.quarantined)
            t = self._lap("quarantine", t)
            res = staged.result
            published = res.inserted + res.updated + res.deleted
            if res.input_rows + w.quarantined + self.dropped != w.rows_in:
                raise ConservationError(f"the gate counted {w.rows_in} rows in, the writer received "
                                        f"{res.input_rows}, {w.quarantined} were quarantined and {self.dropped} "
                                        "dropped as stale")
            conservation = Conservation(rows_in=w.rows_in, published=published, quarantined=w.quarantined,
                                        deduplicated=res.input_rows - published + self.dropped).check()
        except BaseException:
            staged.abort()
            raise
        record = self._record(Decision.QUARANTINED if w.quarantined else Decision.PUBLISHED, w.decision, w.result,
                              conservation, staged.instant, q_instant)
        record = record.model_copy(update={"writes": WriteCounts(inserted=res.inserted, updated=res.updated,
                                                                 deleted=res.deleted)})
        try:
            staged.publish({**extra_metadata, AUDIT_KEY: record.to_metadata()})
        except CommitConflictError:
            staged.abort()  # a concurrent writer touched the same file groups: the batch can be written again
            raise
        self._lap("publish", t)
        record = record.model_copy(update={"durations_ms": self._total()})
        self._finish(record, w.result)
        logger.info("gate %s %s: %s", gate.table.name, staged.instant, record.summary())
        return record

    def block(self, w: AuditedWrite, *, park: bool = True) -> AuditRecord:
        """The outcome of a blocked audit, per ``on_block`` (``park=False``: a skipped batch's rows are not parked
        here, another table's gate parked them)."""
        if self.gate.config.on_block == OnBlock.KEEP and w.quarantined:
            # the kept instant lacks the held-back rows: they wait in the quarantine table, whatever the review
            q_instant = self._quarantine(w.failing, w.columns, w.quarantined)
            return self._not_published(w.data, w.rows_in, w.decision, w.result, w.staged, None, w.extra,
                                       quarantined=w.quarantined, q_instant=q_instant)
        return self._not_published(w.data, w.rows_in, w.decision, w.result, w.staged, None, w.extra, park=park)

    def _inline_passes(self, suite: Suite, *, batch_too: bool) -> dict[str, InlinePass]:
        """Passes counting the checks of ``{changes}`` and ``{batch}`` inside the write job, for the views whose
        rows are that job's rows. ``{changes}``: when the newest write wins (``COMMIT_TIME_ORDERING``; with
        event-time ordering an incoming row can lose to a stored one and not show); deduplication, deletes and casts
        are ruled out after the write (:func:`_wrote_exactly`). ``{batch}``: when ``batch_too`` (the job then reads
        every row of the batch, before deduplication, as it came)."""
        views = ["batch"] if batch_too else []
        if self.gate.table.config.merge_mode == "COMMIT_TIME_ORDERING":
            views.append("changes")
        wanted = suite.pass_views()
        return {v: suite.inline_pass(v, schemas=self.gate.schemas) for v in views if v in wanted}

    def _stage(self, rows: DataFrame, metadata: dict[str, str],
               inline: list[InlinePass]) -> tuple[StagedCommit, RowCounter]:
        """The staged write of ``rows`` with the inline passes and a row counter riding on its job."""
        counter = RowCounter()
        try:
            staged = self.gate.table.write(self.op, rows, stage=True, extra_metadata=metadata,
                                           observer=chained([counter, *inline]))
        except TableCoreError:
            raise
        except Exception as e:
            if not any(p.schema is not None for p in inline):
                raise
            # a folded query that fails at run time (ANSI arithmetic, a bad cast) fails the write job it rides on:
            # the write rolled back; write again without it, the audit then evaluates the views on their own
            logger.warning("write with the inline audit failed (%s); writing again without it", first_line(e))
            counter = RowCounter()
            staged = self.gate.table.write(self.op, rows, stage=True, extra_metadata=metadata, observer=counter)
        return staged, counter

    def _observed_rows(self, counter: RowCounter, data: DataFrame) -> int:
        """``rows_in`` from the rows the write job saw; a count of its own when no job ran the counter (a write with
        no file group to write runs no job)."""
        seen = counter.rows
        return (seen if seen is not None else data.count()) + self.dropped

    def _quarantine(self, failing: DataFrame | None, columns: list[str], quarantined: int) -> str | None:
        """Write the held-back rows to the quarantine table; returns its instant (None when there are none)."""
        if not quarantined or failing is None:
            return None
        gate = self.gate
        records = gate.quarantine.records(
            failing, original_columns=columns, target=gate.table.name, pipeline=gate.pipeline,
            batch_id=self.batch_id, status="quarantined", checkpoint=self._checkpoint_doc(), run_id=self.run_id)
        q_instant, written = gate.quarantine.write(records)
        if written != quarantined:
            raise ConservationError(f"{quarantined} rows failed quarantine checks but the quarantine table "
                                    f"took {written}")
        return q_instant

    def _not_published(self, data: DataFrame, rows_in: int, decision: SchemaDecision, result: SuiteResult | None,
                       staged: StagedCommit | None, forced: Decision | None, extra: dict[str, str], *,
                       quarantined: int = 0, q_instant: str | None = None, park: bool = True) -> AuditRecord:
        gate = self.gate
        on_block = gate.config.on_block
        outcome = forced or (Decision.KEPT if on_block == OnBlock.KEEP else
                             Decision.SKIPPED if on_block == OnBlock.SKIP else Decision.BLOCKED)
        if staged is not None and on_block != OnBlock.KEEP:
            staged.abort()
        instant = staged.instant if staged is not None and on_block == OnBlock.KEEP else None
        if on_block == OnBlock.SKIP and park:
            why = ", ".join(c.name for c in result.failed) if result is not None else "schema refused"
            reason = f"batch blocked by {why}"
            records = gate.quarantine.records(
                data, original_columns=data.columns, target=gate.table.name, pipeline=gate.pipeline,
                batch_id=self.batch_id, status="blocked", checkpoint=self._checkpoint_doc(), run_id=self.run_id,
                check=F.lit(why), reason=F.lit(reason), violations=F.lit("[]"))
            q_instant, written = gate.quarantine.write(records)
            if written != rows_in - self.dropped:
                raise ConservationError(f"{rows_in} rows of a blocked batch but the quarantine table took {written}")
        if on_block == OnBlock.SKIP:
            outcome = Decision.SKIPPED
        conservation = Conservation(rows_in=rows_in, quarantined=quarantined,
                                    rejected=rows_in - self.dropped - quarantined, deduplicated=self.dropped).check()
        record = self._record(outcome, decision, result, conservation, instant, q_instant)
        if on_block == OnBlock.SKIP and self.checkpoint is not None:
            # commit the checkpoint (and this audit) without data, so the pipeline goes on past the batch
            empty = data.limit(0)
            done = gate.table.upsert(empty, extra_metadata={**extra, **self._checkpoint_entry(),
                                                            AUDIT_KEY: record.to_metadata()})
            record = record.model_copy(update={"instant": done.instant})
        record = record.model_copy(update={"durations_ms": self._total()})
        self._finish(record, result)
        logger.warning("gate %s: batch %s %s (%s)", gate.table.name, self.batch_id, outcome.value,
                       ", ".join(c.name for c in result.failed) if result is not None else "schema refused")
        return record

    def _checkpoint_doc(self) -> dict[str, Any] | None:
        return {"pipeline": self.gate.pipeline, "position": self.checkpoint} if self.checkpoint is not None else None

    def _total(self) -> dict[str, float]:
        return {**self.durations, "total": round((time.perf_counter() - self.t0) * 1000, 1)}

    def _record(self, outcome: Decision, decision: SchemaDecision, result: SuiteResult | None,
                conservation: Conservation, instant: str | None, q_instant: str | None) -> AuditRecord:
        checks = tuple(CheckVerdict(name=c.name, kind=c.kind, policy=c.policy.value, status=c.status.value,
                                    failing_rows=c.failing_rows, total_rows=c.total_rows, message=c.message[:500])
                       for c in (result.checks if result is not None else ()))
        verdict = result.verdict.value if result is not None else Verdict.BLOCK.value
        return AuditRecord(
            run_id=self.run_id, table=self.gate.table.name, table_path=self.gate.table.uri,
            pipeline=self.gate.pipeline, operation=self.operation, instant=instant, decision=outcome, verdict=verdict,
            suite=result.suite if result is not None else None, checks=checks, schema_decision=decision,
            conservation=conservation, checkpoint=self._checkpoint_doc(), quarantine_instant=q_instant,
            durations_ms=self._total(), report=self.gate.audit_log.report_path(self.run_id),
            started_at=self.started, lag=self._lag(), source_commits=self.source_commits)

    def _lag(self) -> tuple[SourceLag, ...]:
        now_ms = time.time() * 1000
        return tuple(SourceLag(topic=x.topic, partition=x.partition, start=x.start, end=x.end,
                               offset_lag=x.offset_lag, newest_event_ms=x.newest_event_ms,
                               event_time_lag_s=(round(max(0.0, now_ms - x.newest_event_ms) / 1000, 3)
                                                 if x.newest_event_ms is not None else None))
                     for x in self.lag)

    def _finish(self, record: AuditRecord, result: SuiteResult | None) -> None:
        log = self.gate.audit_log
        log.write_report(record.run_id, render_report(record, render_html(result) if result is not None else None))
        log.append(record)


class AuditedWrite:
    """A batch staged and audited by :meth:`Gate.audit`, waiting for :meth:`publish` or :meth:`block`.

    Attributes:
        staged: the staged instant; result: the suite's result; passing: the rows not held back (lazy).
    """

    def __init__(self, run: _Run, data: DataFrame, extra: dict[str, str], decision: SchemaDecision,
                 result: SuiteResult, staged: StagedCommit, rows_in: int, quarantined: int,
                 failing: DataFrame | None, passing: DataFrame, columns: list[str]) -> None:
        self.run, self.data, self.extra, self.decision, self.result = run, data, extra, decision, result
        self.staged, self.rows_in, self.quarantined, self.failing = staged, rows_in, quarantined, failing
        self.passing, self.columns = passing, columns
        self.cached = False
        self._done = False

    @property
    def blocked(self) -> bool:
        """Whether the audit blocks the batch."""
        return self.result.verdict == Verdict.BLOCK

    def publish(self, extra_metadata: dict[str, str] | None = None) -> AuditRecord:
        """Quarantine the held-back rows and publish the staged instant (with ``extra_metadata``)."""
        return self._end(lambda: self.run.publish(self, extra_metadata or {}))

    def block(self, *, park: bool = True) -> AuditRecord:
        """Abort (or keep, or skip) per the gate's ``on_block``; ``park=False`` parks no row."""
        return self._end(lambda: self.run.block(self, park=park))

    def _end(self, how: Callable[[], AuditRecord]) -> AuditRecord:
        if self._done:
            raise ValueError(f"the audited write of {self.staged.instant} was already concluded")
        self._done = True
        try:
            return how()
        finally:
            if self.cached:
                self.data.unpersist()
