"""``lakegate table upgrade PATH --to 8``: move a version-6 table to Hudi 1.x's table version 8 in place
(:mod:`tablecore.services.upgrade`): crash-safe and rerunnable, with ``--dry-run`` to see what changes first."""

from __future__ import annotations

from typing import Annotated

import typer

from governance.cli.inputs import require_table
from governance.cli.output import JsonOption, Output, cli_spark_session
from governance.cli.table_commands import TablePath, table_app


@table_app.command("upgrade")
def upgrade(
    path: TablePath,
    to: Annotated[int, typer.Option("--to", help="The table version to upgrade to.")] = 8,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; change nothing.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Upgrade a table in place to a newer Hudi table version (6 -> 8): the timeline moves to .hoodie/timeline/
    with completion times, commit metadata becomes Avro; stop the table's writers first."""
    from tablecore import Table

    out = Output(json_output)
    require_table(path)
    with out.progress(f"opening {path}"):
        table = Table.open(path, spark=cli_spark_session("lakegate-cli"))
    with out.progress("planning" if dry_run else f"upgrading to version {to}"):
        plan = table.upgrade(to, dry_run=dry_run)
    doc = {"path": table.path, "dry_run": dry_run, "from_version": plan.from_version, "to_version": plan.to_version,
           "instant_files": [{"from": old, "to": new, "conversion": how} for old, new, how in plan.instant_files],
           "properties": plan.properties, "metadata_table_disabled": plan.metadata_table,
           "slices_to_compact": plan.slices_to_compact, "leftovers_deleted": [] if dry_run else plan.leftovers}

    def human() -> None:
        out.line(("would upgrade (dry run): " if dry_run else "upgraded: ") + plan.describe()[0])
        for line in plan.describe()[1:]:
            out.line(line)

    out.result(doc, human)
