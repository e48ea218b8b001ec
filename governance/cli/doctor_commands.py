"""``lakegate table doctor PATH [--deep] [--json]``: check a table's files against its timeline and report every
problem (:func:`tablecore.verify_table`).

Without ``--deep`` no Spark session is started: the listing, the timeline files, Parquet footers and the log files
of the latest snapshot are read in this process. ``--deep`` also reads every row, in Spark jobs. The command exits
0 when nothing is found and 6 (``CORRUPT``) when anything is, after printing the report (``--json``: the report
document).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from governance.cli.inputs import check_local_directory
from governance.cli.output import ExitCode, JsonOption, Output
from governance.cli.table_commands import TablePath, table_app

if TYPE_CHECKING:
    from tablecore import IntegrityReport

logger = logging.getLogger(__name__)

__all__ = ["doctor"]


def _relative(path: str | None, base: str) -> str:
    """``path`` relative to the table base (human output), or as is."""
    if not path:
        return ""
    prefix = base.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _human(out: Output, report: IntegrityReport, base: str) -> None:
    summary = (f"{report.files_checked} files checked in {report.partitions} partitions "
               f"({'every row read, ' if report.deep else ''}{report.elapsed:.2f} s)")
    if report.ok:
        out.line(f"table {report.path} is intact: {summary}")
        return
    out.table(["severity", "kind", "instant", "file", "problem"],
              [(p.severity, p.kind, p.instant or "", _relative(p.path, base), p.message) for p in report.problems],
              title=f"table {report.path}")
    errors = len(report.errors)
    out.line(f"{len(report.problems)} problem{'s' if len(report.problems) != 1 else ''} ({errors} "
             f"error{'s' if errors != 1 else ''}, {len(report.problems) - errors} warning"
             f"{'s' if len(report.problems) - errors != 1 else ''}): {summary}")


@table_app.command("doctor")
def doctor(
    path: TablePath,
    deep: Annotated[bool, typer.Option(
        "--deep", help="Also read every row of every file slice (starts Spark).")] = False,
    json_output: JsonOption = False,
) -> None:
    """Check that every file the latest snapshot needs exists and opens with the size and row count its commit
    recorded, that every timeline file parses, and that no orphan or half-written file is left. Exit code 0: intact;
    6: problems found (each names the file, the instant and what to do)."""
    from tablecore import verify_table
    from tablecore.io import file_io_for

    check_local_directory(path)
    out = Output(json_output)
    engine = None
    if deep:
        from governance.cli.output import cli_spark_session
        from tablecore.spark.engine import SparkEngine

        with out.progress("starting Spark"):
            engine = SparkEngine(cli_spark_session("lakegate-cli"))
    with out.progress(f"checking {path}"):
        report = verify_table(path, deep=deep, engine=engine)
    base = file_io_for(path).base
    out.result(report.to_dict(), lambda: _human(out, report, base))
    if not report.ok:
        raise typer.Exit(ExitCode.CORRUPT)
