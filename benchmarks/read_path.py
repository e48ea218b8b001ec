"""Read-path benchmark: Spark's Parquet reader vs the Arrow reader in executors, on local disk, for the same plans.

tablecore's Spark engine executes a :class:`~tablecore.read_planning.ReadPlan` in one of two ways
(``tablecore/spark/reader.py``):

* ``spark`` — :func:`~tablecore.spark.reader.read_plan`, what local disk and HDFS take today: Spark's vectorized
  Parquet reader over the base files (column pruning, filter push-down), plus, for merge-on-read slices with logs,
  the logs decoded in executors and an anti-join of the base rows they supersede;
* ``arrow`` — :func:`~tablecore.spark.reader.read_plan_in_tasks`, what storage Spark cannot open takes (``s3://``
  without a Hadoop connector): one ``mapInArrow`` job in which each task reads whole file slices with pyarrow and
  merges their logs. Spark cannot push anything into it: every column of every row is read and handed to the JVM.

Both run here on the same local-disk tables and the same plans. For each size (``--sizes``, ``ROWSxDAYS[rRECENT]``)
the seeded trips data of ``trips.py`` is ``bulk_insert``ed into a copy-on-write and a merge-on-read table (simple
index), then ``--upserts`` batches of ``--batch`` rows (``--updates`` updates spread over the newest ``RECENT`` days,
default ``--recent``, 0: all days, and new keys in the newest day) are upserted: the merge-on-read table keeps them
in log files (uncompacted). The plans (built as ``Table.read`` / ``read_changes`` build them, with
``file_io_for(path)``):

* ``snapshot`` (both table types), ``read_optimized`` (merge-on-read: base files only),
* ``incremental``: ``read_changes(start=...)`` of the last ``--incremental`` commits.

Each plan is read by both paths and consumed by three queries: ``full_scan`` (every column through Spark's ``noop``
sink), ``filter_count`` (``count()`` of the rows with ``city = 'tokyo'``, about 1 in 18) and ``project_2`` (``uuid``
and ``fare`` through the ``noop`` sink). After an untimed warm-up round (every query on both paths), every
measurement runs ``--repeat`` times, the two paths alternating (the first path changes every round), each run after
a JVM GC and a short pause; medians are reported. The DataFrame is built inside the timed block (``read_plan``
decides its joins there), the plan outside it (the same for both).

Checks (untimed): both paths give the same rows (row count and the sum of ``xxhash64`` over all columns, computed in
Spark: no table data reaches the driver) and the same ``filter_count``.

Results: ``benchmarks/results/read_path.json`` and ``read_path.png``. Run from the repository root:
``make bench-read-path`` or ``python benchmarks/read_path.py [--sizes 200000x30,1000000x365r7 ...]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from common import git_sha, pyplot, write_results  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from trips import (  # noqa: E402
    Timer,
    _hash_int,
    first_id_of_day,
    machine,
    noop_scan,
    start_bench,
    trips,
    trips_parser,
)

from tablecore import Table, TableConfig  # noqa: E402
from tablecore.io import FileIO, file_io_for  # noqa: E402
from tablecore.read_planning import ReadPlan, plan_incremental, plan_snapshot  # noqa: E402
from tablecore.spark.reader import read_plan, read_plan_in_tasks  # noqa: E402

TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
SHORT = {"COPY_ON_WRITE": "cow", "MERGE_ON_READ": "mor"}
READS = {"COPY_ON_WRITE": ("snapshot", "incremental"),
         "MERGE_ON_READ": ("snapshot", "read_optimized", "incremental")}
QUERIES = ("full_scan", "filter_count", "project_2")
PATHS = ("spark", "arrow")
READERS: dict[str, Callable[[SparkSession, FileIO, ReadPlan], DataFrame]] = {
    "spark": read_plan, "arrow": read_plan_in_tasks}
FILTER_CITY = "tokyo"
_SIZE_RE = re.compile(r"^(?P<rows>\d+)x(?P<days>\d+)(?:r(?P<recent>\d+))?$")


# ---- options ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Size:
    """One pair of tables: ``rows`` trips over ``days`` days, the upserts' updates in the newest ``recent`` days
    (0: all days)."""

    rows: int
    days: int
    recent: int = 0

    @property
    def label(self) -> str:
        """``ROWSxDAYS``, with ``rRECENT`` when the updates fall in the newest days only."""
        return f"{self.rows}x{self.days}" + (f"r{self.recent}" if self.recent else "")


def parse_sizes(text: str, recent: int = 0) -> list[Size]:
    """``"200000x30,1000000x365r7"`` -> ``[Size(200000, 30, recent), Size(1000000, 365, 7)]``."""
    out = []
    for part in filter(None, (s.strip() for s in text.split(","))):
        m = _SIZE_RE.match(part.lower().replace("_", ""))
        if m is None:
            raise ValueError(part)
        out.append(Size(int(m["rows"]), int(m["days"]), int(m["recent"]) if m["recent"] else recent))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (the trips options, with ``--sizes`` instead of ``--rows``/``--days``)."""
    p = trips_parser(__doc__, "read_path.json", "JSON results; the chart is written next to it with a .png suffix")
    p.set_defaults(batch=10_000, updates=8_000)
    p.add_argument("--sizes", default="200000x30,1000000x365,1000000x365r7",
                   help="tables as ROWSxDAYS[rRECENT], comma-separated: RECENT overrides --recent for that pair "
                        "(--rows / --days are ignored)")
    p.add_argument("--recent", type=int, default=0,
                   help="updates fall in the newest N days of each table (0: spread over all days)")
    p.add_argument("--upserts", type=int, default=3, help="upserts after the bulk insert (MOR: left in logs)")
    p.add_argument("--incremental", type=int, default=2, help="the incremental read covers the last N commits")
    p.add_argument("--repeat", type=int, default=3, help="runs of each (plan, query, path); medians are reported")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="skip the untimed round of every query on both paths before a plan's timed rounds")
    p.add_argument("--pause", type=float, default=0.3, help="seconds of pause after the JVM GC before each run")
    args = p.parse_args(argv)
    try:
        args.size_list = parse_sizes(args.sizes, args.recent)
    except ValueError:
        p.error(f"bad --sizes {args.sizes!r}: expected ROWSxDAYS[rRECENT][,...]")
    if not args.size_list or any(not 1 <= s.days <= s.rows or s.recent > s.days for s in args.size_list):
        p.error("every size needs 1 <= DAYS <= ROWS and RECENT <= DAYS")
    if len({s.label for s in args.size_list}) < len(args.size_list):
        p.error("--sizes repeats a size")
    if not 0 <= args.updates <= args.batch:
        p.error("need 0 <= --updates <= --batch")
    if not 1 <= args.incremental <= args.upserts or args.repeat < 1 or args.recent < 0:
        p.error("need 1 <= --incremental <= --upserts, --repeat >= 1, --recent >= 0")
    return args


