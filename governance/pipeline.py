"""Pipelines: source -> optional SQL transform -> gated write to a tablecore table, exactly once, from YAML.

A pipeline file (JSON Schema: ``docs/pipeline.schema.json``)::

    name: trips-ingest
    source: {kind: files, path: landing/trips, format: json, max_files_per_batch: 1}
    transform: {sql: "SELECT *, to_date(from_unixtime(ts / 1000)) AS day FROM {source}"}
    target: {path: tables/trips, name: trips, record_key: [uuid], ordering_field: ts, partition_fields: [dt],
             table_type: MERGE_ON_READ, operation: upsert}
    registry: {url: http://127.0.0.1:8081, subject: trips-value}
    gate: {evolution: refuse, semantic_check: quarantine, on_block: skip}
    validators: trips_suite.yaml
    schedule: {every_seconds: 60}

Exactly once: each batch's source position is committed in the same commit as its rows
(:mod:`governance.checkpoint`); a run starts from the last committed position, after aborting staged instants a
killed run of the same pipeline left behind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, StructField

from governance.audit import AuditLog, AuditRecord, Conservation, Decision
from governance.backfill_spec import BackfillSpec
from governance.changelog import ChangelogSpec
from governance.changelog_writer import ChangelogRecords, ChangelogWriter
from governance.checkpoint import last_checkpoint, position_id, read_checkpoint
from governance.column_update import check_update_columns, complete_rows
from governance.config_text import line_of, read_config_text, without_tags, yaml_problem
from governance.errors import BatchBlockedError, PipelineConfigError
from governance.gate import Gate, GateConfig, OnBlock
from governance.kafka_source import KafkaSource
from governance.registry_spec import RegistrySpec, registry_client
from governance.schema_gate import CONTROL_COLUMNS
from governance.secondary_sources import (
    SecondarySource,
    SecondarySourceSpec,
    check_sources,
    last_source_ends,
    source_ends_metadata,
)
from governance.sources import Batch, SourceConfig, TableSourceConfig
from governance.transforms import (
    BUILTIN_VIEWS,
    PythonStep,
    Transform,
    TransformContext,
    TransformStep,
    ViewSet,
    check_steps,
    load_callable,
    run_steps,
    step_label,
)
from schema_registry.errors import SubjectNotFoundError
from tablecore import CommitConflictError, Table, TableConfig, TableNotFoundError
from tablecore.format.avro_schema import avro_to_arrow
from tablecore.spark.schema import arrow_to_spark
from validators import Suite, SuiteConfigError, load_suite, suite_from_dict
from validators.sql_text import placeholders

logger = logging.getLogger(__name__)

STOPS = frozenset({Decision.BLOCKED, Decision.KEPT, Decision.REFUSED})
"""Decisions that stop a pipeline run (``skip`` went on past the batch)."""
CONFLICT_ATTEMPTS = 5
"""Attempts at writing a batch whose commit conflicts with concurrent writers of the target."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
TRANSFORM_VIEWS = BUILTIN_VIEWS
"""Views a transform's SQL steps may read besides the secondary sources: the batch, the source table as of the
batch's end (table sources), the target, the step before's output."""


class TargetSpec(TableConfig):
    """The target table: a tablecore :class:`~tablecore.TableConfig` plus where it lives and how batches are written.

    Attributes:
        path: the table's location (relative paths resolve against the pipeline file's folder).
        operation: the write operation (rows with ``_hoodie_is_deleted = true`` are deletes in an upsert);
            ``update_columns`` writes only the ``update_columns`` of rows the table holds
            (:mod:`governance.column_update`).
        update_columns: the columns an ``update_columns`` operation writes.
    """

    path: str
    operation: Literal["upsert", "insert", "bulk_insert", "insert_overwrite", "insert_overwrite_table",
                       "update_columns"] = "upsert"
    update_columns: list[str] | None = None

    @model_validator(mode="after")
    def _columns_fit_operation(self) -> TargetSpec:
        if self.operation == "update_columns":
            check_update_columns(self.update_columns or [], self.record_key, self.partition_fields)
        elif self.update_columns is not None:
            raise ValueError("update_columns is for operation update_columns")
        return self

    @field_validator("create_schema", mode="before")
    @classmethod
    def _schema_text(cls, v: Any) -> Any:
        """``create_schema`` may be written as a YAML mapping (an Avro record schema) instead of JSON text."""
        return json.dumps(v) if isinstance(v, dict) else v

    def table_config(self) -> TableConfig:
        """The :class:`TableConfig` part."""
        return TableConfig(**self.model_dump(exclude={"path", "operation", "update_columns"}))


