"""``lakegate wap list|publish|abort``: review the staged commits a gate kept (``on_block: keep``) —
:mod:`governance.wap`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer

from governance.cli.inputs import check_folder_option
from governance.cli.output import JsonOption, Output
from governance.cli.table_commands import Instant, TablePath, _open

if TYPE_CHECKING:
    from governance.audit import AuditLog, AuditRecord
    from tablecore import Table

logger = logging.getLogger(__name__)

wap_app = typer.Typer(help="Review staged commits a gate kept: list, publish or abort them.", no_args_is_help=True)

AuditDir = Annotated[str | None, typer.Option(
    "--audit-dir", help="The gate's audit folder (default: .hoodie/.aux/lakegate inside the table).")]
Note = Annotated[str, typer.Option("--note", help="The reviewer's note, kept in the audit record.")]


def audit_log(table: Table, audit_dir: str | None) -> AuditLog:
    """The audit log of ``table`` (``audit_dir``, else the gate's default folder)."""
    from governance.audit import AuditLog
    from governance.gate import default_audit_dir

    return AuditLog(audit_dir or default_audit_dir(table.uri))


def review_doc(table: Table, record: AuditRecord) -> dict[str, Any]:
    """The ``--json`` document of a review."""
    return {"path": table.uri, "instant": record.instant, "decision": record.decision.value,
            "review": record.review, "record": record.model_dump(mode="json", exclude_none=True)}


@wap_app.command("list")
def list_kept(path: TablePath, audit_dir: AuditDir = None, json_output: JsonOption = False) -> None:
    """List the staged commits of a table waiting for review, with the audit that kept them."""
    from governance.wap import kept_commits

    check_folder_option(audit_dir, "--audit-dir")
    out = Output(json_output)
    table = _open(path, out)
    kept = kept_commits(table, audit_log(table, audit_dir))
    items: list[dict[str, Any]] = []
    for k in kept:
        res = k.staged.result
        a = k.audit
        items.append({
            "instant": k.staged.instant, "operation": k.staged.operation, "input_rows": res.input_rows,
            "inserted": res.inserted, "updated": res.updated, "deleted": res.deleted,
            "run_id": a.run_id if a else None, "verdict": a.verdict if a else None,
            "failed_checks": [c.name for c in a.checks if c.status == "fail"] if a else [],
            "report": a.report if a else None})
    doc = {"path": table.uri, "kept": items}

    def human() -> None:
        if not items:
            out.line(f"no staged commits waiting for review in {table.uri}")
            return
        out.table(["instant", "operation", "rows", "inserted", "updated", "deleted", "failed checks", "report"],
                  [[i["instant"], i["operation"], i["input_rows"], i["inserted"], i["updated"], i["deleted"],
                    ", ".join(i["failed_checks"]) or "-", i["report"]] for i in items],
                  title=f"kept for review: {table.uri}",
                  caption="lakegate wap publish|abort TABLE INSTANT [--note TEXT]")

    out.result(doc, human)


@wap_app.command("publish")
def publish(path: TablePath, instant: Instant, note: Note = "", audit_dir: AuditDir = None,
            json_output: JsonOption = False) -> None:
    """Publish a kept commit after review (readers see it at once; the audit goes into the commit)."""
    from governance.wap import publish_kept

    check_folder_option(audit_dir, "--audit-dir")
    out = Output(json_output)
    table = _open(path, out)
    with out.progress(f"publishing {instant}"):
        record = publish_kept(table, audit_log(table, audit_dir), instant, note=note)
    out.result(review_doc(table, record), lambda: out.line(f"published {instant} of {table.name}: "
                                                           f"{record.summary()}"))


@wap_app.command("abort")
def abort(path: TablePath, instant: Instant, note: Note = "", audit_dir: AuditDir = None,
          json_output: JsonOption = False) -> None:
    """Abort a kept commit after review (its files are deleted; readers never saw it)."""
    from governance.wap import abort_kept

    check_folder_option(audit_dir, "--audit-dir")
    out = Output(json_output)
    table = _open(path, out)
    with out.progress(f"aborting {instant}"):
        record = abort_kept(table, audit_log(table, audit_dir), instant, note=note)
    out.result(review_doc(table, record), lambda: out.line(f"aborted {instant} of {table.name}: "
                                                           f"{record.summary()}"))
