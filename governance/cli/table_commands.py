"""``lakegate table ...``: create, inspect, read and maintain tablecore tables (Apache Hudi v6 format).

Reads print at most ``--limit`` rows: the rows are taken with a Spark ``limit``, never by collecting the table.
"""

from __future__ import annotations

import enum
import logging
import re
from typing import TYPE_CHECKING, Annotated, Any

import typer

from governance.cli.inputs import check_local_directory, local_path, require_table, table_exists
from governance.cli.output import JsonOption, Output, cli_spark_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tablecore import CommitResult, Table

logger = logging.getLogger(__name__)

table_app = typer.Typer(help="Create, inspect, read and maintain tables (Apache Hudi v6 format).",
                        no_args_is_help=True)

META_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                "_hoodie_file_name")

TablePath = Annotated[str, typer.Argument(help="Base path or URI of the table.")]
Instant = Annotated[str, typer.Argument(help="An instant time of the table's timeline (see `table history`).")]
Limit = Annotated[int, typer.Option("--limit", "-n", min=0, help="Print at most this many rows.")]
Where = Annotated[str | None, typer.Option("--where", help="A Spark SQL filter, e.g. \"dt = '2024-01-01'\".")]
Columns = Annotated[list[str] | None, typer.Option(
    "--columns", "-c", help="Columns to print (repeat or comma-separate; default: all data columns).")]
Meta = Annotated[bool, typer.Option(
    "--meta", help="Print every _hoodie_* meta column (default: only _hoodie_commit_time).")]


class TableKind(enum.StrEnum):
    """``--type`` of ``table create``."""

    cow = "cow"
    mor = "mor"


class IndexKind(enum.StrEnum):
    """``--index`` of ``table create``."""

    simple = "simple"
    bloom = "bloom"
    bucket = "bucket"


class CdcModeOption(enum.StrEnum):
    """``--cdc`` of ``table create``: what Hudi's CDC log files hold (``hoodie.table.cdc.supplemental.logging.mode``).
    """

    off = "off"
    data_before_after = "data_before_after"
    data_before = "data_before"
    op_key_only = "op_key_only"


class MergeModeOption(enum.StrEnum):
    """``--merge-mode`` of ``table create``."""

    commit_time = "commit-time"
    event_time = "event-time"


class View(enum.StrEnum):
    """``--view`` of ``table read``."""

    snapshot = "snapshot"
    read_optimized = "read_optimized"