class ScheduleSpec(BaseModel):
    """When a pipeline runs: once (until the source has nothing new), or every N seconds.

    Attributes:
        every_seconds: seconds between runs (None: once).
        max_batches_per_run: stop a run after this many batches (None: until nothing is new).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    every_seconds: float | None = Field(default=None, gt=0)
    max_batches_per_run: int | None = Field(default=None, ge=1)


class PipelineSpec(BaseModel):
    """A pipeline (see the module docstring). Build with :func:`load_pipeline` or in Python."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    source: SourceConfig = Field(discriminator="kind")
    sources: dict[str, SecondarySourceSpec] = Field(default_factory=dict)
    """Named secondary table sources, each a view of the transform (:mod:`governance.secondary_sources`)."""
    transform: Transform | None = None
    """One step or a list of SQL and Python steps run in order (:mod:`governance.transforms`)."""
    target: TargetSpec
    registry: RegistrySpec | None = None
    gate: GateConfig = Field(default_factory=GateConfig)
    validators: str | dict[str, Any] | None = None
    """A suite file (relative to the pipeline file) or an inline suite ``{name, checks}``."""
    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)
    backfill: BackfillSpec | None = None
    """How ``lakegate pipeline backfill`` recomputes a date range (:mod:`governance.backfill`)."""
    changelog: ChangelogSpec | None = None
    """Write a changelog into a history table and the target as its merged snapshot (:mod:`governance.changelog`)."""
    base_dir: Path | None = Field(default=None, exclude=True)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"pipeline name {v!r} must match {_NAME.pattern}")
        return v

    @property
    def steps(self) -> tuple[TransformStep, ...]:
        """The transform's steps, in order (none without a transform)."""
        if self.transform is None:
            return ()
        return tuple(self.transform) if isinstance(self.transform, list) else (self.transform,)

    def transform_functions(self) -> dict[int, Any]:
        """The Python steps' functions by step index, imported (from ``sys.path``, else the pipeline's folder).

        Raises:
            PipelineConfigError: a module cannot be imported or has no such function (the message names the step).
        """
        out = {}
        for n, step in enumerate(self.steps):
            if isinstance(step, PythonStep):
                try:
                    out[n] = load_callable(step.python, self.base_dir)
                except PipelineConfigError as e:
                    raise PipelineConfigError(f"pipeline {self.name}: {step_label(n, step)}: {e}") from None
        return out

    @model_validator(mode="after")
    def _consistent(self) -> PipelineSpec:
        check_sources(self.sources, TRANSFORM_VIEWS)
        check_steps(self.steps, (*TRANSFORM_VIEWS, *self.sources), listed=isinstance(self.transform, list))
        if self.transform is None and self.sources:
            raise ValueError("secondary sources are views of the transform: a pipeline with sources needs one")
        if any("source_snapshot" in placeholders(s.sql) for s in self.steps if not isinstance(s, PythonStep)) \
                and getattr(self.source, "kind", None) != "table":
            raise ValueError("{source_snapshot} needs a table source")
        if self.backfill is not None and (getattr(self.source, "kind", None) != "table" or self.changelog
                                          or getattr(self.source, "mode", None) == "cdc"):
            raise ValueError("backfill reads the main source as a snapshot: it needs a table source in latest mode "
                             "(and no changelog)")
        if getattr(self.source, "mode", None) == "cdc" and self.transform is None:
            raise ValueError("a table source in cdc mode needs a transform: its rows are changes (op, before_*, "
                             "after_*), not records of the target")
        if self.changelog is not None:
            if getattr(self.source, "kind", None) != "kafka":
                raise ValueError("changelog needs a kafka source (the history table is keyed by Kafka coordinates)")
            if not self.target.ordering_field:
                raise ValueError("changelog needs target.ordering_field (the events' version or timestamp)")
            if self.target.operation != "upsert":
                raise ValueError("changelog writes the target with upserts (target.operation: upsert)")
            if self.sources:
                raise ValueError("changelog pipelines do not take secondary sources")
            if self.gate.on_block == OnBlock.KEEP:
                raise ValueError("changelog pipelines publish two tables together: gate.on_block keep is not "
                                 "supported (abort or skip)")
        return self

    def resolve(self, path: str) -> str:
        """``path`` resolved against the pipeline file's folder (URIs and absolute paths unchanged)."""
        if "://" in path or os.path.isabs(path) or self.base_dir is None:
            return path
        return str((self.base_dir / path).resolve())

    def suite(self) -> Suite | None:
        """The validators suite (None if the pipeline has none).

        Raises:
            PipelineConfigError: the suite file cannot be read, is a directory or is not UTF-8 (the message names it,
                with the line and byte offset), or the suite is invalid (the message names the entry).
        """
        if self.validators is None:
            return None
        suite_file: Path | None = None
        try:
            if isinstance(self.validators, str):
                suite_file = Path(self.resolve(self.validators))
                read_config_text(suite_file, "suite")  # a directory or bytes that are not UTF-8, named here
                return load_suite(suite_file)
            return suite_from_dict(self.validators, base_dir=self.base_dir)
        except (PipelineConfigError, SuiteConfigError) as e:
            raise PipelineConfigError(f"pipeline {self.name}: validators: {e}") from None
        except UnicodeDecodeError as e:  # a file the suite names (an Avro or JSON schema) that is not UTF-8
            raise PipelineConfigError(f"pipeline {self.name}: validators {suite_file or 'inline'}: a file the suite "
                                      f"names is not UTF-8 text ({e.reason} at byte offset {e.start})") from None


