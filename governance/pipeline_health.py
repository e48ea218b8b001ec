"""Lag and health of a pipeline, from its target's audit log and its source's metadata; no Spark, no data read.

For each pipeline (:func:`pipeline_health`):

- **source progress**: the committed checkpoint; for a table source, the source's data commits still pending after
  it and the completion time of the last consumed one and of the oldest pending one; for a files source, the files
  still pending; for a Kafka source, the offset lag of its last batch;
- **lag**: seconds from the oldest pending source commit's completion to now (0 when the pipeline is caught up): how
  long new upstream data has waited. ``time() - lakegate_pipeline_last_consumed_commit_timestamp_seconds`` is the
  age of the newest upstream data the target holds;
- **runs**: batches per decision, failures (runs that failed before the gate decided, and blocked or refused batches),
  records inserted / updated / deleted, the last batch.

:func:`health_prometheus_text` renders them in the Prometheus text format (:data:`PIPELINE_METRICS` lists the
names); ``docs/grafana/lakegate-pipelines.json`` is a Grafana dashboard over them and the gate's metrics.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict

from governance.audit import AuditLog, AuditRecord, Decision, prometheus_label
from governance.errors import SourceError
from governance.gate import default_audit_dir
from governance.pipeline import PipelineSpec
from governance.sources import FilesSource, FilesSourceConfig, TableSource, TableSourceConfig
from tablecore import MetadataOnlyEngine, Table, TableCoreError
from tablecore.format.instant import parse_instant_time

__all__ = ["PIPELINE_METRICS", "PipelineHealth", "SourceProgress", "health_prometheus_text", "pipeline_health"]

logger = logging.getLogger(__name__)

FAILURES = frozenset({Decision.FAILED, Decision.BLOCKED, Decision.REFUSED})
"""Decisions counted as failures: the batch did not get through."""

PIPELINE_METRICS: tuple[tuple[str, str, str], ...] = (
    ("lakegate_pipeline_source_commits_pending", "gauge", "Source commits completed after the checkpoint"),
    ("lakegate_pipeline_source_files_pending", "gauge", "Source files after the checkpoint (files sources)"),
    ("lakegate_pipeline_source_commits_consumed_total", "counter", "Source commits consumed by published batches"),
    ("lakegate_pipeline_last_consumed_commit_timestamp_seconds", "gauge",
     "Completion time of the last source commit consumed (Unix seconds)"),
    ("lakegate_pipeline_source_lag_seconds", "gauge",
     "Seconds the oldest pending source commit has waited (0 when caught up)"),
    ("lakegate_pipeline_batches_total", "counter", "Batches by decision, failed runs included"),
    ("lakegate_pipeline_failures_total", "counter", "Failed runs and blocked or refused batches"),
    ("lakegate_pipeline_records_written_total", "counter", "Records written to the target by kind"),
    ("lakegate_pipeline_last_batch_timestamp_seconds", "gauge", "When the last batch started (Unix seconds)"),
)
"""The pipeline metrics: (name, type, help)."""


class SourceProgress(BaseModel):
    """Where a pipeline's main source stands.

    Attributes:
        kind: ``table``, ``files`` or ``kafka``.
        checkpoint: the committed position.
        pending_commits / pending_files: what waits after it (table / files sources; None otherwise).
        consumed_commits: source commits consumed by published, quarantined or skipped batches (table sources).
        last_consumed_at / oldest_pending_at: completion times of the last consumed and the oldest pending commit.
        lag_seconds: now - ``oldest_pending_at`` (0 when nothing is pending; None when unknown).
        offset_lag: Kafka: messages behind the head at the last batch, summed over partitions.
        error: why the source could not be inspected (its table is gone...).
    """

    model_config = ConfigDict(frozen=True)

    kind: str
    checkpoint: Any = None
    pending_commits: int | None = None
    pending_files: int | None = None
    consumed_commits: int = 0
    last_consumed_at: dt.datetime | None = None
    oldest_pending_at: dt.datetime | None = None
    lag_seconds: float | None = None
    offset_lag: int | None = None
    error: str | None = None


class PipelineHealth(BaseModel):
    """A pipeline's lag and health (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    pipeline: str
    target: str
    source: SourceProgress
    batches: dict[str, int]
    failures: int
    records: dict[str, int]
    last_batch: AuditRecord | None = None
    last_failure: AuditRecord | None = None
    measured_at: dt.datetime