class CompactionStrategy(enum.StrEnum):
    """``--strategy`` of ``table compact``."""

    all = "all"
    num_commits = "num_commits"
    log_ratio = "log_ratio"


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """Bytes of a size such as ``134217728``, ``128MB``, ``128m`` or ``1GiB`` (units are powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a size (bytes, or a number with KB, MB, GB)")
    unit = (m[2] or "").lower()[:1]
    return int(m[1]) * _UNITS[unit]


def _split(values: list[str] | None) -> list[str]:
    """Repeated options and comma-separated values, flattened."""
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def _spark() -> SparkSession:
    return cli_spark_session("lakegate-cli")


def _open(path: str, out: Output) -> Table:
    """Open the table at ``path``; a local path that is a file (exit 2) or a missing table (exit 3) is reported
    before a JVM is started for nothing (:func:`~governance.cli.inputs.require_table`)."""
    from tablecore import Table

    require_table(path)
    with out.progress(f"opening {path}"):
        return Table.open(path, spark=_spark())


def _commit_doc(result: CommitResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"instant": result.instant, "operation": result.operation, "inserted": result.inserted,
            "updated": result.updated, "deleted": result.deleted, "files_written": result.files_written,
            "bytes_written": result.bytes_written, "replaced_file_groups": result.replaced_file_groups}


def _config_doc(table: Table) -> dict[str, Any]:
    return table.config.model_dump(mode="json")


# ---- create / show / history ------------------------------------------------------------------------------------

@table_app.command("create")
def create(
    path: TablePath,
    name: Annotated[str, typer.Option("--name", help="Table name: letters, digits and '_'.")],
    key: Annotated[list[str], typer.Option(
        "--key", "-k", help="Record key field(s): repeat or comma-separate for a composite key.")],
    ordering_field: Annotated[str | None, typer.Option(
        "--ordering-field", help="Precombine field: the highest value wins within a batch.")] = None,
    partition: Annotated[list[str] | None, typer.Option(
        "--partition", "-p", help="Partition field(s): repeat or comma-separate (default: not partitioned).")] = None,
    table_type: Annotated[TableKind, typer.Option(
        "--type", help="cow: copy-on-write; mor: merge-on-read (updates go to log files).")] = TableKind.cow,
    index: Annotated[IndexKind, typer.Option(
        "--index", help="simple: join with the keys of the touched partitions; bloom: prune files by the key range "
                        "and bloom filter in their footers first; bucket: hash to --buckets.")
    ] = IndexKind.simple,
    buckets: Annotated[int | None, typer.Option(
        "--buckets", min=1, help="Buckets per partition (--index bucket).")] = None,
    merge_mode: Annotated[MergeModeOption, typer.Option(
        "--merge-mode", help="commit-time: the newest write wins; event-time: the higher ordering value wins.")
    ] = MergeModeOption.commit_time,
    hive_style: Annotated[bool, typer.Option(
        "--hive-style/--no-hive-style", help="field=value partition directories (default) or plain values.")
    ] = True,
    url_encode_partitions: Annotated[bool, typer.Option(
        "--url-encode-partitions", help="Hive-escape special characters in partition values.")] = False,
    target_file_size: Annotated[str | None, typer.Option(
        "--target-file-size", help="Target base file size, e.g. 128MB.")] = None,
    small_file_limit: Annotated[str | None, typer.Option(
        "--small-file-limit", help="Base files below this size take new inserts, e.g. 100MB.")] = None,
    inline_compaction: Annotated[int, typer.Option(
        "--inline-compaction", min=0, help="mor: compact after a write once this many delta commits accumulated "
        "(0: only on `table compact`).")] = 0,
    database: Annotated[str, typer.Option("--database", help="Hive database name.")] = "default",
    schema: Annotated[str | None, typer.Option(
        "--schema", help="Data schema as Spark DDL, e.g. \"uuid string, ts long, dt string\" (recorded as the "
        "create schema; default: set by the first write).")] = None,
    cdc: Annotated[CdcModeOption, typer.Option(
        "--cdc", help="Write Hudi's CDC log files (hoodie.table.cdc.enabled) holding before and after images, "
        "before images, or operations and keys; CDC reads work on every table without them (docs/cdc.md).")
    ] = CdcModeOption.off,
    json_output: JsonOption = False,
) -> None:
    """Create an empty table at PATH."""
    from tablecore import Table, TableConfig, TableExistsError

    # a local PATH that is a file (or below one), or an existing local table, fails at once, before Spark starts
    check_local_directory(path)
    if local_path(path) is not None and table_exists(path):
        raise TableExistsError(f"a table already exists at {path}")
    out = Output(json_output)
    settings: dict[str, Any] = {
        "name": name, "record_key": _split(key), "ordering_field": ordering_field,
        "partition_fields": _split(partition),
        "table_type": "MERGE_ON_READ" if table_type is TableKind.mor else "COPY_ON_WRITE",
        "index_type": index.value.upper(), "bucket_count": buckets,
        "merge_mode": "EVENT_TIME_ORDERING" if merge_mode is MergeModeOption.event_time else "COMMIT_TIME_ORDERING",
        "hive_style_partitioning": hive_style, "url_encode_partitions": url_encode_partitions,
        "inline_compaction_delta_commits": inline_compaction, "database_name": database,
    }
    if cdc is not CdcModeOption.off:
        settings.update(cdc_enabled=True, cdc_mode=cdc.value.upper())
    if target_file_size is not None:
        settings["target_file_size"] = parse_size(target_file_size)
    if small_file_limit is not None:
        settings["small_file_limit"] = parse_size(small_file_limit)
    config = TableConfig.build(**settings)
    with out.progress(f"creating {path}"):
        spark = _spark()
        struct = None
        if schema is not None:
            from pyspark.sql.types import StructType

            parsed = StructType.fromDDL(schema)
            if not isinstance(parsed, StructType):
                raise typer.BadParameter(f"{schema!r} is not a list of columns", param_hint="--schema")
            struct = parsed
        table = Table.create(path, config, spark=spark, schema=struct)
    doc = {"path": table.path, "name": table.name, "config": _config_doc(table)}
    out.result(doc, lambda: out.line(f"created table {table.name!r} ({config.table_type}, Hudi v6) at {table.path}"))


@table_app.command("show")
def show(path: TablePath, json_output: JsonOption = False) -> None:
    """Show a table's configuration, columns, row count, latest instant, savepoints and staged commits."""
    from tablecore.table import describe

    out = Output(json_output)
    table = _open(path, out)
    info = describe(table)
    struct = table.schema()
    columns = [{"name": f.name, "type": f.dataType.simpleString(), "nullable": f.nullable}
               for f in (struct.fields if struct is not None else [])]
    staged = [s.instant for s in table.staged()]
    latest = table.latest_instant()
    with out.progress("counting rows"):
        rows = table.count() if latest is not None else 0  # footers and log keys: no row is read
    doc = {**info, "schema": columns, "rows": rows, "latest_instant": latest, "savepoints": table.savepoints(),
           "staged": staged}

    def human() -> None:
        config = info["config"]
        out.fields({"path": table.path, "type": config["table_type"], "record key": ", ".join(config["record_key"]),
                    "ordering field": config["ordering_field"],
                    "partition fields": ", ".join(config["partition_fields"]) or "(not partitioned)",
                    "merge mode": config["merge_mode"],
                    "index": config["index_type"] + (f" ({config['bucket_count']} buckets)"
                                                     if config["bucket_count"] else ""),
                    "rows": f"{rows:,}", "latest instant": doc["latest_instant"], "instants": len(info["timeline"]),
                    "savepoints": ", ".join(doc["savepoints"]) or "none", "staged": ", ".join(staged) or "none"},
                   title=f"table {table.name}")
        if columns:
            out.table(["column", "type", "nullable"], [(c["name"], c["type"], c["nullable"]) for c in columns])
        else:
            out.line("no schema yet: the first write sets it")

    out.result(doc, human)


