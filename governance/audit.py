"""Audit records: what the gate decided for one write, stored in the commit, a JSON-lines log and an HTML report.

Every published commit carries its own audit under the ``extraMetadata`` key :data:`AUDIT_KEY` (compact JSON of an
:class:`AuditRecord`). Every audit, published or not, is also kept in the audit folder (:class:`AuditLog`:
``audit.jsonl`` on a local disk, one object per record on an object store), and its HTML report is written next to
it (``reports/<run_id>.html``).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import os
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from governance.errors import ConservationError
from tablecore.io import LocalFileIO, file_io_for

logger = logging.getLogger(__name__)

LOG_NAME = "audit.jsonl"
RECORDS_DIR = "records"
REPORTS_DIR = "reports"

AUDIT_KEY = "lakegate.audit"
"""The ``extraMetadata`` key of a commit's audit record (compact JSON)."""


class Decision(StrEnum):
    """What the gate did with a batch."""

    PUBLISHED = "published"
    """All rows published (the audit passed, possibly with warnings)."""
    QUARANTINED = "quarantined"
    """Failing rows went to the quarantine table, the rest was published."""
    BLOCKED = "blocked"
    """Nothing published; the staged commit was aborted."""
    KEPT = "kept"
    """Nothing published; the staged commit is kept for review (``lakegate wap publish|abort``)."""
    SKIPPED = "skipped"
    """Blocked, and the batch's rows parked in the quarantine table so the pipeline can go on."""
    REFUSED = "refused"
    """The batch's schema was refused before anything was written."""
    FAILED = "failed"
    """A pipeline run failed before the gate decided (a source, a transform or the storage raised); see ``error``."""


class Conservation(BaseModel):
    """Where every input row of a run went. ``rows_in = published + quarantined + deduplicated + rejected``.

    Attributes:
        rows_in: rows the gate received (delete markers included).
        published: records the commit wrote: inserted + updated + deleted.
        quarantined: rows written to the quarantine table because they failed a quarantine-policy check.
        deduplicated: rows that wrote no record of their own: duplicates of a key in the batch (the latest by the
            ordering field won), deletes of keys the table does not hold, replayed rows older than the stored row.
        rejected: rows of a blocked or refused batch.
    """

    model_config = ConfigDict(frozen=True)

    rows_in: int
    published: int = 0
    quarantined: int = 0
    deduplicated: int = 0
    rejected: int = 0

    def holds(self) -> bool:
        """Whether the four outcomes add up to the input and none is negative."""
        parts = (self.published, self.quarantined, self.deduplicated, self.rejected)
        return min(parts) >= 0 and sum(parts) == self.rows_in

    def check(self) -> Conservation:
        """Return self, or raise :class:`ConservationError` naming the numbers."""
        if not self.holds():
            raise ConservationError(
                f"rows do not add up: rows_in={self.rows_in} but published={self.published} + "
                f"quarantined={self.quarantined} + deduplicated={self.deduplicated} + rejected={self.rejected} = "
                f"{self.published + self.quarantined + self.deduplicated + self.rejected}")
        return self