# ---- tables -----------------------------------------------------------------------------------------------------
def round_batch(spark: SparkSession, round_no: int, *, rows: int, days: int, batch: int, updates: int, recent: int,
                seed: int) -> DataFrame:
    """Upsert ``round_no``: ``updates`` distinct existing keys of the newest ``recent`` days (one per equal stride,
    a different one each round; ``ts`` later than every earlier round's, ``tip`` changed) and new keys in the newest
    day (a fresh id range each round). As ``s3.py``'s batches (not imported: it starts the S3 test server's code)."""
    lo = first_id_of_day(max(0, days - recent), rows, days)
    stride = (rows - lo) // updates if updates else 1
    if updates and stride < 1:
        raise SystemExit(f"{updates} updates but only {rows - lo} keys in the newest {recent} days; lower --updates")
    k = F.col("id")
    ids = spark.range(updates).select((F.lit(lo) + k * stride + _hash_int(k, seed, 1000 + round_no, stride))
                                      .alias("id"))
    bump = _hash_int(F.xxhash64(F.col("uuid")), seed, 2000 + round_no, 3_600_000)
    upd = (trips(ids, rows=rows, days=days, seed=seed)
           .withColumn("ts", F.col("ts") + F.lit(round_no * 7_200_000) + bump)
           .withColumn("tip", F.round(F.col("tip") + F.lit(0.5 * round_no) + bump / 1_000_000.0, 2)))
    offset = 2 * rows + round_no * batch  # past the base ids; disjoint between rounds
    new = trips(spark.range(offset, offset + batch - updates), rows=rows, days=days, seed=seed, day=F.lit(days - 1))
    return upd.unionByName(new)