@table_app.command("history")
def history(path: TablePath, json_output: JsonOption = False) -> None:
    """Show the timeline: every instant with action, state, operation and the counts of completed writes."""
    from tablecore.format.instant import State

    out = Output(json_output)
    table = _open(path, out)
    instants = []
    for i in table.timeline():
        entry: dict[str, Any] = {"instant": i.instant, "action": i.action, "state": i.state,
                                 "operation": i.operation, "staged": i.staged,
                                 "inserted": None, "updated": None, "deleted": None}
        if i.state == State.COMPLETED.value and i.operation is not None:
            stats = table.commit_metadata(i.instant).write_stats
            entry["inserted"] = sum(s.num_inserts for s in stats)
            entry["updated"] = sum(s.num_update_writes for s in stats)
            entry["deleted"] = sum(s.num_deletes for s in stats)
        instants.append(entry)
    doc = {"path": table.path, "instants": instants}

    def human() -> None:
        if not instants:
            out.line("the timeline is empty: no writes yet")
            return
        out.table(["instant", "action", "state", "operation", "inserted", "updated", "deleted"],
                  [(e["instant"], e["action"] + (" (staged)" if e["staged"] else ""), e["state"],
                    e["operation"] or "", *("" if e[k] is None else e[k] for k in ("inserted", "updated", "deleted")))
                   for e in instants], title=f"timeline of {table.name}")

    out.result(doc, human)


# ---- reads ------------------------------------------------------------------------------------------------------