class CheckVerdict(BaseModel):
    """One check's line in an audit record (the full result is in the HTML report)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    policy: str
    status: str
    failing_rows: int | None = None
    total_rows: int | None = None
    message: str = ""


class SchemaDecision(BaseModel):
    """What the schema gate decided before anything was written.

    Attributes:
        subject: the registry subject of the table.
        version / schema_id: the registered version the batch was checked against (after a registration: the new one).
        action: ``conforms`` (the batch fits the latest version), ``registered`` (a new compatible version was
            registered), ``refused`` (incompatible, or evolution not allowed), ``none`` (no registry configured).
        messages: the structural differences and compatibility reasons.
    """

    model_config = ConfigDict(frozen=True)

    subject: str | None = None
    version: int | None = None
    schema_id: int | None = None
    action: str = "none"
    messages: tuple[str, ...] = ()


class WriteCounts(BaseModel):
    """What a published commit did to the table's records.

    Attributes:
        inserted / updated / deleted: records inserted (new keys), updated (replacing a stored record), deleted.
    """

    model_config = ConfigDict(frozen=True)

    inserted: int = 0
    updated: int = 0
    deleted: int = 0


class SourceLag(BaseModel):
    """A Kafka batch's place in one topic-partition when it was published.

    Attributes:
        topic / partition: the topic-partition.
        start / end: the batch's offsets ``[start, end)``.
        offset_lag: messages between ``end`` and the partition's high watermark when the batch was read.
        newest_event_ms: the newest event time of the batch's messages in the partition (epoch ms).
        event_time_lag_s: seconds from that event time to the gate's decision (None without an event time).
    """

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int
    start: int
    end: int
    offset_lag: int
    newest_event_ms: int | None = None
    event_time_lag_s: float | None = None


class AuditRecord(BaseModel):
    """The audit of one gated write.

    Attributes:
        run_id: unique id of the gate run (also the report's file name).
        table: the table's name; table_path: its location.
        pipeline: the pipeline that ran the gate, if any.
        operation: the tablecore operation (``upsert``...).
        instant: the staged (and, when published, completed) instant; None when nothing was staged.
        decision: what the gate did.
        verdict: the suite's verdict (pass / warn / quarantine / block).
        suite: the suite's name.
        checks: one line per check.
        schema_decision: the schema gate's decision.
        conservation: where the input rows went.
        checkpoint: the source checkpoint the commit carries (pipelines).
        quarantine_instant: the quarantine table's commit holding this run's failing rows.
        durations_ms: wall time per phase (schema, stage, audit, quarantine, publish, total).
        report: path of the HTML report.
        started_at: when the run started (UTC).
        review: a reviewer's decision on a kept commit (``lakegate wap publish|abort``).
        lag: Kafka sources: per topic-partition, the batch's offsets and lag.
        writes: a published batch: records inserted, updated and deleted.
        source_commits: table sources: the source commits the batch consumed.
        error: a failed run: what failed (``transform step 2 'enrich' (python mod:fn): KeyError: 'fare'``).
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    table: str
    table_path: str
    pipeline: str | None = None
    operation: str
    instant: str | None = None
    decision: Decision
    verdict: str
    suite: str | None = None
    checks: tuple[CheckVerdict, ...] = ()
    schema_decision: SchemaDecision = Field(default_factory=SchemaDecision)
    conservation: Conservation
    checkpoint: dict[str, Any] | None = None
    quarantine_instant: str | None = None
    durations_ms: dict[str, float] = Field(default_factory=dict)
    report: str | None = None
    started_at: dt.datetime
    review: str | None = None
    lag: tuple[SourceLag, ...] = ()
    writes: WriteCounts | None = None
    source_commits: int | None = None
    error: str | None = None

    def to_metadata(self) -> str:
        """Compact JSON for the commit's ``extraMetadata``."""
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_metadata(cls, text: str) -> AuditRecord:
        """Parse the value stored under :data:`AUDIT_KEY`."""
        return cls.model_validate_json(text)

    def summary(self) -> str:
        """One line: decision, counts and instant."""
        c = self.conservation
        return (f"{self.decision.value}: rows_in={c.rows_in} published={c.published} quarantined={c.quarantined} "
                f"deduplicated={c.deduplicated} rejected={c.rejected}" + (f" instant={self.instant}" if self.instant
                                                                         else ""))


class AuditLog:
    """An audit folder (a local path or any URI tablecore's FileIO opens: ``s3://``...): the gate runs' records and
    their ``reports/<run_id>.html``.

    On a local disk the records are lines of ``audit.jsonl``, appended and fsynced. An object store cannot append,
    so there each record is an object of its own, ``records/<started_at>-<run_id>.json``, created once
    (create-if-absent) and never rewritten; :meth:`records` reads both forms, oldest first.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = str(folder)
        self._io = file_io_for(self.folder)
        self._local = isinstance(self._io, LocalFileIO)

    @property
    def log_path(self) -> str:
        """Where the records are: ``audit.jsonl`` on a local disk, the ``records/`` prefix on an object store."""
        return self._shown(self._io.join(LOG_NAME if self._local else RECORDS_DIR))

    def report_path(self, run_id: str) -> str:
        """Where the HTML report of ``run_id`` goes."""
        return self._shown(self._io.join(REPORTS_DIR, f"{run_id}.html"))

    def _shown(self, path: str) -> str:
        """A local path as is, an object as its URI."""
        return path if self._local else self._io.uri_of(path)

    def append(self, record: AuditRecord) -> None:
        """Append ``record`` (local: one line, flushed and fsynced, so the log survives a crash right after; object
        store: one object)."""
        text = record.model_dump_json(exclude_none=True)
        if self._local:
            self._io.makedirs(self._io.base)
            with open(self._io.join(LOG_NAME), "a", encoding="utf-8") as f:
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())
            return
        stamp = record.started_at.strftime("%Y%m%dT%H%M%S%f")
        name = self._io.join(RECORDS_DIR, f"{stamp}-{record.run_id}.json")
        if not self._io.create_if_absent(name, text.encode("utf-8")):
            raise FileExistsError(f"audit record {name} exists already (run ids are unique)")

    def write_report(self, run_id: str, text: str) -> str:
        """Write an HTML report whole (a reader never sees part of it); returns its path."""
        path = self._io.join(REPORTS_DIR, f"{run_id}.html")
        self._io.makedirs(self._io.join(REPORTS_DIR))
        self._io.write_bytes(path, text.encode("utf-8"))
        return self._shown(path)

    def read_report(self, run_id: str) -> str:
        """The HTML report of ``run_id``.

        Raises:
            FileNotFoundError: there is none.
        """
        path = self._io.join(REPORTS_DIR, f"{run_id}.html")
        if not self._io.exists(path):
            raise FileNotFoundError(self.report_path(run_id))
        return self._io.read_bytes(path).decode("utf-8")

    def records(self) -> Iterator[AuditRecord]:
        """Every record, oldest first (a torn last line from a crash, or an unreadable object, is skipped with a
        warning)."""
        out: list[AuditRecord] = []
        log = self._io.join(LOG_NAME)
        if self._io.exists(log):
            for n, line in enumerate(self._io.read_bytes(log).decode("utf-8", errors="replace").splitlines(),
                                     start=1):
                if line.strip():
                    try:
                        out.append(AuditRecord.model_validate_json(line))
                    except ValueError:
                        logger.warning("%s:%d: unreadable audit record skipped", self._shown(log), n)
        objects = sorted(self._io.list(self._io.join(RECORDS_DIR)), key=lambda f: f.name)
        for f in objects:
            if not f.name.endswith(".json"):
                continue
            try:
                out.append(AuditRecord.model_validate_json(self._io.read_bytes(f.path)))
            except ValueError:
                logger.warning("%s: unreadable audit record skipped", self._shown(f.path))
        if objects and len(out) > len(objects):  # both forms (a folder copied between stores): by start time
            out.sort(key=lambda r: r.started_at)
        yield from out


def render_report(record: AuditRecord, suite_html: str | None) -> str:
    """The HTML report of a gate run: the gate's decision and counts, then the suite's own report."""
    c = record.conservation
    s = record.schema_decision
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in [
        ("table", f"{record.table} ({record.table_path})"), ("pipeline", record.pipeline or "-"),
        ("operation", record.operation), ("instant", record.instant or "-"), ("verdict", record.verdict),
        ("schema", f"{s.action} (subject {s.subject}, version {s.version})" if s.subject else s.action),
        ("rows in", c.rows_in), ("published", c.published), ("quarantined", c.quarantined),
        ("deduplicated", c.deduplicated), ("rejected", c.rejected),
        ("checkpoint", json.dumps(record.checkpoint) if record.checkpoint else "-"),
        ("durations (ms)", ", ".join(f"{k} {v:.0f}" for k, v in record.durations_ms.items())),
    ])
    notes = "".join(f"<li>{html.escape(m)}</li>" for m in s.messages)
    colour = {"published": "#1a7f37", "quarantined": "#9a6700"}.get(record.decision.value, "#cf222e")
    header = (f"<section style='font-family:sans-serif;margin:1em 0;padding:1em;border:2px solid {colour}'>"
              f"<h1 style='color:{colour};margin-top:0'>gate: {html.escape(record.decision.value.upper())}</h1>"
              f"<table>{rows}</table>" + (f"<h3>schema</h3><ul>{notes}</ul>" if notes else "") + "</section>")
    if suite_html and "<body>" in suite_html:
        return suite_html.replace("<body>", "<body>" + header, 1)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>gate {html.escape(record.run_id)}</title>"
            f"</head><body>{header}</body></html>")


def prometheus_text(records: list[AuditRecord]) -> str:
    """Gate metrics of ``records`` in the Prometheus text exposition format (counters per table and decision)."""
    rows: dict[tuple[str, str], list[float]] = {}
    for r in records:
        acc = rows.setdefault((r.table, r.decision.value), [0, 0, 0, 0, 0, 0, 0.0])
        c = r.conservation
        for i, v in enumerate((1, c.rows_in, c.published, c.quarantined, c.deduplicated, c.rejected,
                               r.durations_ms.get("total", 0.0) / 1000)):
            acc[i] += v
    names = [("lakegate_gate_runs_total", "Gate runs"), ("lakegate_gate_rows_in_total", "Rows received"),
             ("lakegate_gate_rows_published_total", "Records published"),
             ("lakegate_gate_rows_quarantined_total", "Rows quarantined"),
             ("lakegate_gate_rows_deduplicated_total", "Rows deduplicated"),
             ("lakegate_gate_rows_rejected_total", "Rows rejected"),
             ("lakegate_gate_seconds_total", "Wall time of gate runs")]
    out: list[str] = []
    for i, (name, help_) in enumerate(names):
        out.append(f"# HELP {name} {help_}.")
        out.append(f"# TYPE {name} counter")
        for (table, decision), acc in sorted(rows.items()):
            value = acc[i]
            text = f"{value:g}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"
            out.append(f'{name}{{table="{prometheus_label(table)}",decision="{decision}"}} {text}')
    out.extend(_lag_gauges(records))
    return "\n".join(out) + "\n"


def _lag_gauges(records: list[AuditRecord]) -> list[str]:
    """Gauges of the newest Kafka lag per table and topic-partition (the last record that has one)."""
    newest: dict[tuple[str, str, int], SourceLag] = {}
    for r in records:
        for lag in r.lag:
            newest[(r.table, lag.topic, lag.partition)] = lag
    if not newest:
        return []
    out: list[str] = []
    for name, help_, pick in (
            ("lakegate_kafka_offset_lag", "Messages behind the partition's head when the last batch was read",
             lambda x: x.offset_lag),
            ("lakegate_kafka_event_time_lag_seconds", "Seconds from the last batch's newest event to its publish",
             lambda x: x.event_time_lag_s)):
        out.append(f"# HELP {name} {help_}.")
        out.append(f"# TYPE {name} gauge")
        for (table, topic, partition), lag in sorted(newest.items()):
            value = pick(lag)
            if value is not None:
                labels = f'table="{prometheus_label(table)}",topic="{prometheus_label(topic)}",partition="{partition}"'
                out.append(f"{name}{{{labels}}} {value:g}")
    return out


def prometheus_label(value: str) -> str:
    """A Prometheus label value, escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
