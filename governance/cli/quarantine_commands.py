"""``lakegate quarantine list|replay``: the rows a gate held back (:mod:`governance.quarantine`) and their replay
through the same gate once fixed (:mod:`governance.replay`).

``list`` never collects the quarantine table: it prints aggregated counts and at most ``--limit`` records, taken
with a Spark ``limit``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from governance.cli.inputs import check_folder_option, require_table
from governance.cli.output import CliError, ExitCode, JsonOption, Output
from governance.cli.table_commands import Limit, TablePath, _open, _spark

if TYPE_CHECKING:
    from governance.pipeline import PipelineRunner, PipelineSpec

logger = logging.getLogger(__name__)

quarantine_app = typer.Typer(help="Inspect the quarantine table of a target; replay fixed rows through the gate.",
                             no_args_is_help=True)

STATUSES = ("quarantined", "blocked", "replayed")
LIST_COLUMNS = ("qkey", "status", "check_name", "reason", "batch_id", "replay_outcome", "row_json")


def _statuses(values: list[str] | None) -> tuple[str, ...] | None:
    chosen = [v.strip() for value in values or () for v in value.split(",") if v.strip()]
    unknown = sorted(set(chosen) - set(STATUSES))
    if unknown:
        raise typer.BadParameter(f"unknown status {', '.join(unknown)}; one of {', '.join(STATUSES)}",
                                 param_hint="--status")
    return tuple(chosen) or None


def parse_assignments(values: list[str] | None) -> dict[str, str]:
    """``COL=EXPR`` options as a mapping (the expression may itself hold ``=``)."""
    out: dict[str, str] = {}
    for value in values or ():
        column, sep, expression = value.partition("=")
        if not sep or not column.strip() or not expression.strip():
            raise typer.BadParameter(f"{value!r} is not COL=EXPR", param_hint="--set")
        out[column.strip()] = expression.strip()
    return out


@quarantine_app.command("list")
def list_records(
    path: TablePath,
    quarantine_path: Annotated[str | None, typer.Option(
        "--quarantine-path", help="The quarantine table (default: <table path>_quarantine).")] = None,
    status: Annotated[list[str] | None, typer.Option(
        "--status", help="Only these statuses: quarantined, blocked, replayed (repeat or comma-separate).")] = None,
    limit: Limit = 20,
    json_output: JsonOption = False,
) -> None:
    """Counts of a table's quarantined rows per status and check, and up to --limit records."""
    from pyspark.sql import functions as F

    from governance.quarantine import QuarantineTable, default_quarantine_path

    out = Output(json_output)
    statuses = _statuses(status)
    check_folder_option(quarantine_path, "--quarantine-path", "table directory")
    table = _open(path, out)
    q = QuarantineTable(quarantine_path or default_quarantine_path(table.uri), table.spark)
    with out.progress("reading the quarantine table"):
        df = q.read(target=table.name, statuses=statuses)
        counts = [{"status": r["status"], "check_name": r["check_name"], "rows": r["count"]}
                  for r in df.groupBy("status", "check_name").count().orderBy("status", "check_name").collect()]
        taken = [r.asDict() for r in df.orderBy(F.col("updated_at").desc(), "qkey")
                 .select(*LIST_COLUMNS).limit(limit + 1).collect()] if limit else []
    truncated = len(taken) > limit or (limit == 0 and sum(c["rows"] for c in counts) > 0)
    records = taken[:limit]
    doc = {"path": table.uri, "quarantine_path": q.path, "statuses": list(statuses) if statuses else None,
           "total": sum(c["rows"] for c in counts), "counts": counts, "limit": limit, "truncated": truncated,
           "records": records}

    def human() -> None:
        if not counts:
            out.line(f"no quarantined rows for {table.name} in {q.path}")
            return
        out.table(["status", "check", "rows"], [[c["status"], c["check_name"], c["rows"]] for c in counts],
                  title=f"quarantine of {table.name}: {doc['total']} rows ({q.path})")
        if records:
            out.table(list(LIST_COLUMNS), [[r[c] for c in LIST_COLUMNS] for r in records],
                      caption=f"{len(records)} rows shown" + (", more match" if truncated else ""))

    out.result(doc, human)