def build_tables(spark: SparkSession, timer: Timer, work: Path, args: argparse.Namespace,
                 size: Size) -> dict[str, Table]:
    """A copy-on-write and a merge-on-read table of ``rows`` trips over ``days`` days, each after ``--upserts``
    upserts (merge-on-read: left in log files). Untimed."""
    rows, days, recent, label = size.rows, size.days, size.recent or size.days, size.label
    gen = {"rows": rows, "days": days, "seed": args.seed}
    source = work / f"source_{label}.parquet"
    with timer.phase(f"{label}/generate", timed=False):
        trips(spark.range(rows), **gen).write.mode("overwrite").parquet(str(source))
        batches = []
        for r in range(1, args.upserts + 1):
            path = work / f"batch_{label}_{r}.parquet"
            (round_batch(spark, r, batch=args.batch, updates=args.updates, recent=recent, **gen)
             .coalesce(1).write.mode("overwrite").parquet(str(path)))
            batches.append(path)
    tables = {}
    for tt in TABLE_TYPES:
        config = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                             table_type=tt, index_type="SIMPLE")
        t = Table.create(str(work / f"trips-{SHORT[tt]}-{label}"), config, spark=spark)
        with timer.phase(f"{label}/{SHORT[tt]}/build", timed=False):
            t.bulk_insert(spark.read.parquet(str(source)))
            for path in batches:
                t.upsert(spark.read.parquet(str(path)))
        tables[tt] = t
    shutil.rmtree(source, ignore_errors=True)
    for path in batches:
        shutil.rmtree(path, ignore_errors=True)
    return tables


def read_plans(table: Table, io: FileIO, incremental: int) -> dict[str, ReadPlan]:
    """The plans of the reads measured on ``table``, built as :meth:`Table.read` and :meth:`Table.read_changes`
    build them: ``snapshot``, ``read_optimized`` (merge-on-read) and ``incremental`` (the last ``incremental``
    commits: ``start`` is the commit before them)."""
    timeline = table.protocol.load_timeline()
    config = table.config
    writes = timeline.completed_writes()
    start = writes[-(incremental + 1)].time
    plans = {"snapshot": plan_snapshot(io, timeline, config)}
    if config.table_type == "MERGE_ON_READ":
        plans["read_optimized"] = plan_snapshot(io, timeline, config, view="read_optimized")
    plans["incremental"] = plan_incremental(io, timeline, config, start=start, end=None)
    return {name: plans[name] for name in READS[config.table_type]}


def plan_stats(plan: ReadPlan) -> dict[str, Any]:
    """What a plan scans: base files and their bytes, slices with logs, log files and their bytes, the range."""
    logs = [lg for s in plan.log_slices for lg in s.logs]
    return {"base_files": len(plan.files), "base_mb": round(sum(f.size for f in plan.files) / 2**20, 2),
            "log_slices": len(plan.log_slices), "log_files": len(logs),
            "log_mb": round(sum(lg.size for lg in logs) / 2**20, 2), "start": plan.start, "end": plan.end}


# ---- queries and checks -----------------------------------------------------------------------------------------
def run_query(df: DataFrame, query: str) -> int | None:
    """Consume ``df`` with ``query``; the count for ``filter_count`` (nothing else reaches the driver)."""
    if query == "full_scan":
        noop_scan(df)
        return None
    if query == "filter_count":
        return df.where(F.col("city") == FILTER_CITY).count()
    if query == "project_2":
        noop_scan(df.select("uuid", "fare"))
        return None
    raise ValueError(f"unknown query {query!r}")


def checksum(df: DataFrame) -> dict[str, Any]:
    """Row count and the sum of ``xxhash64`` over all columns of every row (order-independent; one aggregate row to
    the driver; summed as a decimal so that it cannot overflow)."""
    h = F.xxhash64(*[F.col(c) for c in df.columns]).cast("decimal(38,0)")
    row = df.select(F.count(F.lit(1)).alias("n"), F.sum(h).alias("h")).first()
    assert row is not None
    return {"rows": int(row["n"]), "xxhash64_sum": str(row["h"] if row["h"] is not None else 0)}


def settle(spark: SparkSession, pause: float) -> None:
    """A JVM GC and a pause before a timed run, so that what the previous run left is not charged to the next."""
    spark.sparkContext._jvm.java.lang.System.gc()  # type: ignore[union-attr]
    time.sleep(pause)


