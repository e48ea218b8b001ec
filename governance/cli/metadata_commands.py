"""``lakegate table metadata rebuild|verify PATH``: the metadata table's ``files`` partition (the list of a table's
data files that readers use instead of listing directories; :mod:`tablecore.metadata_table`, docs/metadata-table.md).
No Spark session is started.

Exit codes: 0 done (verify: the metadata table and storage agree), 1 verify found differences, 2 the table's version
has no metadata table lakegate writes (6), 3 no table at PATH, 6 the metadata table is damaged.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from governance.cli.inputs import require_table
from governance.cli.output import JsonOption, Output
from governance.cli.table_commands import table_app

logger = logging.getLogger(__name__)

__all__ = ["metadata_app"]

metadata_app = typer.Typer(help="The metadata table: the file listing readers use instead of listing directories.",
                           no_args_is_help=True)
table_app.add_typer(metadata_app, name="metadata")


@metadata_app.command("rebuild")
def rebuild(
    path: Annotated[str, typer.Argument(help="Base path or URI of the table (table version 8).")],
    record_index: Annotated[bool, typer.Option(
        "--record-index", help="Also build the record-level index from the table's rows and make it the table's "
                               "index (writes look keys up in it instead of reading the keys of whole partitions).")
    ] = False,
    file_groups: Annotated[int, typer.Option(help="File groups of the record index (Hudi's minimum is 10).",
                                             min=1, max=9999)] = 10,
    json_output: JsonOption = False,
) -> None:
    """Build the metadata table's files partition from a listing of storage (replacing any metadata table) and turn
    it on; from then on every lakegate commit, compaction, clean and rollback keeps it up to date."""
    from tablecore.metadata_table import rebuild as run_rebuild
    from tablecore.services.record_index_build import rebuild_with_record_index

    require_table(path)
    out = Output(json_output)
    if record_index:
        with out.progress(f"reading the keys of {path} and writing its metadata table with the record index"):
            keys = rebuild_with_record_index(path, file_groups=file_groups)
        out.result({"table": path, "keys": keys, "file_groups": file_groups},
                   lambda: out.fields({"keys indexed": keys, "file groups": file_groups}, title=path))
        return
    with out.progress(f"listing {path} and writing its metadata table"):
        files = run_rebuild(path)
    out.result({"table": path, "files": files}, lambda: out.fields({"files listed": files}, title=path))


@metadata_app.command("verify")
def verify(
    path: Annotated[str, typer.Argument(help="Base path or URI of the table.")],
    json_output: JsonOption = False,
) -> None:
    """Check that the metadata table lists exactly the committed data files storage holds, with their sizes, and that
    its record index (if any) places every row's key in the file group that holds it; exit 1 with each difference
    if not (`lakegate table metadata rebuild [--record-index]` repairs it)."""
    from tablecore.io import file_io_for
    from tablecore.metadata_table import record_index_in_use
    from tablecore.metadata_table import verify as run_verify
    from tablecore.services.record_index_build import verify_record_index
    from tablecore.table_properties import read_config

    require_table(path)
    out = Output(json_output)
    problems = run_verify(path)
    if not problems and record_index_in_use(read_config(file_io_for(path), path)):
        problems = verify_record_index(path)
    out.result({"table": path, "agrees": not problems, "problems": problems},
               lambda: out.fields({"agrees with storage": "yes" if not problems else "no",
                                   **{f"problem {i + 1}": p for i, p in enumerate(problems)}}, title=path))
    if problems:
        raise typer.Exit(1)