def pipeline_json_schema() -> dict[str, Any]:
    """The JSON Schema of pipeline files (``docs/pipeline.schema.json``, for editors)."""
    schema = PipelineSpec.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "lakegate pipeline"
    return schema


def load_pipeline(path: str | Path) -> PipelineSpec:
    """Load and validate a pipeline file.

    Raises:
        PipelineConfigError: a missing or unreadable file, a directory, bytes that are not UTF-8, invalid YAML, or an
            invalid entry — the message names the file, the line and the entry (``pipeline.yaml:7:
            target.record_key: field required``, ``pipeline.yaml:2: the pipeline is not UTF-8 text (byte 0xe9 at
            offset 28)``).
    """
    p = Path(path)
    text = read_config_text(p, "pipeline")
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        line, problem = yaml_problem(e, text)
        where = f"{p}:{line}" if line is not None else str(p)
        raise PipelineConfigError(f"{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise PipelineConfigError(f"{p}: a pipeline must be a mapping (name, source, target...)")
    try:
        spec = PipelineSpec.model_validate({**data, "base_dir": p.resolve().parent})
    except ValidationError as e:
        err = e.errors()[0]
        loc = list(err["loc"]) or list(getattr(err.get("ctx", {}).get("error"), "loc", ()))
        loc = without_tags(data, loc)
        line = line_of(node, loc)
        field = ".".join(str(x) for x in loc)
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "field required"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field"
        raise PipelineConfigError(f"{p}:{line or 1}: {field}: {msg}" if field else f"{p}:{line or 1}: {msg}") \
            from None
    spec.suite()  # a broken suite fails at load time too
    try:
        spec.transform_functions()  # and a Python step that cannot be imported
    except PipelineConfigError as e:
        raise PipelineConfigError(f"{p}: {e}") from None
    return spec


class PipelineRunner:
    """Runs a pipeline: recover, then batch after batch through the gate, each with its checkpoint.

    Args:
        spec: the pipeline.
        spark: the session.
        registry: a registry client (default: one for ``spec.registry``, if set).
    """

    def __init__(self, spec: PipelineSpec, spark: SparkSession, *, registry: Any = None) -> None:
        self.spec = spec
        self.spark = spark
        self._own_registry = registry is None
        self.registry = registry if registry is not None else registry_client(spec.registry)
        self.suite = spec.suite()
        self.functions = spec.transform_functions()
        self.source = spec.source.build(self.registry, spec.base_dir)
        if isinstance(self.source, KafkaSource):
            self.source.pipeline = spec.name
        self._table: Table | None = None
        self._changelog: ChangelogWriter | None = None
        self._seeded = False
        self.last_changelog: ChangelogRecords | None = None
        """A changelog pipeline: both tables' records of the last batch (the run's records hold the primary one)."""

    def close(self) -> None:
        """Close the registry client the runner opened itself (a client passed in stays open)."""
        if self._own_registry and self.registry is not None:
            self.registry.close()

    def __enter__(self) -> PipelineRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def table(self) -> Table:
        """The target table (created from the target spec on first use)."""
        if self._table is None:
            path = self.spec.resolve(self.spec.target.path)
            try:
                self._table = Table.open(path, spark=self.spark)
            except TableNotFoundError:
                self._table = Table.create(path, self.spec.target.table_config(), spark=self.spark)
                logger.info("created target table %s at %s", self._table.name, path)
        return self._table

    def gate(self) -> Gate:
        """The gate of the target table with the pipeline's policy."""
        cfg = self.spec.gate
        updates: dict[str, Any] = {}
        if self.spec.registry is not None and self.spec.registry.subject and cfg.subject is None:
            updates["subject"] = self.spec.registry.subject
        for key in ("quarantine_path", "audit_dir"):
            value = getattr(cfg, key)
            if value is not None:
                updates[key] = self.spec.resolve(value)
        return Gate(self.table, self.suite, config=cfg.model_copy(update=updates), registry=self.registry,
                    pipeline=self.spec.name)

    @property
    def changelog(self) -> ChangelogWriter | None:
        """The two-table writer of a ``changelog:`` pipeline (None for other pipelines)."""
        spec = self.spec.changelog
        if spec is None:
            return None
        if self._changelog is None:
            cfg = self.spec.gate.model_copy(update={"subject": spec.history.subject, "quarantine_path": None,
                                                    "audit_dir": None})

            def history_gate(table: Table) -> Gate:
                return Gate(table, self.suite, config=cfg, registry=self.registry, pipeline=self.spec.name)

            self._changelog = ChangelogWriter(spec, self.spec.name, self.gate(), history_gate,
                                              self.spec.resolve(spec.history.path))
        return self._changelog

    def checkpoint(self) -> Any:
        """The last committed source position (None before the first batch)."""
        found = last_checkpoint(self.table, self.spec.name)
        return found[1] if found is not None else None

    def recover(self) -> list[str]:
        """Abort staged instants of this pipeline that a killed run left (those kept for review stay); returns them.
        A changelog pipeline also folds into the merged table the history commits it lacks
        (:meth:`ChangelogWriter.recover`)."""
        if self.changelog is not None:
            return self.changelog.recover()
        kept = {r.instant for r in self.audit_log().records() if r.decision == Decision.KEPT and r.instant}
        aborted = []
        for staged in self.table.staged():
            found = read_checkpoint(staged.metadata.extra_metadata, f"staged instant {staged.instant}")
            if found is not None and found[0] == self.spec.name and staged.instant not in kept:
                staged.abort()
                aborted.append(staged.instant)
                logger.warning("aborted staged instant %s left by an interrupted run of %s", staged.instant,
                               self.spec.name)
        return aborted

    def audit_log(self) -> AuditLog:
        """The target's audit log."""
        return self.gate().audit_log

    def batches(self) -> Iterator[Batch]:
        """Source batches from the last checkpoint on (each read only when the previous one was handled)."""
        while True:
            after = self.checkpoint()
            batch = self.source.next_batch(self.spark, after, schema=self._read_schema())
            if batch is None:
                return
            yield dataclasses.replace(batch, after=after)

    def run_once(self, *, max_batches: int | None = None,
                 on_batch: Callable[[Batch, AuditRecord], None] | None = None) -> list[AuditRecord]:
        """Process batches until the source has nothing new (or ``max_batches``).

        Raises:
            BatchBlockedError: a batch was blocked and ``on_block`` is ``abort`` or ``keep`` (the pipeline stops; its
                checkpoint stays before that batch).
        """
        self.recover()
        gate = self.gate()

        def write(batch: Batch) -> AuditRecord:
            record = self.write_batch(gate, batch)
            if record.decision in (Decision.PUBLISHED, Decision.QUARANTINED, Decision.SKIPPED) \
                    and isinstance(self.source, KafkaSource):
                self.source.published(batch.position)
            return record

        return self.drive(gate, self.batches(), write, stop=STOPS, what=f"pipeline {self.spec.name}",
                          limit=max_batches or self.spec.schedule.max_batches_per_run, on_batch=on_batch)

    def drive(self, gate: Gate, batches: Iterable[Batch], write: Callable[[Batch], AuditRecord], *,
              stop: Collection[Decision], what: str, limit: int | None,
              on_batch: Callable[[Batch, AuditRecord], None] | None) -> list[AuditRecord]:
        """Write ``batches`` one by one with ``write`` until they run out or ``limit`` were written; a decision in
        ``stop`` ends it with :class:`BatchBlockedError` (``what`` names the run in its message). Any other failure
        is recorded in the audit log (:meth:`record_failure`) and raised."""
        records: list[AuditRecord] = []
        try:
            for batch in batches:
                record = write(batch)
                records.append(record)
                if on_batch is not None:
                    on_batch(batch, record)
                if record.decision in stop:
                    failed = ", ".join(c.name for c in record.checks if c.status == "fail")
                    raise BatchBlockedError(
                        f"{what}: {batch.description} {record.decision.value} ({failed or 'schema refused'}); "
                        f"report: {record.report}", instant=record.instant, report=record.report)
                if limit is not None and len(records) >= limit:
                    break
        except BatchBlockedError:
            raise
        except Exception as e:  # a source, a transform or the storage failed: on record for status and metrics
            self.record_failure(gate, e)
            raise
        return records

    def write_batch(self, gate: Gate, batch: Batch, *, extra_metadata: dict[str, str] | None = None,
                    backfill: bool = False) -> AuditRecord:
        """Transform ``batch`` and write it through ``gate``; a commit that conflicts with a concurrent writer of the
        target (a backfill beside the incremental pipeline) is aborted and the batch transformed and written again,
        over the new state, up to :data:`CONFLICT_ATTEMPTS` times.

        Args:
            gate: the target's gate.
            batch: the batch.
            extra_metadata: more commit metadata (a backfill's progress).
            backfill: a backfill batch: no checkpoint, secondary sources read whole (not after a previous end), and
                their ends not recorded.
        """
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            df, ends, views = self._transform(batch, fresh=backfill)
            extra = {**(extra_metadata or {}),
                     **(source_ends_metadata(self.spec.name, ends) if ends and not backfill else {})}
            try:
                return self._write(gate, batch, df, extra or None, checkpoint=not backfill)
            except CommitConflictError as e:
                if attempt == CONFLICT_ATTEMPTS or self.changelog is not None:
                    raise
                pause = random.uniform(0.5, 2.0) * attempt
                logger.warning("pipeline %s: %s conflicted with a concurrent write (%s); writing it again in %.1fs "
                               "(attempt %d of %d)", self.spec.name, batch.description, e, pause, attempt + 1,
                               CONFLICT_ATTEMPTS)
                time.sleep(pause)
            finally:
                if views is not None:
                    views.close()
        raise AssertionError("unreachable")

    def run(self, *, runs: int | None = None, sleep: Callable[[float], None] = time.sleep,
            on_batch: Callable[[Batch, AuditRecord], None] | None = None) -> list[AuditRecord]:
        """Run once, or every ``schedule.every_seconds`` (``runs`` bounds the number of runs; None: forever)."""
        every = self.spec.schedule.every_seconds
        out: list[AuditRecord] = []
        n = 0
        while True:
            started = time.monotonic()
            out.extend(self.run_once(on_batch=on_batch))
            n += 1
            if every is None or (runs is not None and n >= runs):
                return out
            sleep(max(0.0, every - (time.monotonic() - started)))

    # --- helpers -------------------------------------------------------------------------------------------------
    def _write(self, gate: Gate, batch: Batch, df: DataFrame, extra: dict[str, str] | None, *,
               checkpoint: bool = True) -> AuditRecord:
        writer = self.changelog
        if writer is None or not checkpoint:
            operation: str = self.spec.target.operation if checkpoint or self.spec.backfill is None \
                else self.spec.backfill.operation
            dropped = 0
            if operation == "update_columns":
                df, absent = complete_rows(self.table, df, self.spec.target.update_columns or [])
                dropped = absent.count()  # keys the table does not hold: they write no record
                operation = "upsert"
            return gate.write(df, operation=operation, checkpoint=batch.position if checkpoint else None,
                              lag=batch.lag, extra_metadata=extra, source_commits=batch.commits, dropped=dropped,
                              batch_id=None if checkpoint else position_id(batch.position))
        if not self._seeded:
            reader = self.source.reader_schema() if isinstance(self.source, KafkaSource) else None
            writer.seed_subjects(self.registry, reader, df.schema)
            self._seeded = True
        records = writer.write_batch(df, checkpoint=batch.position, batch_id=position_id(batch.position),
                                     lag=batch.lag)
        self.last_changelog = records
        return records.primary

    def record_failure(self, gate: Gate, error: Exception) -> None:
        """Append a ``failed`` record to the target's audit log (a failure to do so is logged, not raised over the
        original error)."""
        now = dt.datetime.now(dt.UTC)
        text = str(error).strip()
        try:
            gate.audit_log.append(AuditRecord(
                run_id=f"{now:%Y%m%dT%H%M%S%f}-failed", table=self.table.name, table_path=self.table.uri,
                pipeline=self.spec.name, operation=self.spec.target.operation, decision=Decision.FAILED,
                verdict="error", conservation=Conservation(rows_in=0, published=0, quarantined=0, deduplicated=0,
                                                           rejected=0),
                started_at=now, error=f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:1000]))
        except Exception:  # the audit folder itself may be what failed
            logger.exception("pipeline %s: could not record the failure in the audit log", self.spec.name)

    def _read_schema(self) -> Any:
        if self.registry is None or getattr(self.spec.source, "kind", None) == "table":
            return None
        subject = (self.spec.registry.subject if self.spec.registry else None) or f"{self.table.name}-value"
        try:
            text = self.registry.latest(subject).schema
        except SubjectNotFoundError:
            return None
        schema = arrow_to_spark(avro_to_arrow(json.loads(text)))
        # delete markers travel with the rows (a file source may carry them; absent -> null -> not a delete)
        return schema.add(StructField(CONTROL_COLUMNS[0], BooleanType(), True))

    def _transform(self, batch: Batch, *,
                   fresh: bool = False) -> tuple[DataFrame, dict[str, str | None], ViewSet | None]:
        """The batch through the transform's steps, the ends its secondary sources were pinned at (``fresh``:
        incremental secondary sources read every change, not only those after the previous batch's ends), and its
        views (the caller closes them once the batch is written)."""
        if not self.spec.steps:
            return batch.df, {}, None
        makers: dict[str, Any] = {"source": lambda: batch.df, "target": self.table.read}
        if isinstance(self.spec.source, TableSourceConfig):
            path = self.spec.resolve(self.spec.source.path)
            makers["source_snapshot"] = lambda: Table.open(path, spark=self.spark).read(as_of=batch.end_instant)
        previous = last_source_ends(self.table, self.spec.name) if self.spec.sources and not fresh else {}
        secondaries = {name: SecondarySource.open(name, spec, spark=self.spark, resolve=self.spec.resolve,
                                                  target=lambda: self.table, previous_end=previous.get(name))
                       for name, spec in self.spec.sources.items()}
        # the batch read for the partitions its rows map to is read again by the steps: kept, not read twice (a
        # change feed is decoded from log files in Python)
        mapped = any(s.mode == "affected_partitions" and "source" in s.affected_by for s in self.spec.sources.values())
        views = ViewSet(makers, persist=("source",) if mapped else ())
        for name, source in secondaries.items():
            # affected partitions map the rows of other views of the same set
            views.add(name, partial(source.read, views.get))
        ends = {name: s.end for name, s in secondaries.items()}

        def context(label: str) -> TransformContext:
            return TransformContext(spark=self.spark, pipeline=self.spec.name, step=label, position=batch.position,
                                    after=batch.after, end_instant=batch.end_instant, source_ends=ends, views=views)

        try:
            return run_steps(self.spec.steps, views, context, self.functions, self.spark), ends, views
        except BaseException:
            views.close()
            raise
