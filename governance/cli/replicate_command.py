"""``lakegate table replicate SRC DST [--json]``: copy what completed in a table since the last replication to a
second location (another directory or bucket), instant by instant, so that DST always reads as SRC did as of DST's
newest instant (:func:`tablecore.replicate`, docs/replication.md). No Spark session is started: the files are copied
through the tables' storage in this process.

Exit codes: 0 replicated (also when there was nothing new), 3 no table at SRC, 4 DST is another table, was written to
or is being replicated into by another process, 6 SRC is damaged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from governance.cli.inputs import check_local_directory, require_table
from governance.cli.output import JsonOption, Output
from governance.cli.table_commands import table_app

if TYPE_CHECKING:
    from tablecore import ReplicationResult

logger = logging.getLogger(__name__)

__all__ = ["replicate"]


def _size(n: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 MB``."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _human(out: Output, result: ReplicationResult) -> None:
    actions: dict[str, int] = {}
    for _, action in result.instants:
        actions[action] = actions.get(action, 0) + 1
    kinds = ", ".join(f"{n} {a}" for a, n in sorted(actions.items()))
    copied = f"{len(result.instants)} instant{'s' if len(result.instants) != 1 else ''}"
    out.fields({
        "instants copied": f"{copied} ({kinds})" if kinds else copied,
        "files copied": f"{result.files_copied} ({_size(result.bytes_copied)})",
        "files deleted": result.files_deleted,
        "instants archived": result.instants_archived,
        "replicated instant": result.replicated_instant or "none (the source has no completed write)",
        "elapsed": f"{result.elapsed:.2f} s",
    }, title=f"{result.source} -> {result.target}")
    if result.waiting_for:
        out.warn(f"stopped early: {result.waiting_for}")


@table_app.command("replicate")
def replicate(
    src: Annotated[str, typer.Argument(help="Base path or URI of the table to replicate.")],
    dst: Annotated[str, typer.Argument(help="Where the replica lives: a new location, or an earlier replica of SRC.")],
    json_output: JsonOption = False,
) -> None:
    """Copy the instants completed in SRC since the last replication (their files, then their timeline files) into
    DST, so that DST always reads as SRC did as of DST's newest instant; resumable after a crash. The first run copies
    the whole table; a DST that is another table or was written to is refused (exit 4)."""
    from tablecore import replicate as run_replication

    require_table(src)
    check_local_directory(dst)
    out = Output(json_output)
    with out.progress(f"replicating {src} into {dst}"):
        result = run_replication(src, dst)
    out.result(result.to_dict(), lambda: _human(out, result))
