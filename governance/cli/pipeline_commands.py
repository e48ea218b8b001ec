"""``lakegate pipeline run|backfill|validate|status|metrics|schema``: run a YAML pipeline through the gate,
recompute a date range beside it, check a pipeline file, show where a pipeline is (its last batch, checkpoint, lag
and health), print its metrics for Prometheus, print the JSON Schema of pipeline files (:mod:`governance.pipeline`,
:mod:`governance.backfill`, :mod:`governance.pipeline_health`)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from governance.cli.inputs import directory_problem
from governance.cli.output import CliError, ExitCode, JsonOption, Output, cli_spark_session

if TYPE_CHECKING:
    from governance.audit import AuditRecord
    from governance.pipeline import PipelineRunner, PipelineSpec

logger = logging.getLogger(__name__)

pipeline_app = typer.Typer(help="Run YAML pipelines through the write-audit-publish gate.", no_args_is_help=True)

PipelineFile = Annotated[Path, typer.Argument(help="The pipeline YAML file.")]

RECORD_COLUMNS = ("batch", "decision", "rows in", "published", "quarantined", "deduplicated", "rejected", "instant")
DECISION_STYLES = {"published": "green", "quarantined": "yellow", "kept": "magenta", "skipped": "yellow",
                   "blocked": "bold red", "refused": "bold red"}


def decision_text(decision: str) -> Text:
    """A decision, coloured (green published, yellow quarantined/skipped, red blocked/refused)."""
    return Text(decision, style=DECISION_STYLES.get(decision, ""))


def batch_label(record: AuditRecord) -> str:
    """What a record's batch was: the source position's file or instant, else the run id."""
    position = (record.checkpoint or {}).get("position")
    if isinstance(position, dict) and len(position) == 1:
        return str(next(iter(position.values())))
    if position is not None:
        return json.dumps(position, sort_keys=True)
    return record.run_id


def record_row(record: AuditRecord, label: str | None = None) -> list[Any]:
    """One row of a summary table (see :data:`RECORD_COLUMNS`)."""
    c = record.conservation
    return [label or batch_label(record), decision_text(record.decision.value), c.rows_in, c.published,
            c.quarantined, c.deduplicated, c.rejected, record.instant]


def print_records(out: Output, records: list[AuditRecord], *, title: str | None = None) -> None:
    """The summary table of gate runs on stdout."""
    from rich.table import Table as RichTable

    from governance.cli.output import cell

    table = RichTable(title=Text(title) if title else None, title_justify="left")
    for n, name in enumerate(RECORD_COLUMNS):
        table.add_column(Text(name), justify="right" if 2 <= n <= 6 else "left")
    for record in records:
        table.add_row(*(v if isinstance(v, Text) else cell(v) for v in record_row(record)))
    out.console.print(table)


def load_pipeline_file(file: Path, out: Output) -> PipelineSpec:
    """Load the pipeline ``file`` and its suite (:func:`governance.pipeline.load_pipeline`: a file that cannot be
    read or does not validate is a ``PipelineConfigError``, exit 2), then check its local paths (:func:`check_paths`);
    no Spark, no registry call."""
    from governance.pipeline import load_pipeline

    with out.progress(f"loading {file}"):
        spec = load_pipeline(file)
    check_paths(file, spec)
    return spec


def check_paths(file: Path, spec: PipelineSpec) -> None:
    """Refuse a pipeline whose local source, target, quarantine or audit path is a file or lies below one.

    Raises:
        CliError: (exit 2) ``trips.yaml: target.path: /data/trips is a file, not a table directory``.
    """
    source_what = "table directory" if spec.source.kind == "table" else "folder"
    source_path = getattr(spec.source, "path", None)  # a kafka source has none
    paths = [("source.path", source_path, source_what), ("target.path", spec.target.path, "table directory"),
             ("gate.quarantine_path", spec.gate.quarantine_path, "table directory"),
             ("gate.audit_dir", spec.gate.audit_dir, "folder")]
    for entry, path, what in paths:
        problem = directory_problem(spec.resolve(path), what) if path is not None else None
        if problem is not None:
            raise CliError(f"{file}: {entry}: {problem}", ExitCode.USAGE)


@pipeline_app.command("run")
def run(
    file: PipelineFile,
    max_batches: Annotated[int | None, typer.Option(
        "--max-batches", min=1, help="Stop a run after this many batches (default: the schedule's, else until the "
        "source has nothing new).")] = None,
    once: Annotated[bool, typer.Option(
        "--once", help="Run once even if the schedule says every N seconds.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Run a pipeline: batch after batch from its last checkpoint through the gate into the target table.

    A blocked batch stops the pipeline (exit 5) unless the pipeline's gate says on_block: skip.
    """
    from governance.pipeline import PipelineRunner

    out = Output(json_output)
    spec = load_pipeline_file(file, out)
    with out.progress("starting Spark"):
        spark = cli_spark_session("lakegate-pipeline")
    with PipelineRunner(spec, spark) as runner:
        _run(out, spec, runner, once, max_batches)


