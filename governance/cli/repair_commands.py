"""``lakegate table repair``: the explicit ways out of a damaged table (``lakegate table doctor`` finds the damage).

Each repair is one of the table's own crash-safe operations, recorded like any other:

- ``--rollback-instant T``: roll back the newest completed write ``T`` whose commit file or data files are damaged.
  It works without ``T``'s commit metadata (the partitions come from its inflight plan, its files from their names
  and block instants) and is recorded as a ``rollback`` instant;
- ``--restore SAVEPOINT``: return to a savepoint, rolling back every later instant (a ``rollback`` instant each);
- ``--properties-from-backup``: write ``hoodie.properties.backup`` back over a damaged ``hoodie.properties`` (Hudi's
  recovery; the file is outside the timeline, so this one is logged, not recorded as an instant).
"""

from __future__ import annotations

from typing import Annotated

import typer

from governance.cli.inputs import check_local_directory, require_table
from governance.cli.output import CliError, JsonOption, Output, cli_spark_session
from governance.cli.table_commands import TablePath, table_app


@table_app.command("repair")
def repair(
    path: TablePath,
    rollback_instant: Annotated[str | None, typer.Option(
        "--rollback-instant", help="Roll back this damaged instant (the newest completed write).")] = None,
    restore: Annotated[str | None, typer.Option(
        "--restore", help="Return the table to this savepoint.")] = None,
    properties_from_backup: Annotated[bool, typer.Option(
        "--properties-from-backup", help="Restore hoodie.properties from hoodie.properties.backup.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Repair a damaged table: roll back a damaged instant, restore a savepoint, or recover hoodie.properties."""
    chosen = [name for name, given in (("--rollback-instant", rollback_instant is not None),
                                       ("--restore", restore is not None),
                                       ("--properties-from-backup", properties_from_backup)) if given]
    if len(chosen) != 1:
        raise CliError("give exactly one repair: --rollback-instant INSTANT, --restore SAVEPOINT or "
                       f"--properties-from-backup (got {', '.join(chosen) or 'none'})")
    out = Output(json_output)
    if properties_from_backup:
        from tablecore.io import file_io_for
        from tablecore.table_properties import recover_properties

        check_local_directory(path)
        restored = recover_properties(file_io_for(path))
        doc = {"path": path, "repair": "properties-from-backup", "restored": restored}
        out.result(doc, lambda: out.line("restored hoodie.properties from its backup" if restored
                                         else "hoodie.properties is intact: nothing to restore"))
        return

    from tablecore import Table

    require_table(path)
    with out.progress(f"opening {path}"):
        table = Table.open(path, spark=cli_spark_session("lakegate-cli"))
    if rollback_instant is not None:
        with out.progress(f"rolling back {rollback_instant}"):
            result = table.rollback(rollback_instant)
        doc = {"path": table.path, "repair": "rollback-instant", "rolled_back": result.rolled_back,
               "rollback_instant": result.instant, "files_deleted": result.files_deleted,
               "rollback_blocks": result.rollback_blocks}
        out.result(doc, lambda: out.line(
            f"rolled back {result.rolled_back} (rollback {result.instant}: {result.files_deleted} files deleted, "
            f"{result.rollback_blocks} rollback blocks)"))
        return
    assert restore is not None
    with out.progress(f"restoring {restore}"):
        rolled_back = table.restore(restore)
    doc = {"path": table.path, "repair": "restore", "restored_to": restore, "rolled_back": rolled_back}
    out.result(doc, lambda: out.line(f"restored to {restore}: rolled back {', '.join(rolled_back) or 'nothing'}"))
