"""``lakegate audit list|metrics``: a table's audit trail — every gate run appended to ``audit.jsonl`` in the audit
folder (:class:`governance.audit.AuditLog`), and Prometheus metrics derived from it. No Spark is started."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from governance.cli.inputs import check_folder_option, require_table
from governance.cli.output import JsonOption, Output
from governance.cli.table_commands import TablePath

if TYPE_CHECKING:
    from governance.audit import AuditLog

logger = logging.getLogger(__name__)

audit_app = typer.Typer(help="A table's audit trail: every gate run, and Prometheus metrics.", no_args_is_help=True)

AuditDir = Annotated[str | None, typer.Option(
    "--audit-dir", help="The gate's audit folder (default: .hoodie/.aux/lakegate inside the table).")]


def open_log(path: str, audit_dir: str | None) -> tuple[str, AuditLog]:
    """The table's URI and audit log (a local path or ``--audit-dir`` that is a file is a USAGE error, a missing table
    a NOT_FOUND error; no Spark needed)."""
    from governance.audit import AuditLog
    from governance.gate import default_audit_dir
    from tablecore.io import file_io_for

    check_folder_option(audit_dir, "--audit-dir")
    require_table(path)
    uri = file_io_for(path).table_uri()
    return uri, AuditLog(audit_dir or default_audit_dir(uri))


@audit_app.command("list")
def list_audits(
    path: TablePath,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="Print the newest N records.")] = 20,
    audit_dir: AuditDir = None,
    json_output: JsonOption = False,
) -> None:
    """The newest gate runs of a table: run, instant, decision, row counts and the HTML report (oldest first)."""
    out = Output(json_output)
    uri, log = open_log(path, audit_dir)
    records = list(log.records())
    shown = records[-limit:] if limit else []
    doc = {"path": uri, "audit_log": str(log.log_path), "total": len(records), "limit": limit,
           "records": [r.model_dump(mode="json", exclude_none=True) for r in shown]}

    def human() -> None:
        if not records:
            out.line(f"no gate runs recorded for {uri} ({log.log_path})")
            return
        from rich.table import Table as RichTable
        from rich.text import Text

        from governance.cli.output import cell
        from governance.cli.pipeline_commands import decision_text

        table = RichTable(title=Text(f"audit log of {uri}"), title_justify="left",
                          caption=Text(f"{len(shown)} of {len(records)} runs ({log.log_path})"),
                          caption_justify="left")
        for name in ("run", "instant", "decision", "rows in", "published", "quarantined", "deduplicated",
                     "rejected", "review", "report"):
            table.add_column(Text(name), overflow="fold")
        for r in shown:
            c = r.conservation
            table.add_row(cell(r.run_id), cell(r.instant), decision_text(r.decision.value),
                          *(cell(v) for v in (c.rows_in, c.published, c.quarantined, c.deduplicated, c.rejected,
                                              r.review, r.report)))
        out.console.print(table)

    out.result(doc, human)


@audit_app.command("metrics")
def metrics(path: TablePath, audit_dir: AuditDir = None) -> None:
    """Gate metrics of a table in the Prometheus text format (runs and rows per decision), from its audit log."""
    from governance.audit import prometheus_text

    _, log = open_log(path, audit_dir)
    sys.stdout.write(prometheus_text(list(log.records())))