def _print_rows(out: Output, df: DataFrame, *, limit: int, where: str | None, columns: list[str] | None,
                meta: bool, doc: dict[str, Any], title: str) -> None:
    """Filter and project ``df``, take at most ``limit`` rows (plus one, to tell whether more exist) and print."""
    if where:
        df = df.where(where)
    if columns:
        df = df.select(*columns)
    elif not meta:
        df = df.drop(*[c for c in META_COLUMNS[1:] if c in df.columns])
    names = df.columns
    with out.progress("reading rows"):
        taken = df.limit(limit + 1).collect() if limit else []
    truncated = len(taken) > limit
    rows = [r.asDict(recursive=True) for r in taken[:limit]]
    doc = {**doc, "where": where, "columns": names, "limit": limit, "truncated": truncated, "rows": rows}

    def human() -> None:
        caption = (f"{len(rows)} rows shown, more match (raise --limit)" if truncated
                   else f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
        out.table(names, [[r[n] for n in names] for r in rows], title=title, caption=caption)

    out.result(doc, human)


@table_app.command("read")
def read(
    path: TablePath,
    as_of: Annotated[str | None, typer.Option("--as-of", help="Time-travel to this completed instant.")] = None,
    view: Annotated[View, typer.Option(
        "--view", help="snapshot, or read_optimized (merge-on-read: base files only).")] = View.snapshot,
    where: Where = None,
    columns: Columns = None,
    limit: Limit = 20,
    meta: Meta = False,
    json_output: JsonOption = False,
) -> None:
    """Print rows of the table (the latest snapshot, or as of an instant)."""
    out = Output(json_output)
    table = _open(path, out)
    df = table.read(as_of=as_of, view=view.value)
    _print_rows(out, df, limit=limit, where=where, columns=_split(columns), meta=meta,
                doc={"path": table.path, "as_of": as_of, "view": view.value},
                title=f"{table.name}" + (f" as of {as_of}" if as_of else ""))


@table_app.command("changes")
def changes(
    path: TablePath,
    start: Annotated[str, typer.Option(
        "--start", help="Exclusive start instant (0: from the beginning).")],
    end: Annotated[str | None, typer.Option(
        "--end", help="Inclusive end instant (default: the latest completed write).")] = None,
    cdc: Annotated[bool, typer.Option(
        "--cdc", help="Every change, in commit order: op (i/u/d), commit_time, completion_time, record_key, "
        "partition_path and before_<column> / after_<column>; deletes included.")] = False,
    where: Where = None,
    columns: Columns = None,
    limit: Limit = 20,
    meta: Meta = False,
    json_output: JsonOption = False,
) -> None:
    """Print the records that commits in (START, END] wrote: the latest in-range state of every changed key, or with
    --cdc every change with its before and after image."""
    out = Output(json_output)
    table = _open(path, out)
    if cdc:
        with out.progress("planning the CDC read"):
            df = table.read_cdc(start, end, flatten=True)
        if not meta and not columns:
            from governance.source_batch import without_meta

            df = without_meta(df, prefixes=("before_", "after_"))
    else:
        df = table.read_changes(start=start, end=end)
    _print_rows(out, df, limit=limit, where=where, columns=_split(columns), meta=meta,
                doc={"path": table.path, "start": start, "end": end, "cdc": cdc},
                title=f"{'CDC' if cdc else 'changes'} of {table.name} in ({start}, {end or 'latest'}]")


# ---- table services ---------------------------------------------------------------------------------------------

@table_app.command("compact")
def compact(
    path: TablePath,
    strategy: Annotated[CompactionStrategy, typer.Option(
        "--strategy", help="all slices with logs; num_commits: at least --min-delta-commits; log_ratio: log bytes "
        ">= --min-log-ratio x base bytes.")] = CompactionStrategy.all,
    min_delta_commits: Annotated[int, typer.Option("--min-delta-commits", min=1)] = 1,
    min_log_ratio: Annotated[float, typer.Option("--min-log-ratio", min=0.0)] = 0.0,
    json_output: JsonOption = False,
) -> None:
    """Merge-on-read: merge log files into new base files (one commit)."""
    out = Output(json_output)
    table = _open(path, out)
    with out.progress("compacting"):
        result = table.compact(strategy=strategy.value, min_delta_commits=min_delta_commits,
                               min_log_ratio=min_log_ratio)
    doc: dict[str, Any] = {"path": table.path, "compacted": result is not None, "result": _commit_doc(result)}

    def human() -> None:
        if result is None:
            why = "a copy-on-write table has no log files" if table.config.table_type == "COPY_ON_WRITE" else \
                "no file slice matched the strategy"
            out.line(f"nothing to compact: {why}")
        else:
            out.fields(doc["result"], title="compaction")

    out.result(doc, human)


@table_app.command("cluster")
def cluster(
    path: TablePath,
    sort_by: Annotated[list[str] | None, typer.Option(
        "--sort-by", help="Columns to sort each rewritten group by (repeat or comma-separate).")] = None,
    partition: Annotated[list[str] | None, typer.Option(
        "--partition", "-p", help="Partition paths to cluster, e.g. dt=2024-01-01 (default: all).")] = None,
    small_file_limit: Annotated[str | None, typer.Option(
        "--small-file-limit", help="Rewrite file groups below this size (default: the table's).")] = None,
    target_file_size: Annotated[str | None, typer.Option(
        "--target-file-size", help="Size of the new base files (default: the table's).")] = None,
    json_output: JsonOption = False,
) -> None:
    """Rewrite small file groups into target-size ones, optionally sorted (one replacecommit)."""
    out = Output(json_output)
    table = _open(path, out)
    parts = _split(partition)
    with out.progress("clustering"):
        result = table.cluster(partitions=parts or None, sort_by=_split(sort_by),
                               small_file_limit=parse_size(small_file_limit) if small_file_limit else None,
                               target_file_size=parse_size(target_file_size) if target_file_size else None)
    doc: dict[str, Any] = {"path": table.path, "clustered": result is not None, "result": _commit_doc(result)}

    def human() -> None:
        if result is None:
            out.line("nothing to cluster: no partition had small file groups")
        else:
            out.fields(doc["result"], title="clustering")

    out.result(doc, human)


@table_app.command("clean")
def clean(
    path: TablePath,
    retain_commits: Annotated[int | None, typer.Option(
        "--retain-commits", min=1, help="Keep what reads as of the latest N writes need (default policy, N=10).")
    ] = None,
    retain_file_versions: Annotated[int | None, typer.Option(
        "--retain-file-versions", min=1, help="Keep the newest N slices of every file group instead.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Delete file slices no retained snapshot needs (savepointed files are kept)."""
    if retain_commits is not None and retain_file_versions is not None:
        raise typer.BadParameter("give --retain-commits or --retain-file-versions, not both")
    out = Output(json_output)
    table = _open(path, out)
    with out.progress("cleaning"):
        result = table.clean(retain_commits=retain_commits, retain_file_versions=retain_file_versions)
    doc = {"path": table.path, "cleaned": result is not None,
           "result": None if result is None else {"instant": result.instant, "files_deleted": result.files_deleted,
                                                  "earliest_retained": result.earliest_retained}}

    def human() -> None:
        if result is None:
            out.line("nothing to clean")
        else:
            out.line(f"clean {result.instant}: {result.files_deleted} files deleted; the earliest instant still "
                     f"readable is {result.earliest_retained}")

    out.result(doc, human)


@table_app.command("rollback")
def rollback(path: TablePath, instant: Instant, json_output: JsonOption = False) -> None:
    """Roll back INSTANT: the newest completed write or compaction, or a pending instant."""
    out = Output(json_output)
    table = _open(path, out)
    with out.progress(f"rolling back {instant}"):
        result = table.rollback(instant)
    doc = {"path": table.path, "instant": result.instant, "rolled_back": result.rolled_back,
           "action": result.action, "files_deleted": result.files_deleted,
           "rollback_blocks": result.rollback_blocks}
    out.result(doc, lambda: out.line(
        f"rolled back {result.action} {result.rolled_back} (rollback {result.instant}: {result.files_deleted} files "
        f"deleted, {result.rollback_blocks} rollback blocks)"))


@table_app.command("savepoint")
def savepoint(
    path: TablePath,
    instant: Annotated[str | None, typer.Argument(
        help="A completed write to savepoint (default: the latest).")] = None,
    comments: Annotated[str, typer.Option("--comments", help="Recorded in the savepoint.")] = "",
    json_output: JsonOption = False,
) -> None:
    """Savepoint the snapshot as of INSTANT: cleaning keeps its files and `table restore` can return to it."""
    out = Output(json_output)
    table = _open(path, out)
    with out.progress("savepointing"):
        done = table.savepoint(instant, comments=comments)
    doc = {"path": table.path, "savepoint": done, "savepoints": table.savepoints()}
    out.result(doc, lambda: out.line(f"savepointed {done}"))


@table_app.command("restore")
def restore(path: TablePath, instant: Instant, json_output: JsonOption = False) -> None:
    """Return the table to the savepoint INSTANT, rolling back every later instant (newest first)."""
    out = Output(json_output)
    table = _open(path, out)
    with out.progress(f"restoring {instant}"):
        rolled_back = table.restore(instant)
    doc = {"path": table.path, "restored_to": instant, "rolled_back": rolled_back}
    out.result(doc, lambda: out.line(
        f"restored to {instant}: rolled back {', '.join(rolled_back)}" if rolled_back
        else f"restored to {instant}: nothing was after it"))