def _run(out: Output, spec: PipelineSpec, runner: PipelineRunner, once: bool, max_batches: int | None) -> None:
    """The batches of one ``pipeline run``, their progress lines and the result document."""
    from governance.errors import BatchBlockedError

    records: list[AuditRecord] = []

    def progress(batch: Any, record: AuditRecord) -> None:
        records.append(record)
        c = record.conservation
        line = Text.assemble(
            (f"[{len(records)}] ", "dim"), f"{batch.description}: ", decision_text(record.decision.value),
            f"  in {c.rows_in}, published {c.published}, quarantined {c.quarantined}, rejected {c.rejected}",
            (f"  {record.durations_ms.get('total', 0) / 1000:.1f}s", "dim"))
        out.err.print(line)

    every = spec.schedule.every_seconds
    blocked: BatchBlockedError | None = None
    try:
        while True:
            started = time.monotonic()
            runner.run_once(max_batches=max_batches, on_batch=progress)
            if once or every is None:
                break
            time.sleep(max(0.0, every - (time.monotonic() - started)))
    except BatchBlockedError as e:
        blocked = e
    except KeyboardInterrupt:
        out.warn("interrupted")
    doc = {"pipeline": spec.name, "target": runner.table.uri, "blocked": blocked is not None,
           "records": [r.model_dump(mode="json", exclude_none=True) for r in records]}

    def human() -> None:
        if not records:
            out.line(f"pipeline {spec.name}: nothing new (checkpoint {json.dumps(runner.checkpoint())})")
            return
        print_records(out, records, title=f"pipeline {spec.name} -> {runner.table.uri}")
        reports = [r.report for r in records if r.decision.value not in ("published",) and r.report]
        for report in reports:
            out.line(f"report: {report}")

    out.result(doc, human)
    if blocked is not None:
        raise blocked


@pipeline_app.command("backfill")
def backfill(
    file: PipelineFile,
    start: Annotated[str, typer.Option("--from", help="The first day of the range (yyyy-mm-dd).")],
    end: Annotated[str, typer.Option("--to", help="The last day of the range (yyyy-mm-dd), included.")],
    max_batches: Annotated[int | None, typer.Option(
        "--max-batches", min=1, help="Stop after this many batches (the next run resumes).")] = None,
    json_output: JsonOption = False,
) -> None:
    """Recompute a date range of the pipeline's target from snapshots of its sources, through the same transform,
    gate and validators, beside the incremental pipeline: its commits do not move the pipeline's checkpoint. A
    killed backfill resumes where it stopped when run again with the same range (docs/pipelines.md, "Backfill")."""
    import datetime as dt

    from governance.backfill import Backfill
    from governance.errors import BatchBlockedError
    from governance.pipeline import PipelineRunner

    out = Output(json_output)
    try:
        first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    except ValueError as e:
        raise CliError(f"--from / --to: {e} (expected yyyy-mm-dd)", ExitCode.USAGE) from None
    spec = load_pipeline_file(file, out)
    with out.progress("starting Spark"):
        spark = cli_spark_session("lakegate-backfill")
    records: list[AuditRecord] = []
    blocked: BatchBlockedError | None = None
    with PipelineRunner(spec, spark) as runner:
        job = Backfill(runner, first, last)

        def progress(batch: Any, record: AuditRecord) -> None:
            records.append(record)
            c = record.conservation
            out.err.print(Text.assemble((f"[{len(records)}] ", "dim"), f"{batch.description}: ",
                                        decision_text(record.decision.value),
                                        f"  in {c.rows_in}, published {c.published}"))

        try:
            job.run(max_batches=max_batches, on_batch=progress)
        except BatchBlockedError as e:
            blocked = e
        done = job.done()
        remaining = [b for b in job.batches() if f"{b[0]}..{b[1]}" not in done]
        doc = {"pipeline": spec.name, "backfill": job.id, "target": runner.table.uri, "blocked": blocked is not None,
               "remaining_batches": [f"{a}..{b}" for a, b in remaining],
               "records": [r.model_dump(mode="json", exclude_none=True) for r in records]}

        def human() -> None:
            if records:
                print_records(out, records, title=f"backfill {job.id} of {spec.name} -> {runner.table.uri}")
            out.line(f"backfill {job.id}: " + ("done" if not remaining else
                                               f"{len(remaining)} batch(es) left (run again to resume)"))

        out.result(doc, human)
    if blocked is not None:
        raise blocked