@quarantine_app.command("replay")
def replay_command(
    file: Annotated[Path, typer.Argument(help="The pipeline file: its target, gate and quarantine table.")],
    where: Annotated[str | None, typer.Option(
        "--where", help="A Spark SQL condition on quarantine columns, e.g. \"check_name = 'registry.semantic'\".")
    ] = None,
    assignments: Annotated[list[str] | None, typer.Option(
        "--set", help="Fix a column before the replay: COL=EXPR, a Spark SQL expression over the row's columns "
        "(repeatable), e.g. --set 'rider_age=NULL'.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Re-submit open quarantined (or parked) rows of a pipeline's target through the pipeline's gate.

    Rows the table already holds in a newer version are skipped (superseded); the replayed records are marked.
    Exit 5 when the gate blocks the replayed batch (the records stay open).
    """
    from governance.cli.pipeline_commands import load_pipeline_file
    from governance.pipeline import PipelineRunner

    out = Output(json_output)
    sets = parse_assignments(assignments)
    spec = load_pipeline_file(file, out)
    require_table(spec.resolve(spec.target.path), hint=" (run the pipeline first)")
    with out.progress("starting Spark"):
        runner = PipelineRunner(spec, _spark())
    with runner:
        _replay(out, spec, runner, where, sets)


def _replay(out: Output, spec: PipelineSpec, runner: PipelineRunner, where: str | None,
            sets: dict[str, str]) -> None:
    """Replay through the pipeline's gate and print the result."""
    from governance.replay import replay

    if runner.changelog is not None:
        _replay_changelog(out, spec, runner, where, sets)
        return
    gate = runner.gate()
    schema = gate.table.schema()
    if schema is not None:
        unknown = sorted(set(sets) - set(schema.fieldNames()))
        if unknown:
            raise CliError(f"--set {', '.join(unknown)}: table {gate.table.name} has no such column "
                           f"({', '.join(schema.fieldNames())})", ExitCode.USAGE)
    with out.progress("replaying"):
        result = replay(gate, where=where, assignments=sets, operation=spec.target.operation)
    record = result.record
    doc: dict[str, Any] = {"pipeline": spec.name, "target": gate.table.uri, "picked": result.picked,
                           "superseded": result.superseded, "marked": result.marked,
                           "decision": record.decision.value if record is not None else None,
                           "record": record.model_dump(mode="json", exclude_none=True) if record else None}

    def human() -> None:
        if result.picked == 0:
            out.line(f"nothing to replay for {gate.table.name} (no open quarantine records"
                     + (f" matching {where!r})" if where else ")"))
            return
        out.fields({"picked": result.picked, "superseded": result.superseded, "marked replayed": result.marked,
                    "gate": record.summary() if record is not None else "nothing submitted",
                    "report": record.report if record is not None else None},
                   title=f"replay into {gate.table.name}")

    out.result(doc, human)
    if record is not None and record.decision.value not in ("published", "quarantined"):
        raise CliError(f"the gate {record.decision.value} the replayed rows; they stay open (report: "
                       f"{record.report})", ExitCode.BLOCKED)


def _replay_changelog(out: Output, spec: PipelineSpec, runner: PipelineRunner, where: str | None,
                      sets: dict[str, str]) -> None:
    """A changelog pipeline's replay: the history table's quarantined events through both gates."""
    writer = runner.changelog
    assert writer is not None
    with out.progress("replaying"):
        picked, records = writer.replay(where=where, assignments=sets)
    record = records.primary if records is not None else None
    doc: dict[str, Any] = {"pipeline": spec.name, "target": runner.table.uri, "history": writer.history.uri,
                           "picked": picked, "decision": record.decision.value if record is not None else None,
                           "records": [r.model_dump(mode="json", exclude_none=True) for r in
                                       ((records.history, records.merged) if records is not None else ())
                                       if r is not None]}

    def human() -> None:
        if picked == 0:
            out.line(f"nothing to replay for {writer.history.name} (no open quarantine records"
                     + (f" matching {where!r})" if where else ")"))
            return
        assert records is not None
        out.fields({"picked": picked, "history": records.history.summary(),
                    "merged": records.merged.summary() if records.merged is not None else "not written"},
                   title=f"replay into {writer.history.name} and {runner.table.name}")

    out.result(doc, human)
    if record is not None and record.decision.value not in ("published", "quarantined"):
        raise CliError(f"the gate {record.decision.value} the replayed events; they stay open (report: "
                       f"{record.report})", ExitCode.BLOCKED)