def measure_plan(spark: SparkSession, timer: Timer, io: FileIO, plan: ReadPlan, label: str,
                 args: argparse.Namespace) -> dict[str, Any]:
    """Both paths on one plan: the checks, then every query ``--repeat`` times, paths alternating."""
    out: dict[str, Any] = {"plan": plan_stats(plan), "checksums": {}, "filter_counts": {}, "queries": {}}
    with timer.phase(f"{label}/checks", timed=False):
        for path in PATHS:
            out["checksums"][path] = checksum(READERS[path](spark, io, plan))
    out["same_rows"] = out["checksums"]["spark"] == out["checksums"]["arrow"]
    if args.warmup:
        with timer.phase(f"{label}/warmup", timed=False):
            for q in QUERIES:
                for path in PATHS:
                    run_query(READERS[path](spark, io, plan), q)
    runs: dict[str, dict[str, list[float]]] = {q: {path: [] for path in PATHS} for q in QUERIES}
    for i in range(1, args.repeat + 1):
        order = PATHS if i % 2 else PATHS[::-1]
        for q in QUERIES:
            for path in order:
                settle(spark, args.pause)
                name = f"{label}/{q}/{path}_{i}"
                with timer.phase(name):
                    result = run_query(READERS[path](spark, io, plan), q)
                runs[q][path].append(timer.seconds[name])
                if result is not None:
                    out["filter_counts"].setdefault(path, result)
    for q in QUERIES:
        med = {path: statistics.median(runs[q][path]) for path in PATHS}
        out["queries"][q] = {path: {"runs": runs[q][path], "median": med[path]} for path in PATHS}
        out["queries"][q]["arrow_over_spark"] = round(med["arrow"] / med["spark"], 3) if med["spark"] else None
    fc = out["filter_counts"]
    out["same_filter_count"] = fc.get("spark") == fc.get("arrow")
    out["ok"] = out["same_rows"] and out["same_filter_count"]
    if not out["ok"]:
        print(f"  WARNING: {label}: the paths disagree: {out['checksums']} {fc}")
    return out


# ---- the benchmark ----------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the tables of every size, measure every plan with both paths, return the results document."""
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    work, spark, sampler, timer = start_bench("read_path", args)
    results: dict[str, Any] = {}
    try:
        for s in args.size_list:
            size = s.label
            where = f"the newest {s.recent} days" if s.recent else "all days"
            print(f"size {size}: {s.rows:,} rows over {s.days} days, {args.upserts} upserts of {args.batch:,} rows "
                  f"({args.updates:,} updates in {where} + {args.batch - args.updates:,} new keys)", flush=True)
            tables = build_tables(spark, timer, work, args, s)
            results[size] = {"rows": s.rows, "days": s.days, "updates_in_newest_days": s.recent or s.days,
                             "tables": {}}
            for tt, table in tables.items():
                io = file_io_for(table.path)
                assert io.hadoop_compatible, "the benchmark compares the paths on storage Spark can open"
                results[size]["tables"][tt] = {
                    read: measure_plan(spark, timer, io, plan, f"{size}/{SHORT[tt]}/{read}", args)
                    for read, plan in read_plans(table, io, args.incremental).items()}
            for table in tables.values():
                shutil.rmtree(table.path, ignore_errors=True)
    finally:
        sampler.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "read_path",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_1_5_15": {"start": [round(x, 2) for x in load_start],
                                "end": [round(x, 2) for x in os.getloadavg()]},
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {
            "sizes": [{"label": s.label, "rows": s.rows, "days": s.days, "updates_in_newest_days": s.recent or s.days}
                      for s in args.size_list], "batch": args.batch,
            "updates": args.updates, "new_keys": args.batch - args.updates, "upserts": args.upserts,
            "incremental_commits": args.incremental, "repeat": args.repeat, "warmup_round": args.warmup,
            "pause_s": args.pause, "seed": args.seed, "driver_memory": args.driver_memory,
            "table": {"record_key": "uuid", "ordering_field": "ts", "partition_field": "dt", "index_type": "SIMPLE"},
            "paths": {"spark": "tablecore.spark.reader.read_plan",
                      "arrow": "tablecore.spark.reader.read_plan_in_tasks"},
            "queries": {"full_scan": "noop sink, every column", "filter_count": f"count() where city = '{FILTER_CITY}'",
                        "project_2": "noop sink, uuid and fare"},
        },
        "summary": summarize(results),
        "results": results,
    }


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """One row per (size, table type, read, query): the medians of both paths and their ratio; the checks."""
    rows = []
    for size, r in results.items():
        for tt, reads in r["tables"].items():
            for read, m in reads.items():
                for q in QUERIES:
                    v = m["queries"][q]
                    rows.append({"size": size, "table_type": tt, "read": read, "query": q,
                                 "spark_s": v["spark"]["median"], "arrow_s": v["arrow"]["median"],
                                 "arrow_over_spark": v["arrow_over_spark"], "base_files": m["plan"]["base_files"],
                                 "log_files": m["plan"]["log_files"]})
    checks = {f"{size}/{SHORT[tt]}/{read}": {"same_rows": m["same_rows"], "same_filter_count": m["same_filter_count"],
                                             **m["checksums"]["spark"]}
              for size, r in results.items() for tt, reads in r["tables"].items() for read, m in reads.items()}
    return {"medians": rows, "checks": checks, "checks_ok": all(c["same_rows"] and c["same_filter_count"]
                                                                for c in checks.values())}