def pipeline_health(spec: PipelineSpec, *, now: dt.datetime | None = None) -> PipelineHealth:
    """The lag and health of ``spec``'s pipeline now (reads the audit log and the source's metadata only)."""
    now = now or dt.datetime.now(dt.UTC)
    target = spec.resolve(spec.target.path)
    log = AuditLog(spec.resolve(spec.gate.audit_dir) if spec.gate.audit_dir else default_audit_dir(target))
    mine = [r for r in log.records() if r.pipeline == spec.name]
    committed = next((r for r in reversed(mine) if r.checkpoint is not None and r.instant is not None), None)
    checkpoint = committed.checkpoint.get("position") if committed and committed.checkpoint else None
    consumed = sum(r.source_commits or 0 for r in mine
                   if r.decision in (Decision.PUBLISHED, Decision.QUARANTINED, Decision.SKIPPED))
    records: Counter[str] = Counter({"inserted": 0, "updated": 0, "deleted": 0})
    for r in mine:
        if r.writes is not None:
            records.update({"inserted": r.writes.inserted, "updated": r.writes.updated, "deleted": r.writes.deleted})
    batches = Counter(r.decision.value for r in mine)
    return PipelineHealth(
        pipeline=spec.name, target=target, source=_source_progress(spec, checkpoint, consumed, mine, now),
        batches=dict(sorted(batches.items())), failures=sum(1 for r in mine if r.decision in FAILURES),
        records=dict(records), last_batch=mine[-1] if mine else None,
        last_failure=next((r for r in reversed(mine) if r.decision in FAILURES), None), measured_at=now)


def _source_progress(spec: PipelineSpec, checkpoint: Any, consumed: int, mine: list[AuditRecord],
                     now: dt.datetime) -> SourceProgress:
    source = spec.source
    try:
        if isinstance(source, TableSourceConfig):
            table = Table.open(spec.resolve(source.path), engine=MetadataOnlyEngine())
            after = checkpoint.get("instant") if isinstance(checkpoint, dict) else None
            pending = TableSource(path=table.uri).pending(table, after)
            oldest = _instant_time(pending[0][0]) if pending else None
            return SourceProgress(
                kind="table", checkpoint=checkpoint, pending_commits=len(pending), consumed_commits=consumed,
                last_consumed_at=_instant_time(after) if after else None, oldest_pending_at=oldest,
                lag_seconds=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
        if isinstance(source, FilesSourceConfig):
            # listing needs no registry, whatever the format decodes with
            files = FilesSource(path=spec.resolve(source.path), format=source.format, pattern=source.pattern)
            return SourceProgress(kind="files", checkpoint=checkpoint, pending_files=len(files.pending(checkpoint)))
        last_lag = next((r.lag for r in reversed(mine) if r.lag), ())
        return SourceProgress(kind=str(getattr(source, "kind", "?")), checkpoint=checkpoint,
                              offset_lag=sum(x.offset_lag for x in last_lag) if last_lag else None)
    except (TableCoreError, SourceError, OSError) as e:
        logger.warning("pipeline %s: cannot inspect its source: %s", spec.name, e)
        return SourceProgress(kind=str(getattr(source, "kind", "?")), checkpoint=checkpoint,
                              consumed_commits=consumed, error=str(e).splitlines()[0] if str(e) else repr(e))


def _instant_time(position: str) -> dt.datetime | None:
    try:
        return parse_instant_time(position)
    except ValueError:
        return None


def health_prometheus_text(healths: list[PipelineHealth]) -> str:
    """The pipelines' metrics (:data:`PIPELINE_METRICS`) in the Prometheus text exposition format."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name, _, _ in PIPELINE_METRICS}
    for h in healths:
        base = {"pipeline": h.pipeline}
        s = h.source
        if s.pending_commits is not None:
            samples["lakegate_pipeline_source_commits_pending"].append((base, s.pending_commits))
        if s.pending_files is not None:
            samples["lakegate_pipeline_source_files_pending"].append((base, s.pending_files))
        if s.kind == "table":
            samples["lakegate_pipeline_source_commits_consumed_total"].append((base, s.consumed_commits))
        if s.last_consumed_at is not None:
            samples["lakegate_pipeline_last_consumed_commit_timestamp_seconds"].append(
                (base, s.last_consumed_at.timestamp()))
        if s.lag_seconds is not None:
            samples["lakegate_pipeline_source_lag_seconds"].append((base, s.lag_seconds))
        for decision in Decision:
            samples["lakegate_pipeline_batches_total"].append(
                ({**base, "decision": decision.value}, h.batches.get(decision.value, 0)))
        samples["lakegate_pipeline_failures_total"].append((base, h.failures))
        for kind, n in sorted(h.records.items()):
            samples["lakegate_pipeline_records_written_total"].append(({**base, "kind": kind}, n))
        if h.last_batch is not None:
            samples["lakegate_pipeline_last_batch_timestamp_seconds"].append(
                (base, h.last_batch.started_at.timestamp()))
    out: list[str] = []
    for name, kind, help_ in PIPELINE_METRICS:
        out.append(f"# HELP {name} {help_}.")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples[name]:
            text = ",".join(f'{k}="{prometheus_label(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{text}}} {value:.3f}".rstrip("0").rstrip("."))
    return "\n".join(out) + "\n"