@pipeline_app.command("validate")
def validate(file: PipelineFile, json_output: JsonOption = False) -> None:
    """Load a pipeline and its validators suite and print what it would do (exit 2, naming file:line, if invalid)."""
    from tablecore.io import file_io_for
    from tablecore.table import PROPERTIES

    out = Output(json_output)
    spec = load_pipeline_file(file, out)
    suite = spec.suite()
    target = spec.resolve(spec.target.path)
    io = file_io_for(target)
    exists = io.exists(io.join(PROPERTIES))
    source = spec.source.model_dump(mode="json")
    if "path" in source:
        source["path"] = spec.resolve(source["path"])
    checks = [{"name": c.name, "kind": c.kind, "policy": c.policy.value, "view": getattr(c, "view", None)}
              for c in (suite.checks if suite is not None else ())]
    gate_doc = spec.gate.model_dump(mode="json")
    doc: dict[str, Any] = {
        "file": str(file), "valid": True, "name": spec.name, "description": spec.description, "source": source,
        "transform": [step.model_dump(mode="json", exclude_none=True) for step in spec.steps] or None,
        "sources": {name: {**s.model_dump(mode="json", exclude_none=True), "path": s.path if s.path == "{target}"
                           else spec.resolve(s.path)} for name, s in spec.sources.items()} or None,
        "target": {**spec.target.model_dump(mode="json"), "path": target, "exists": exists},
        "registry": spec.registry.model_dump(mode="json") if spec.registry is not None else None,
        "gate": gate_doc,
        "suite": {"name": suite.name, "checks": checks} if suite is not None else None,
        "schedule": spec.schedule.model_dump(mode="json"),
    }

    def human() -> None:
        t = spec.target
        every = spec.schedule.every_seconds
        out.fields({
            "pipeline": spec.name,
            "source": ", ".join(f"{k}={v}" for k, v in source.items() if v is not None),
            "transform": "; ".join(step.get("name") or (f"python {step['python']}" if "python" in step else "sql")
                                   for step in doc["transform"] or []) or "-",
            "sources": ", ".join(f"{n} ({s['mode']})" for n, s in (doc["sources"] or {}).items()) or "-",
            "target": f"{target} ({t.table_type}, key {','.join(t.record_key)}"
                      + (f", partitioned by {','.join(t.partition_fields)}" if t.partition_fields else "")
                      + f", {t.operation}; " + ("exists)" if exists else "created on the first run)"),
            "registry": f"{spec.registry.url} subject {spec.registry.subject or t.name + '-value'}"
                        if spec.registry is not None else "none (no schema gate)",
            "gate": ", ".join(f"{k}={v}" for k, v in gate_doc.items() if v is not None),
            "suite": f"{suite.name} ({len(checks)} checks)" if suite is not None else "none",
            "schedule": (f"every {every:g}s" if every else "once")
                        + (f", at most {spec.schedule.max_batches_per_run} batches per run"
                           if spec.schedule.max_batches_per_run else ""),
        }, title=f"{file}: valid")
        if checks:
            out.table(["check", "kind", "policy", "view"], [[c["name"], c["kind"], c["policy"], c["view"]]
                                                            for c in checks])

    out.result(doc, human)