# ---- output -----------------------------------------------------------------------------------------------------
def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """One panel per size: the median seconds of both paths for every (table type, read, query)."""
    plt = pyplot()
    if plt is None:
        return False
    sizes = list(doc["results"])
    fig, axes = plt.subplots(len(sizes), 1, figsize=(17, 4.8 * len(sizes)), squeeze=False)
    short_q = {"full_scan": "full", "filter_count": "filter", "project_2": "2 cols"}
    short_r = {"snapshot": "snap", "read_optimized": "RO", "incremental": "incr"}
    for ax, size in zip((a[0] for a in axes), sizes, strict=True):
        rows = [m for m in doc["summary"]["medians"] if m["size"] == size]
        for offset, p in ((-0.2, "spark"), (0.2, "arrow")):
            bars = ax.bar([i + offset for i in range(len(rows))], [m[f"{p}_s"] for m in rows], 0.4,
                          label="Spark Parquet reader (read_plan)" if p == "spark"
                          else "Arrow in executors (read_plan_in_tasks)")
            ax.bar_label(bars, fmt="%.2f", fontsize=7)
        ax.set_xticks(range(len(rows)), [f"{SHORT[m['table_type']].upper()} {short_r[m['read']]}\n"
                                         f"{short_q[m['query']]}\n{m['base_files']}/{m['log_files']}"
                                         for m in rows], fontsize=7)
        for i, m in enumerate(rows):
            if i and (m["table_type"], m["read"]) != (rows[i - 1]["table_type"], rows[i - 1]["read"]):
                ax.axvline(i - 0.5, color="0.8", linewidth=0.8)
        r = doc["results"][size]
        ax.set_ylabel("seconds (median)")
        recent = r["updates_in_newest_days"]
        spread = "all days" if recent == r["days"] else f"the newest {recent} days"
        ax.set_title(f"{r['rows']:,} rows over {r['days']} days (base files and log files per plan under the bars); "
                     f"updates in {spread}")
        ax.set_ylim(0, max(max(m["spark_s"], m["arrow_s"]) for m in rows) * 1.25)
        ax.legend(fontsize=8, loc="upper center", ncol=2)
    p = doc["parameters"]
    fig.suptitle(f"tablecore reads on local disk: Spark's Parquet reader vs Arrow in executors, median of "
                 f"{p['repeat']} ({doc['date'][:10]}, {doc['machine']['nproc']} cores)")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """A readable table of the medians and the checks."""
    lines = [f"{'size':<14}{'table':<6}{'read':<16}{'query':<14}{'files/logs':>11}{'spark s':>9}{'arrow s':>9}"
             f"{'arrow/spark':>13}"]
    for m in doc["summary"]["medians"]:
        lines.append(f"{m['size']:<14}{SHORT[m['table_type']]:<6}{m['read']:<16}{m['query']:<14}"
                     f"{m['base_files']:>6}/{m['log_files']:<4}{m['spark_s']:>9.2f}{m['arrow_s']:>9.2f}"
                     f"{m['arrow_over_spark']:>13.2f}")
    lines.append("")
    for label, c in doc["summary"]["checks"].items():
        lines.append(f"{label:<32} rows {c['rows']:>9,}  xxhash64 sum {c['xxhash64_sum']:>24}  same rows "
                     f"{c['same_rows']}  same filter count {c['same_filter_count']}")
    lines.append("verification: " + ("both paths give the same rows everywhere" if doc["summary"]["checks_ok"]
                                     else "FAILED (see results.*.checksums)"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the JSON and the chart, print a summary; exit 1 if the paths disagreed."""
    t0 = time.perf_counter()
    args = parse_args(argv)
    doc = run(args)
    write_results(doc, args.out, write_chart, summary, t0)
    return 0 if doc["summary"]["checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