@pipeline_app.command("status")
def status(file: PipelineFile, json_output: JsonOption = False) -> None:
    """Where a pipeline is: its last batch (decision, instant, counts), the checkpoint it committed and, for a Kafka
    source, the lag of each topic-partition — from the target's audit log (and the history table's, for a changelog
    pipeline); no Spark is started."""
    from governance.audit import AuditLog
    from governance.gate import default_audit_dir

    out = Output(json_output)
    spec = load_pipeline_file(file, out)
    logs = [("target", AuditLog(spec.resolve(spec.gate.audit_dir) if spec.gate.audit_dir
                                else default_audit_dir(spec.resolve(spec.target.path))))]
    if spec.changelog is not None:
        logs.append(("history", AuditLog(default_audit_dir(spec.resolve(spec.changelog.history.path)))))
    tables: dict[str, Any] = {}
    for role, log in logs:
        mine = [r for r in log.records() if r.pipeline == spec.name]
        last = mine[-1] if mine else None
        committed = next((r for r in reversed(mine) if r.checkpoint is not None and r.instant is not None), None)
        tables[role] = {
            "audit_log": log.log_path, "batches": len(mine),
            "last": last.model_dump(mode="json", exclude_none=True) if last is not None else None,
            "checkpoint": committed.checkpoint.get("position") if committed and committed.checkpoint else None,
            "lag": [x.model_dump(mode="json") for x in (last.lag if last is not None else ())]}
    from governance.pipeline_health import pipeline_health

    health = pipeline_health(spec)
    doc = {"pipeline": spec.name, "tables": tables, "health": health_doc(health)}

    def human() -> None:
        src = health.source
        out.fields({
            "source": src.kind + (f" (cannot inspect: {src.error})" if src.error else ""),
            "pending": (f"{src.pending_commits} commit(s)" if src.pending_commits is not None
                        else f"{src.pending_files} file(s)" if src.pending_files is not None
                        else f"{src.offset_lag} message(s)" if src.offset_lag is not None else "-"),
            "lag": f"{src.lag_seconds:.1f}s" if src.lag_seconds is not None else "-",
            "last consumed commit": src.last_consumed_at.isoformat() if src.last_consumed_at else "-",
            "consumed commits": src.consumed_commits,
            "batches": ", ".join(f"{k} {v}" for k, v in health.batches.items()) or "none",
            "failures": health.failures,
            "records": ", ".join(f"{k} {v}" for k, v in health.records.items()),
            "last failure": (f"{health.last_failure.started_at.isoformat()} {health.last_failure.decision.value}"
                             + (f": {health.last_failure.error}" if health.last_failure.error else ""))
                            if health.last_failure else "none",
        }, title=f"pipeline {spec.name}: health")
        for role, t in tables.items():
            last = t["last"]
            out.fields({
                "audit log": t["audit_log"], "batches": t["batches"],
                "last batch": (f"{last['decision']} {last.get('instant') or '-'} at {last['started_at']} (in "
                               f"{last['conservation']['rows_in']}, published {last['conservation']['published']}, "
                               f"quarantined {last['conservation']['quarantined']})") if last else "none yet",
                "checkpoint": json.dumps(t["checkpoint"]) if t["checkpoint"] is not None else "none",
            }, title=f"pipeline {spec.name}: {role} {last['table'] if last else ''}".rstrip())
            if t["lag"]:
                out.table(["topic", "partition", "offsets", "offset lag", "event-time lag s"],
                          [[x["topic"], x["partition"], f"{x['start']}..{x['end']}", x["offset_lag"],
                            x["event_time_lag_s"]] for x in t["lag"]])

    out.result(doc, human)


def health_doc(health: Any) -> dict[str, Any]:
    """The JSON form of a :class:`~governance.pipeline_health.PipelineHealth` (the last batch and failure as their
    decision, instant, time and error)."""
    doc: dict[str, Any] = health.model_dump(mode="json", exclude={"last_batch", "last_failure"})
    for key in ("last_batch", "last_failure"):
        r = getattr(health, key)
        doc[key] = None if r is None else {
            "decision": r.decision.value, "instant": r.instant, "started_at": r.started_at.isoformat(),
            "writes": r.writes.model_dump() if r.writes else None, "source_commits": r.source_commits,
            "error": r.error}
    return doc


@pipeline_app.command("metrics")
def metrics(files: Annotated[list[Path], typer.Argument(help="Pipeline YAML files.")]) -> None:
    """Print the pipelines' lag and health metrics in the Prometheus text format (for a textfile collector or a
    push gateway; docs/grafana/lakegate-pipelines.json plots them): pending source commits, lag, consumed commits,
    batches by decision, failures, records written. No Spark is started."""
    from governance.pipeline_health import health_prometheus_text, pipeline_health

    out = Output(False)
    healths = [pipeline_health(load_pipeline_file(f, out)) for f in files]
    typer.echo(health_prometheus_text(healths), nl=False)


@pipeline_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of pipeline files (docs/pipeline.schema.json), for editors."""
    from governance.pipeline import pipeline_json_schema

    typer.echo(pipeline_schema_text(pipeline_json_schema()))


def pipeline_schema_text(schema_doc: dict[str, Any]) -> str:
    """The text of ``docs/pipeline.schema.json``: the schema, indented, keys in the models' order."""
    return json.dumps(schema_doc, indent=2, ensure_ascii=False)
